"""Shared helpers for qtool's quantization acceptance tests (run with Debian's /usr/bin/python3).

ONNX Runtime 1.30 runs through scripts/ort/*.mjs (node). Calibration here is a TEMPORARY stand-in for
`qtool calibrate` (lib/calib, another helper's work): it exposes every float tensor of the model as an
output, runs ONNX Runtime on the real inputs and writes min/max in the qtool-calibration JSON format.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SHARED = os.environ.get('QTOOL_SHARED_DIR', os.path.join(ROOT, '..', 'shared'))
MODELS = os.path.join(SHARED, 'models')
TENSORS = os.path.join(SHARED, 'data', 'tensors')
ORT_RUN = os.path.join(ROOT, 'scripts', 'ort', 'ort_run.mjs')
ORT_TOOLS = os.path.join(ROOT, 'scripts', 'ort', 'quantize_tools.mjs')


def t(name):
    return os.path.join(TENSORS, name)


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}\n")
        raise SystemExit(1)
    return r.stdout


def ort_run(model, inputs, outdir, threads=2, repeat=0, optimized=None):
    """Runs model on {name: npy path}; returns ({output: np.ndarray}, result json)."""
    cmd = ['node', ORT_RUN, model, '--output-dir', outdir, '--threads', str(threads), '--repeat', str(repeat)]
    for k, v in inputs.items():
        cmd += ['--input', f'{k}={v}']
    if optimized:
        cmd += ['--optimized-model', optimized]
    res = json.loads(sh(cmd).strip().splitlines()[-1])
    outs = {k: np.load(v['file']) for k, v in res['outputs'].items()}
    return outs, res


def calibrate_minmax(model, samples, out_json):
    """samples: list of {input name: npy path}. Writes a qtool-calibration v1 file with min/max ranges."""
    m = onnx.load(model)
    have = {o.name for o in m.graph.output}
    inits = {i.name for i in m.graph.initializer}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have and o not in inits:
                m.graph.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
    for i in m.graph.input:  # graph inputs' ranges too
        pass
    with tempfile.TemporaryDirectory() as d:
        tmp = os.path.join(d, 'all_outputs.onnx')
        onnx.save(m, tmp)
        stats_file = os.path.join(d, 'stats.json')
        cmd = ['node', ORT_TOOLS, 'minmax', tmp, '--out', stats_file]
        for s in samples:
            for k, v in s.items():
                cmd += ['--input', f'{k}={v}']
        sh(cmd)
        stats = json.load(open(stats_file))
    # Graph inputs: from the .npy data.
    for s in samples:
        for k, v in s.items():
            a = np.load(v)
            if a.dtype != np.float32:
                continue
            st = stats.setdefault(k, [float('inf'), float('-inf'), 0, 0])
            st[0] = min(st[0], float(a.min()))
            st[1] = max(st[1], float(a.max()))
            st[2] += int(a.size)
    tensors = {}
    for name, (lo, hi, count, nans) in sorted(stats.items()):
        if count == 0:
            continue
        tensors[name] = {'dtype': 'float', 'count': count, 'nan_count': nans, 'inf_count': 0, 'min': lo, 'max': hi,
                         'ranges': {'minmax': [lo, hi]}}
    doc = {'format': 'qtool-calibration', 'version': 1, 'model': os.path.basename(model), 'model_sha256': '',
           'samples': len(samples), 'batch_size': 1, 'settings': {'target_dtype': 'uint8'}, 'tensors': tensors}
    with open(out_json, 'w') as f:
        json.dump(doc, f)


def qtool():
    return os.environ.get('QTOOL_EXE', os.path.join(ROOT, 'build', 'bin', 'qtool'))


def quantize(model, out, calib, config=None, extra=()):
    cmd = [qtool(), 'quantize', model, '-o', out, '--calib', calib, '--json'] + list(extra)
    if config:
        cmd += ['--config', config]
    return json.loads(sh(cmd).strip().splitlines()[-1])


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
