#!/usr/bin/python3
"""A model quantized the way ONNX Runtime's Python quantizer writes its QOperator format (quantize_static,
QuantFormat.QOperator, per-channel int8 weights with reduce_range, uint8 activations), built here by hand next to
its float original (no onnxruntime Python package here), and what qtool does with it:

  1. `qtool run` equals ONNX Runtime 1.30 on it, bit for bit (the output is DequantizeLinear of a uint8 tensor);
  2. `qtool inspect Q --against F --random 4` compares it with the float model (exit 0, output SQNR reported);
  3. `qtool inspect Q --json` lists its integer ops and its int8 per-channel weights, and counts scales and zero
     points as quantization parameters, not weights;
  4. `qtool quantize Q` finds nothing left to quantize (its float Add reads a DequantizeLinear) and refuses it
     before calibrating: exit 2, one line naming its QLinear ops, nothing written;
  5. so does `qtool quantize` on a model in ORT's dynamic format (DynamicQuantizeLinear, MatMulInteger, Cast, Mul
     by a_scale * b_scale, Add): the accumulator and the runtime scale are not rounded again, and no other node is
     left (a model quantized in part: tests/quantize/already_quantized.py).

usage: qoperator_model.py WORKDIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'quantize'))
import qtest  # noqa: E402

MS = 'com.microsoft'
RNG = np.random.RandomState(3)


def qparams(lo, hi):
    """uint8 asymmetric scale and zero point for [lo, hi] (range widened to hold 0), as ORT computes them."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0)
    return scale, np.uint8(np.clip(np.round(-lo / scale), 0, 255))


