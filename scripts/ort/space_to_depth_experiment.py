#!/usr/bin/python3
"""Experiment behind docs/benchmarks.md "Space-to-depth for the 3-channel stride-2 conv": rewrites a float model's
first stride-2 Conv with C_in % 4 != 0 as SpaceToDepth(2) -> stride-1 Conv, then (second step, on the model
`qtool quantize` wrote) moves the input's QuantizeLinear in front of the SpaceToDepth so ONNX Runtime runs it on
uint8. Not a qtool pass: the rewrite needs the conv input's height and width (given here, must be even), which a
pass does not know for a dynamic-shape model such as ppocrv4-det.

The rewrite is exact. Conv(stride 2, kernel k, pads pb begin / pe end) reads input row 2*o + ky - pb. With
s = pb % 2 and P2 = ceil(pb / 2) that is row 2*(o - P2) + t, t = ky + s in [s, s + k). SpaceToDepth puts input
row 2*Y + (t % 2), column 2*X + (u % 2), channel c at channel ((t % 2) * 2 + u % 2) * C + c, row Y, column X
(ONNX SpaceToDepth is DCR: reshape [N, C, H/2, 2, W/2, 2], transpose [0, 3, 5, 1, 2, 4]), so the new conv has
kernel ceil((k + s) / 2), weight W'[o, ((t % 2) * 2 + u % 2) * C + c, t // 2, u // 2] = W[o, c, t - s, u - s]
(zero where the old kernel has no tap), stride 1, pads P2 at the begin and O - H/2 - P2 + K2 - 1 at the end
(O = the old output size). Every tap past the input reads a padding zero in both forms.

usage: space_to_depth_experiment.py rewrite FLOAT.onnx OUT.onnx --hw H W
       space_to_depth_experiment.py uint8 QUANT.onnx OUT.onnx
       space_to_depth_experiment.py check   (the rewrite against the original Conv in ORT: k 3, 5, 7, every
                                             begin/end pad 0..k/2, two even input sizes)"""
import argparse
import itertools
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper


def die(message):
    print(message, file=sys.stderr)
    sys.exit(2)


def weight_array(g, name):
    for t in g.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in g.node:
        if n.op_type == 'Constant' and n.output[0] == name:
            return numpy_helper.to_array(n.attribute[0].t)
    die(f'error: weight {name} is neither an initializer nor a Constant')


