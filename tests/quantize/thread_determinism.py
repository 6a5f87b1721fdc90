#!/usr/bin/python3
"""Byte-identical results whatever the thread count and however the samples are stored (issue 16).

On mobilenetv2 (3 calibration images) and ppocrv4-det (a 320x320 crop of two text images): `qtool calibrate` and
`qtool quantize --data` (default config: calibration, bias correction, equalization and the accuracy guard all
run) with --threads 1, 2 and 8 write the same calibration table and the same model bytes; and calibrating from one
stacked array of N samples equals calibrating from N one-sample .npz files in a folder.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

work = tempfile.mkdtemp(prefix='qtool-threads-')
failures = []


def sha(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(args):
    r = subprocess.run([qtest.qtool()] + args, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f'qtool {" ".join(args)} exited {r.returncode}: {r.stderr.strip()[-300:]}')
    return r.returncode == 0


def case(key, model, name, array):
    stacked = os.path.join(work, f'{key}.npy')
    np.save(stacked, array)
    folder = os.path.join(work, f'{key}_files')
    os.makedirs(folder)
    for i in range(array.shape[0]):
        np.savez(os.path.join(folder, f'sample_{i:04d}.npz'), **{name: array[i:i + 1]})
    tables, models = {}, {}
    for t in ('1', '2', '8'):
        c = os.path.join(work, f'{key}.t{t}.json')
        q = os.path.join(work, f'{key}.t{t}.onnx')
        if run(['calibrate', model, '--data', f'{name}={stacked}', '-o', c, '--threads', t]):
            tables[t] = sha(c)
        if run(['quantize', model, '--data', f'{name}={stacked}', '-o', q, '--threads', t]):
            models[t] = sha(q)
    c_files = os.path.join(work, f'{key}.files.json')
    if run(['calibrate', model, '--data', folder, '-o', c_files, '--threads', '2']):
        tables['files'] = sha(c_files)
    ok = len(set(tables.values())) == 1 and len(tables) == 4 and len(set(models.values())) == 1 and len(models) == 3
    if not ok:
        failures.append(f'{key}: tables {tables}, models {models}')
    print(json.dumps({'model': key, 'tables': {k: v[:12] for k, v in tables.items()},
                      'models': {k: v[:12] for k, v in models.items()}, 'same': ok}))


mb = np.load(qtest.t('mobilenetv2_calib6.npy'))[:3]
case('mobilenetv2', os.path.join(qtest.MODELS, 'mobilenetv2-1.0-224-fp32.onnx'), 'input', mb)
det = np.concatenate([np.load(qtest.t('ppocrdet_ocr_en-01.npy'))[:, :, :320, :320],
                      np.load(qtest.t('ppocrdet_ocr_cn-02.npy'))[:, :, :320, :320]])
case('ppocrv4-det', os.path.join(qtest.MODELS, 'ppocrv4-det.onnx'), 'x', np.ascontiguousarray(det))
shutil.rmtree(work, ignore_errors=True)
print(json.dumps({'ok': not failures, 'failures': failures}))
sys.exit(1 if failures else 0)
