#!/usr/bin/python3
"""Random Resize nodes: `qtool run` against ONNX Runtime 1.30 (CPU, one thread), output bits compared.

Draws N nodes from SEED: mode linear/nearest/cubic, rank 2-5 in the layouts ORT runs (NCHW, NHWC, rank 2, 3, 5),
every coordinate_transformation_mode and nearest_mode, opsets 10-19, scales or sizes, crop boxes. Prints one line per
node that differs (or that ORT refuses) and the count; the models stay in the temp folder when one differs.
Figures in docs/interpreter.md ("Resize equals ONNX Runtime bit for bit").

usage: scripts/ort/resize_fuzz.py N SEED QTOOL
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

N, SEED, QT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.RandomState(SEED)
work = tempfile.mkdtemp(prefix='rzfuzz_')
ORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ort_run.mjs')
COORDS = ['half_pixel', 'pytorch_half_pixel', 'align_corners', 'asymmetric', 'tf_half_pixel_for_nn',
          'tf_crop_and_resize', 'half_pixel_symmetric']
fails = 0
for i in range(N):
    mode = rng.choice(['linear', 'linear', 'nearest', 'cubic'])
    layout = rng.choice(['nchw'] * 6 + ['rank2', 'nhwc', 'rank3', 'rank5'])
    if mode == 'cubic' and layout in ('nhwc', 'rank3', 'rank5'):
        layout = 'nchw'
    if mode == 'nearest' and layout == 'nhwc':
        layout = 'nchw'
    opset = int(rng.choice([10, 11, 13, 18, 19]))
    coord = rng.choice(COORDS)
    if opset < 19 and coord == 'half_pixel_symmetric':
        coord = 'half_pixel'
    if opset == 10:
        coord = 'asymmetric'
        if mode == 'cubic':
            mode = 'linear'
    if layout == 'nchw':
        shape = [int(rng.randint(1, 3)), int(rng.randint(1, 4)), int(rng.randint(1, 20)), int(rng.randint(1, 20))]
        spatial = [2, 3]
    elif layout == 'rank2':
        shape = [int(rng.randint(1, 20)), int(rng.randint(1, 20))]
        spatial = [0, 1]
    elif layout == 'nhwc':
        shape = [1, int(rng.randint(1, 12)), int(rng.randint(1, 12)), int(rng.randint(1, 5))]
        spatial = [1, 2]
    elif layout == 'rank3':
        shape = [int(rng.randint(1, 8)) for _ in range(3)]
        spatial = [0, 1, 2]
    else:
        shape = [1, 2] + [int(rng.randint(1, 8)) for _ in range(3)]
        spatial = [2, 3, 4]
    use_sizes = opset >= 11 and rng.rand() < 0.5
    scales = [1.0] * len(shape)
    sizes = list(shape)
    for a in spatial:
        if use_sizes:
            sizes[a] = int(rng.randint(1, 3 * shape[a] + 2))
        else:
            s = float(np.float32(rng.choice([rng.uniform(0.3, 3.5), rng.choice([0.5, 2, 3, 4, 1.5, 0.25, 1.0])])))
            if int(np.float32(s) * np.float32(shape[a])) < 1:
                s = 1.0
            scales[a] = s
    attrs = dict(mode=mode)
    if opset >= 11:
        attrs['coordinate_transformation_mode'] = coord
        if mode == 'nearest':
            attrs['nearest_mode'] = rng.choice(['round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil'])
        if mode == 'cubic':
            attrs['cubic_coeff_a'] = float(rng.choice([-0.75, -0.5, -0.6]))
            attrs['exclude_outside'] = int(rng.rand() < 0.3)
        if coord == 'tf_crop_and_resize':
            attrs['extrapolation_value'] = float(rng.choice([0.0, -2.5]))
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    inits, ins = [], ['x']
    if opset == 10:
        inits.append(numpy_helper.from_array(np.array(scales, np.float32), 'scales'))
        ins.append('scales')
    else:
        roi = []
        if coord == 'tf_crop_and_resize':
            lo = [0.0] * len(shape); hi = [1.0] * len(shape)
            for a in spatial:
                lo[a] = float(rng.uniform(-0.3, 0.5)); hi[a] = float(rng.uniform(0.6, 1.3))
            roi = lo + hi
        inits.append(numpy_helper.from_array(np.array(roi, np.float32), 'roi'))
        inits.append(numpy_helper.from_array(np.array([] if use_sizes else scales, np.float32), 'scales'))
        ins += ['roi', 'scales']
        if use_sizes:
            inits.append(numpy_helper.from_array(np.array(sizes, np.int64), 'sizes'))
            ins.append('sizes')
    node = helper.make_node('Resize', ins, ['y'], **attrs)
    g = helper.make_graph([node], 'f', [helper.make_tensor_value_info('x', TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)], ir_version=8)
    d = os.path.join(work, str(i)); os.makedirs(d)
    mp = os.path.join(d, 'm.onnx'); open(mp, 'wb').write(m.SerializeToString())
    np.save(os.path.join(d, 'x.npy'), x)
    desc = (f'{i}: opset {opset} {layout} {shape} {attrs} '
            f'scales={scales if not use_sizes else None} sizes={sizes if use_sizes else None}')
    r = subprocess.run(['node', ORT, mp, '--input', f'x={d}/x.npy', '--output-dir', f'{d}/ort', '--threads', '1'],
                       capture_output=True, text=True)
    if r.returncode:
        print('ORT refused', desc, r.stderr.strip().splitlines()[-1][:150])
        continue
    q = subprocess.run([QT, 'run', mp, '-i', f'x={d}/x.npy', '-o', f'{d}/qt', '-t', '2'],
                       capture_output=True, text=True)
    if q.returncode:
        print('QTOOL FAILED', desc, q.stderr.strip()[-300:]); fails += 1
        continue
    a, b = np.load(f'{d}/qt/y.npy'), np.load(f'{d}/ort/y.npy')
    if a.shape != b.shape:
        print('SHAPE', desc, a.shape, b.shape); fails += 1
        continue
    nd = int((a.view(np.uint32) != b.view(np.uint32)).sum())
    if nd:
        print('DIFF', desc, nd, 'of', a.size, 'max', float(np.nanmax(np.abs(a - b)))); fails += 1
print(f'{N} cases, {fails} failures')
if fails == 0:
    shutil.rmtree(work)
sys.exit(1 if fails else 0)
