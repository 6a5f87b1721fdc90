"""Shared helpers for qtool's quantization acceptance tests (run with Debian's /usr/bin/python3).

ONNX Runtime 1.30 runs through scripts/ort/*.mjs (node); calibration is `qtool calibrate` (lib/calib).
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


def ort_run(model, inputs, outdir, threads=2, repeat=0, optimized=None, against=None, opt_level=None):
    """Runs model on {name: npy path}; returns ({output: np.ndarray}, result json). against: a second model timed
    in the same process, runs alternating (result json gains latency_b_ms and ratio). opt_level: ORT's graph
    optimization level (all, basic, extended, disabled; default all)."""
    cmd = ['node', ORT_RUN, model, '--output-dir', outdir, '--threads', str(threads), '--repeat', str(repeat)]
    if opt_level:
        cmd += ['--opt-level', opt_level]
    if against:
        cmd += ['--against', against]
    for k, v in inputs.items():
        cmd += ['--input', f'{k}={v}']
    if optimized:
        cmd += ['--optimized-model', optimized]
    res = json.loads(sh(cmd).strip().splitlines()[-1])
    outs = {k: np.load(v['file']) for k, v in res['outputs'].items()}
    return outs, res


def data_args(samples, folder):
    """--data arguments for samples: a list of {input name: .npy path}. One dict: its files are passed as
    --data NAME=FILE (first axis = samples); several: written to `folder` as one .npz per sample."""
    if len(samples) == 1:
        return [a for k, v in samples[0].items() for a in ('--data', f'{k}={v}')]
    os.makedirs(folder, exist_ok=True)
    for i, smp in enumerate(samples):
        np.savez(os.path.join(folder, f'sample_{i:04d}.npz'), **{k: np.load(v) for k, v in smp.items()})
    return ['--data', folder]


def calibrate(model, samples, out_json, threads=2):
    """Runs `qtool calibrate` on samples (see data_args)."""
    with tempfile.TemporaryDirectory() as d:
        sh([qtool(), 'calibrate', model, '-o', out_json, '--threads', str(threads)] + data_args(samples, d))


def qtool():
    return os.environ.get('QTOOL_EXE', os.path.join(ROOT, 'build', 'bin', 'qtool'))


def run_qtool(args):
    """qtool with these arguments: (exit code, stdout, stderr), whatever the exit code."""
    r = subprocess.run([qtool()] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def quantize(model, out, calib, config=None, extra=()):
    cmd = [qtool(), 'quantize', model, '-o', out, '--calib', calib, '--json'] + list(extra)
    if config:
        cmd += ['--config', config]
    return json.loads(sh(cmd).strip().splitlines()[-1])


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