def quantize_weight(w, axis=0):
    """Per-channel symmetric int8 in [-64, 63] (ORT's reduce_range on x86): (codes, scales)."""
    red = tuple(i for i in range(w.ndim) if i != axis)
    scale = (np.abs(w).max(axis=red) / 63.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    return np.clip(np.round(w / scale.reshape(shape)), -64, 63).astype(np.int8), scale


def build(work):
    """Float model F: Conv(3->8, 3x3) Relu Conv(8->8, 3x3, stride 2) Relu GlobalAveragePool Flatten MatMul(8->5) Add.
    Q: QuantizeLinear, QLinearConv x2 (Relu folded into the output range), QLinearGlobalAveragePool, Flatten (runs
    on uint8), QLinearMatMul, DequantizeLinear, Add (float bias). Ranges come from a float run on 16 samples."""
    w1, b1 = (RNG.randn(8, 3, 3, 3) * 0.3).astype(np.float32), (RNG.randn(8) * 0.1).astype(np.float32)
    w2, b2 = (RNG.randn(8, 8, 3, 3) * 0.2).astype(np.float32), (RNG.randn(8) * 0.1).astype(np.float32)
    wf, bf = (RNG.randn(8, 5) * 0.5).astype(np.float32), (RNG.randn(5) * 0.1).astype(np.float32)
    x_vi = helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, 16, 16])
    y_vi = helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 5])
    init = lambda d: [numpy_helper.from_array(v, k) for k, v in d.items()]  # noqa: E731
    f_nodes = [helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], pads=[1, 1, 1, 1]),
               helper.make_node('Relu', ['c1'], ['r1']),
               helper.make_node('Conv', ['r1', 'w2', 'b2'], ['c2'], pads=[1, 1, 1, 1], strides=[2, 2]),
               helper.make_node('Relu', ['c2'], ['r2']),
               helper.make_node('GlobalAveragePool', ['r2'], ['g']),
               helper.make_node('Flatten', ['g'], ['f']),
               helper.make_node('MatMul', ['f', 'wf'], ['m']),
               helper.make_node('Add', ['m', 'bf'], ['y'])]
    fg = helper.make_graph(f_nodes, 'float', [x_vi], [y_vi], init({'w1': w1, 'b1': b1, 'w2': w2, 'b2': b2,
                                                                    'wf': wf, 'bf': bf}))
    F = helper.make_model(fg, opset_imports=[helper.make_opsetid('', 13)], ir_version=8)
    fpath = os.path.join(work, 'float.onnx')
    onnx.save(F, fpath)

    # Calibration: every intermediate of F on 16 random samples, through ORT.
    probe = onnx.ModelProto()
    probe.CopyFrom(F)
    for name in ('r1', 'r2', 'g', 'm'):
        probe.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    ppath = os.path.join(work, 'probe.onnx')
    onnx.save(probe, ppath)
    xs = RNG.randn(16, 1, 3, 16, 16).astype(np.float32)
    ranges = {k: [np.inf, -np.inf] for k in ('x', 'r1', 'r2', 'g', 'm')}
    for i, x in enumerate(xs):
        np.save(os.path.join(work, f'cal{i}.npy'), x)
        outs, _ = qtest.ort_run(ppath, {'x': os.path.join(work, f'cal{i}.npy')}, os.path.join(work, f'cal{i}'))
        outs['x'] = x
        for k in ranges:
            ranges[k] = [min(ranges[k][0], float(outs[k].min())), max(ranges[k][1], float(outs[k].max()))]
    sx, zx = qparams(*ranges['x'])
    s1, z1 = qparams(*ranges['r1'])
    s2, z2 = qparams(*ranges['r2'])
    sg, zg = qparams(*ranges['g'])
    sm, zm = qparams(*ranges['m'])
    q1, ws1 = quantize_weight(w1)
    q2, ws2 = quantize_weight(w2)
    qf, wsf = quantize_weight(wf, axis=1)
    inits = {'sx': sx, 'zx': zx, 's1': s1, 'z1': z1, 's2': s2, 'z2': z2, 'sg': sg, 'zg': zg, 'sm': sm, 'zm': zm,
             'q1': q1, 'ws1': ws1, 'wz1': np.zeros(8, np.int8), 'B1': np.round(b1 / (sx * ws1)).astype(np.int32),
             'q2': q2, 'ws2': ws2, 'wz2': np.zeros(8, np.int8), 'B2': np.round(b2 / (s1 * ws2)).astype(np.int32),
             'qf': qf, 'wsf': wsf, 'wzf': np.zeros(5, np.int8), 'bf': bf}
    inits = {k: np.asarray(v) for k, v in inits.items()}
    q_nodes = [helper.make_node('QuantizeLinear', ['x', 'sx', 'zx'], ['xq']),
               helper.make_node('QLinearConv', ['xq', 'sx', 'zx', 'q1', 'ws1', 'wz1', 's1', 'z1', 'B1'], ['r1q'],
                                pads=[1, 1, 1, 1]),
               helper.make_node('QLinearConv', ['r1q', 's1', 'z1', 'q2', 'ws2', 'wz2', 's2', 'z2', 'B2'], ['r2q'],
                                pads=[1, 1, 1, 1], strides=[2, 2]),
               helper.make_node('QLinearGlobalAveragePool', ['r2q', 's2', 'z2', 'sg', 'zg'], ['gq'], domain=MS,
                                channels_last=0),
               helper.make_node('Flatten', ['gq'], ['fq']),
               helper.make_node('QLinearMatMul', ['fq', 'sg', 'zg', 'qf', 'wsf', 'wzf', 'sm', 'zm'], ['mq']),
               helper.make_node('DequantizeLinear', ['mq', 'sm', 'zm'], ['m']),
               helper.make_node('Add', ['m', 'bf'], ['y'])]
    qg = helper.make_graph(q_nodes, 'qoperator', [x_vi], [y_vi], init(inits))
    Q = helper.make_model(qg, opset_imports=[helper.make_opsetid('', 13), helper.make_opsetid(MS, 1)], ir_version=8)
    qpath = os.path.join(work, 'qoperator.onnx')
    onnx.save(Q, qpath)
    return fpath, qpath, os.path.join(work, 'cal0.npy')


def build_dynamic(work):
    """ORT's dynamic format for y = Relu(x W + b): DynamicQuantizeLinear, MatMulInteger, Cast, Mul, Mul, Add, Relu."""
    w = RNG.randint(-64, 64, (16, 8)).astype(np.int8)
    nodes = [helper.make_node('DynamicQuantizeLinear', ['x'], ['xq', 'xs', 'xz']),
             helper.make_node('MatMulInteger', ['xq', 'w', 'xz', 'wz'], ['acc']),
             helper.make_node('Cast', ['acc'], ['accf'], to=TensorProto.FLOAT),
             helper.make_node('Mul', ['xs', 'ws'], ['s']),
             helper.make_node('Mul', ['accf', 's'], ['m']),
             helper.make_node('Add', ['m', 'b'], ['h']),
             helper.make_node('Relu', ['h'], ['y'])]
    inits = {'w': w, 'wz': np.array(0, np.int8), 'ws': np.array(0.01, np.float32), 'b': RNG.randn(8).astype(np.float32)}
    g = helper.make_graph(nodes, 'dynamic', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['n', 16])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    path = os.path.join(work, 'dynamic.onnx')
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8), path)
    return path