def rewrite(src, dst, h, w, verbose=True):
    if h % 2 or w % 2:
        die('error: --hw must be even (SpaceToDepth(2) needs an even height and width)')
    m = onnx.load(src)
    g = m.graph
    for idx, n in enumerate(g.node):
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        if (n.op_type == 'Conv' and a.get('strides') == [2, 2] and a.get('group', 1) == 1 and
                a.get('dilations', [1, 1]) == [1, 1] and a.get('auto_pad', b'NOTSET') == b'NOTSET'):
            wt = weight_array(g, n.input[1])
            if wt.ndim == 4 and wt.shape[1] % 4 and wt.shape[2] == wt.shape[3]:
                break
    else:
        die('error: no stride-2 Conv with C_in % 4 != 0 and a square kernel')
    co, c, k, _ = wt.shape
    p = a.get('pads', [0, 0, 0, 0])
    s = [p[0] % 2, p[1] % 2]
    p2 = [(p[0] + 1) // 2, (p[1] + 1) // 2]
    k2 = [(k + s[0] + 1) // 2, (k + s[1] + 1) // 2]
    e2 = [(size + p[d] + p[2 + d] - k) // 2 + 1 - size // 2 - p2[d] + k2[d] - 1 for d, size in enumerate((h, w))]
    if min(e2) < 0:
        die('error: the old conv drops input rows the new one would read; not rewritten')
    w2 = np.zeros((co, 4 * c, k2[0], k2[1]), np.float32)
    for ky in range(k):
        for kx in range(k):
            t, u = ky + s[0], kx + s[1]
            blk = (t % 2) * 2 + u % 2
            w2[:, blk * c:(blk + 1) * c, t // 2, u // 2] = wt[:, :, ky, kx]
    w_name, y_name = n.input[1] + '_s2d', n.input[0] + '_s2d'
    g.initializer.append(numpy_helper.from_array(w2, w_name))
    s2d = helper.make_node('SpaceToDepth', [n.input[0]], [y_name], blocksize=2, name=n.name + '_s2d')
    del n.attribute[:]
    n.attribute.extend([helper.make_attribute('kernel_shape', k2), helper.make_attribute('strides', [1, 1]),
                        helper.make_attribute('pads', [p2[0], p2[1], e2[0], e2[1]]),
                        helper.make_attribute('group', 1), helper.make_attribute('dilations', [1, 1])])
    n.input[0], n.input[1] = y_name, w_name
    g.node.insert(idx, s2d)
    onnx.save(m, dst)
    if verbose:
        print(f'{n.name}: k {k} pads {p} -> kernel {k2}, pads {[p2[0], p2[1], e2[0], e2[1]]}, {4 * c} channels')


def uint8(src, dst):
    """x -> SpaceToDepth -> Q -> DQ -> Conv  becomes  x -> Q -> SpaceToDepth (uint8) -> DQ -> Conv: exact, Q is
    elementwise with one scale. ORT does not drop a DQ -> SpaceToDepth -> Q pair, so the move is needed."""
    m = onnx.load(src)
    g = m.graph
    s2d = next(n for n in g.node if n.op_type == 'SpaceToDepth')
    q = next(n for n in g.node if n.op_type == 'QuantizeLinear' and n.input[0] == s2d.output[0])
    q_out = q.output[0]
    q.input[0], q.output[0] = s2d.input[0], s2d.input[0] + '_u8'
    s2d.input[0], s2d.output[0] = q.output[0], q_out
    nodes = [n for n in g.node if n is not q and n is not s2d]
    at = min(i for i, n in enumerate(nodes) if q_out in n.input)
    nodes[at:at] = [q, s2d]
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(m, dst)


def check():
    """Float outputs of the rewritten conv against the original in ONNX Runtime, random weights and inputs."""
    from onnx import TensorProto
    ort_run = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ort_run.mjs')
    rng = np.random.default_rng(0)
    worst, cases = 0.0, 0
    with tempfile.TemporaryDirectory() as d:
        f = lambda name: os.path.join(d, name)  # noqa: E731
        for k in (3, 5, 7):
            for (ph, pw, eh, ew), (h, w) in itertools.product(
                    [(a, b, b, a) for a, b in itertools.product(range(k // 2 + 1), repeat=2)], ((16, 12), (14, 18))):
                wt = rng.standard_normal((5, 3, k, k)).astype(np.float32)
                conv = helper.make_node('Conv', ['x', 'w'], ['y'], strides=[2, 2], pads=[ph, pw, eh, ew],
                                        kernel_shape=[k, k], name='conv')
                g = helper.make_graph([conv], 'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, h, w])],
                                      [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)],
                                      [numpy_helper.from_array(wt, 'w')])
                onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), f('a.onnx'))
                np.save(f('x.npy'), rng.standard_normal((1, 3, h, w)).astype(np.float32))
                rewrite(f('a.onnx'), f('b.onnx'), h, w, verbose=False)
                for m in 'ab':
                    subprocess.run(['node', ort_run, f(m + '.onnx'), '--input', 'x=' + f('x.npy'), '--output-dir',
                                    f(m)], check=True, capture_output=True)
                ya, yb = np.load(f('a/y.npy')), np.load(f('b/y.npy'))
                if ya.shape != yb.shape:
                    die(f'error: k {k} pads {[ph, pw, eh, ew]} {h}x{w}: shape {yb.shape}, not {ya.shape}')
                worst, cases = max(worst, float(np.abs(ya - yb).max() / np.abs(ya).max())), cases + 1
    print(f'{cases} convs: largest |difference| / max |output| {worst:.2e}')
    if worst > 1e-5:
        die('error: the rewrite is not exact')


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('step', choices=['rewrite', 'uint8', 'check'])
    ap.add_argument('src', nargs='?')
    ap.add_argument('dst', nargs='?')
    ap.add_argument('--hw', nargs=2, type=int)
    a = ap.parse_args()
    if a.step == 'check':
        check()
    elif not a.dst:
        die(f'error: {a.step} needs SRC.onnx and OUT.onnx')
    elif a.step == 'rewrite':
        if not a.hw:
            die('error: rewrite needs --hw H W (the conv input height and width)')
        rewrite(a.src, a.dst, *a.hw)
    else:
        uint8(a.src, a.dst)
