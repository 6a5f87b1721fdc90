#!/usr/bin/python3
"""On a machine with a CUDA device: every shared model's `qtool run --device cuda` against `--device cpu` (outputs
within float tolerance: max |gpu - cpu| <= 1e-3 * (1 + max |cpu|)), and `qtool calibrate --device cuda` on
mobilenetv2 against the CPU's table (min/max within float tolerance; the number of bit-identical tensors printed). Exit 77 (skip) when `--device cuda` reports
no device. usage: run_models.py QTOOL SHARED_DIR SCRATCH"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..'))
from shared_inputs import one_input_per_model  # noqa: E402

qtool, shared, scratch = sys.argv[1:4]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
probe = subprocess.run([qtool, 'run', os.path.join(os.path.dirname(__file__), '..', '..', '..', 'models',
                                                   'tiny_conv.onnx'), '--device', 'cuda'],
                       capture_output=True, text=True)
if probe.returncode == 2 and 'no CUDA device' in probe.stderr:
    print(probe.stderr.strip(), '-> skipped')
    sys.exit(77)

failures = []
for model, inputs in one_input_per_model(shared, scratch).items():
    outs = {}
    for dev in ('cpu', 'cuda'):
        d = os.path.join(scratch, model.replace('/', '_'), dev)
        args = [qtool, 'run', os.path.join(shared, 'models', model), '--device', dev, '-o', d]
        for name, path in inputs.items():
            args += ['--input', f'{name}={path}']
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f'{model} --device {dev}: exit {r.returncode}: {r.stderr.strip()}')
            break
        outs[dev] = {f: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith('.npy')}
    if len(outs) < 2:
        continue
    for f, c in outs['cpu'].items():
        g = outs['cuda'][f]
        if c.dtype.kind != 'f':
            ok = np.array_equal(c, g)
        else:
            ok = c.shape == g.shape and float(np.max(np.abs(g - c), initial=0)) <= 1e-3 * (1 + float(np.max(np.abs(c), initial=0)))
        print(f'{model} {f}: {"ok" if ok else "MISMATCH"}')
        if not ok:
            failures.append(f'{model} {f}')

m = os.path.join(shared, 'models', 'mobilenetv2-1.0-224-fp32.onnx')
data = os.path.join(shared, 'data', 'tensors', 'mobilenetv2_calib6.npy')
tables = {}
for dev in ('cpu', 'cuda'):
    out = os.path.join(scratch, f'calib_{dev}.json')
    r = subprocess.run([qtool, 'calibrate', m, '--data', f'input={data}', '--methods', 'all', '-o', out, '--device', dev],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f'calibrate --device {dev}: {r.stderr.strip()}')
    else:
        tables[dev] = json.load(open(out))
if len(tables) == 2:
    # The observers are exact (gpu_check: min/max and counts equal on the same data), but cuBLAS sums Gemm/MatMul
    # in another order than OpenBLAS, so tensors downstream of one differ by rounding: min/max within float
    # tolerance everywhere, and the tables are reported bit-identical or not per tensor.
    tc, tg = tables['cpu']['tensors'], tables['cuda']['tensors']
    same = 0
    for name, c in tc.items():
        g = tg.get(name, {})
        if c == g:
            same += 1
            continue
        for k in ('min', 'max'):
            if k in c and abs(g.get(k, float('inf')) - c[k]) > 1e-4 * (1 + abs(c[k])):
                failures.append(f'calibration {name} {k}: cpu {c[k]} cuda {g.get(k)}')
    print(f'calibration tables: {same} of {len(tc)} tensors bit-identical, the rest within float tolerance')

for f in failures:
    print('FAIL:', f)
sys.exit(1 if failures else 0)