def qtool(*args):
    return subprocess.run([qtest.qtool(), *args], capture_output=True, text=True)


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    fpath, qpath, x0 = build(work)
    ok = True

    def check(name, good, detail=''):
        nonlocal ok
        ok = ok and good
        print(f'{"ok  " if good else "FAIL"} {name}{": " + detail if detail else ""}')

    # 1. qtool run = ORT run.
    ref, _ = qtest.ort_run(qpath, {'x': x0}, os.path.join(work, 'ort_q'))
    r = qtool('run', qpath, '--input', f'x={x0}', '--output-dir', os.path.join(work, 'qtool_q'), '--threads', '2')
    if r.returncode != 0:
        check('qtool run', False, r.stderr.strip())
    else:
        got = np.load(os.path.join(work, 'qtool_q', 'y.npy'))
        check('qtool run equals ORT', np.array_equal(got, ref['y']), f'max |diff| {np.abs(got - ref["y"]).max():.3g}')
    # 2. inspect --against.
    r = qtool('inspect', qpath, '--against', fpath, '--random', '4', '--threads', '2', '--no-sensitivity')
    check('inspect --against --random 4', r.returncode == 0 and 'sqnr' in r.stdout.lower(),
          r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else r.stderr.strip())
    # 3. inspect --json: integer ops, weights by dtype, parameters apart.
    r = qtool('inspect', qpath, '--json')
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    q = j.get('quantization', {})
    ops = q.get('quantized_ops', {})
    check('inspect lists the integer ops', ops.get('QLinearConv') == 2 and ops.get('QLinearMatMul') == 1 and
          ops.get('com.microsoft.QLinearGlobalAveragePool') == 1, json.dumps(ops))
    weights = {(w['dtype'], w['granularity'], w.get('axis')): w['count'] for w in q.get('weights', [])}
    check('inspect groups the int8 weights', weights == {('int8', 'per-channel', 0): 2, ('int8', 'per-channel', 1): 1},
          json.dumps(q.get('weights')))
    wb = j.get('weight_bytes', {})
    check('int8 weights are weights, scales and zero points parameters',
          wb.get('weights', {}).get('int8', {}).get('tensors') == 3 and
          wb.get('quantization_parameters', {}).get('float', {}).get('tensors', 0) >= 8, json.dumps(wb))
    # 4. quantize: nothing left to quantize, refused before calibrating.
    out = os.path.join(work, 'requantized.onnx')
    if os.path.exists(out):  # a scratch folder kept from an earlier run
        os.remove(out)
    r = qtool('quantize', qpath, '-o', out, '--random', '4', '--threads', '2')
    check('quantize refuses the QOperator model', r.returncode == 2 and not os.path.exists(out) and
          'is already quantized (2 QLinearConv, 1 DequantizeLinear, 1 QLinearMatMul, 1 QuantizeLinear, '
          '1 com.microsoft.QLinearGlobalAveragePool)' in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          f'exit {r.returncode}: {r.stderr.strip()}')
    # 5. the dynamic format too.
    dpath = build_dynamic(work)
    dout = os.path.join(work, 'dynamic_q.onnx')
    if os.path.exists(dout):
        os.remove(dout)
    r = qtool('quantize', dpath, '-o', dout, '--random', '4', '--threads', '2')
    check('quantize refuses the dynamic-format model', r.returncode == 2 and not os.path.exists(dout) and
          'is already quantized (1 DynamicQuantizeLinear, 1 MatMulInteger)' in r.stderr,
          f'exit {r.returncode}: {r.stderr.strip()}')
    print('the QOperator model runs, compares and is refused by quantize' if ok else
          'the QOperator model checks failed')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
