#!/usr/bin/python3
"""`qtool run` against ONNX Runtime 1.30 on already-quantized models: ORT's QOperator format (QLinearConv,
QLinearMatMul, com.microsoft QLinearAdd / QLinearMul / QLinearSigmoid / QLinearLeakyRelu / QLinearGlobalAveragePool /
QLinearConcat / QGemm), dynamic quantization (MatMulInteger, ConvInteger, DynamicQuantizeMatMul,
MatMulIntegerToFloat) and onnxruntime-genai's int4 ops (MatMulNBits, GatherBlockQuantized). One tiny model per op
and variant, built here with onnx.helper on seeded random inputs.

Integer outputs must equal ORT's bit for bit, except where docs/interpreter.md ("Quantized operators") says ORT's
vector kernels round differently: there at most 1 LSB ('lsb1' cases). Float outputs: max |qtool - ort| <=
1e-5 * max |ort| + 1e-6 (float summation order and one fused multiply-add only). Then the variants qtool refuses:
exit 2 with a one-line message naming the node.

usage: qoperator_ops.py [NAME ...]   (default: every case)
"""
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contrib_ops  # noqa: E402  (model, write_case, qtool_run, check_refused)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'quantize'))
import qtest  # noqa: E402

MS = 'com.microsoft'
RNG = np.random.RandomState(7)
U8, I8, I32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32


def q(shape, dtype=np.uint8, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.randint(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


def f32(*shape, scale=1.0):
    return (RNG.randn(*shape) * scale).astype(np.float32)


def w7(shape):
    """int8 weights in [-64, 63]: ORT's quantizer writes these for uint8 x int8 on x86 (reduce_range), where MLAS's
    AVX2 kernel sums pairs of uint8 x int8 products in saturating int16 (see full_range_u8s8 below)."""
    return q(shape, np.int8, -64, 63)


def s(v):
    return np.array(v, np.float32)


def node(op, ins, outs, domain='', **attrs):
    return helper.make_node(op, ins, outs, domain=domain, **attrs)


def cases():
    """name -> (model, feeds, kind, expected): kind 'exact' (integers equal ORT's), 'lsb1' (within 1 of ORT's), 'float',
    'numpy' (integers equal `expected`, ORT's differences only printed)."""
    c = {}
    m = contrib_ops.model

    def add(name, kind, nodes, feeds, inits, outs, opset=13, expected=None):
        c[name] = (*m(nodes, feeds, inits, outs, opset=opset), kind, expected)

    # MatMulInteger / ConvInteger (the dynamic format's integer core): int32 outputs.
    a, b = q((2, 3, 16)), q((16, 5))
    add('matmul_integer_u8u8', 'exact', [node('MatMulInteger', ['a', 'b', 'az', 'bz'], ['y'])],
        {'a': a}, {'b': b, 'az': np.array(131, np.uint8), 'bz': np.array(120, np.uint8)}, [('y', I32)])
    add('matmul_integer_u8s8_per_column', 'exact', [node('MatMulInteger', ['a', 'b8', 'az', 'bz8'], ['y'])],
        {'a': a}, {'b8': w7((16, 5)), 'az': np.array(3, np.uint8), 'bz8': q((5,), np.int8, -3, 3)},
        [('y', I32)])
    # Full-range uint8 x int8: qtool's int32 sums are exact (checked against NumPy); ORT 1.30 on an AVX2 CPU without
    # VNNI sums pairs of products in saturating int16 (vpmaddubsw) and differs wherever a pair exceeds 32767: the
    # count is printed, not checked (on VNNI or ARM CPUs ORT is exact too).
    af, bf = q((4, 64)), q((64, 8), np.int8)
    add('full_range_u8s8', 'numpy', [node('MatMulInteger', ['a', 'bf'], ['y'])], {'a': af}, {'bf': bf}, [('y', I32)],
        expected={'y': af.astype(np.int64) @ bf.astype(np.int64)})
    add('matmul_integer_batched_b', 'exact', [node('MatMulInteger', ['a', 'b3'], ['y'])],
        {'a': q((3, 4, 16))}, {'b3': q((3, 16, 6))}, [('y', I32)])
    add('conv_integer', 'exact', [node('ConvInteger', ['x', 'w', 'xz', 'wz'], ['y'], pads=[1, 1, 1, 1], strides=[2, 2])],
        {'x': q((1, 3, 9, 9))}, {'w': q((4, 3, 3, 3)), 'xz': np.array(128, np.uint8), 'wz': np.array(100, np.uint8)},
        [('y', I32)])
    # QLinearMatMul 10 / 21: per tensor, int8, per-column B.
    qmm = ['a', 'as', 'az', 'b', 'bs', 'bz', 'ys', 'yz']
    base = {'as': s(0.02), 'az': np.array(128, np.uint8), 'bs': s(0.01), 'bz': np.array(125, np.uint8),
            'ys': s(0.3), 'yz': np.array(120, np.uint8)}
    add('qlinear_matmul_u8', 'exact', [node('QLinearMatMul', qmm, ['y'])], {'a': q((2, 4, 32))},
        {**base, 'b': q((32, 7))}, [('y', U8)], opset=10)
    add('qlinear_matmul_s8_opset21', 'exact', [node('QLinearMatMul', qmm, ['y'])], {'a': q((5, 32), np.int8)},
        {'as': s(0.02), 'az': np.array(-3, np.int8), 'b': q((32, 7), np.int8), 'bs': s(0.01),
         'bz': np.array(0, np.int8), 'ys': s(0.2), 'yz': np.array(5, np.int8)}, [('y', I8)], opset=21)
    add('qlinear_matmul_u8s8_per_column', 'exact', [node('QLinearMatMul', qmm, ['y'])], {'a': q((3, 32))},
        {**base, 'b': w7((32, 6)), 'bs': (RNG.rand(6) * 0.02 + 0.005).astype(np.float32),
         'bz': np.zeros(6, np.int8)}, [('y', U8)], opset=13)
    # QLinearConv: per-channel int8 weights with bias and groups, depthwise, 1-D.
    qc = ['x', 'xs', 'xz', 'w', 'ws', 'wz', 'ys', 'yz', 'B']
    add('qlinear_conv_per_channel_group_bias', 'exact',
        [node('QLinearConv', qc, ['y'], group=2, pads=[1, 1, 1, 1], strides=[1, 2])], {'x': q((2, 4, 8, 9))},
        {'xs': s(0.05), 'xz': np.array(120, np.uint8), 'w': w7((6, 2, 3, 3)),
         'ws': (RNG.rand(6) * 0.01 + 0.002).astype(np.float32), 'wz': np.zeros(6, np.int8), 'ys': s(0.4),
         'yz': np.array(100, np.uint8), 'B': RNG.randint(-2000, 2000, 6).astype(np.int32)}, [('y', U8)], opset=10)
    add('qlinear_conv_depthwise_u8', 'exact',
        [node('QLinearConv', qc[:8], ['y'], group=4, kernel_shape=[3, 3], pads=[1, 1, 1, 1])], {'x': q((1, 4, 6, 6))},
        {'xs': s(0.05), 'xz': np.array(120, np.uint8), 'w': q((4, 1, 3, 3)), 'ws': s(0.01),
         'wz': np.array(128, np.uint8), 'ys': s(0.1), 'yz': np.array(128, np.uint8)}, [('y', U8)], opset=13)
    add('qlinear_conv_1d_s8', 'exact', [node('QLinearConv', qc[:8], ['y'], dilations=[2])], {'x': q((1, 3, 12), np.int8)},
        {'xs': s(0.05), 'xz': np.array(1, np.int8), 'w': q((5, 3, 3), np.int8), 'ws': s(0.01),
         'wz': np.array(0, np.int8), 'ys': s(0.2), 'yz': np.array(-4, np.int8)}, [('y', I8)], opset=13)
    # QGemm: requantized (transB, C, alpha) and float output.
    qg = ['a', 'as', 'az', 'b', 'bs', 'bz', 'C', 'ys', 'yz']
    gi = {'as': s(0.02), 'az': np.array(128, np.uint8), 'b': w7((6, 32)), 'bs': s(0.01),
          'bz': np.array(0, np.int8), 'C': RNG.randint(-3000, 3000, 6).astype(np.int32), 'ys': s(0.25),
          'yz': np.array(128, np.uint8)}
    add('qgemm_requant_transB', 'exact', [node('QGemm', qg, ['y'], domain=MS, transB=1, alpha=0.75)],
        {'a': q((5, 32))}, gi, [('y', U8)])
    add('qgemm_float_out', 'float', [node('QGemm', qg[:7], ['y'], domain=MS, transB=1)], {'a': q((5, 32))},
        {k: v for k, v in gi.items() if k not in ('ys', 'yz')}, ['y'])
    # Dynamic quantization's contrib ops: float outputs.
    add('matmul_integer_to_float', 'float',
        [node('MatMulIntegerToFloat', ['a', 'b', 'as', 'bs', 'az', 'bz', 'bias'], ['y'], domain=MS)],
        {'a': q((2, 3, 16))}, {'b': w7((16, 5)), 'as': s(0.03),
                               'bs': (RNG.rand(5) * 0.02 + 0.005).astype(np.float32), 'az': np.array(128, np.uint8),
                               'bz': np.zeros(5, np.int8), 'bias': f32(5)}, ['y'])
    add('dynamic_quantize_matmul', 'float',
        [node('DynamicQuantizeMatMul', ['x', 'b', 'bs', 'bz', 'bias'], ['y'], domain=MS)], {'x': f32(2, 4, 16)},
        {'b': w7((16, 6)), 'bs': s(0.02), 'bz': np.array(0, np.int8), 'bias': f32(6)}, ['y'])
    # The QOperator elementwise / pooling / concat ops.
    qa = ['a', 'as', 'az', 'b', 'bs', 'bz', 'cs', 'cz']
    bin_inits = {'as': s(0.031), 'az': np.array(120, np.uint8), 'bs': s(0.017), 'bz': np.array(130, np.uint8),
                 'cs': s(0.045), 'cz': np.array(127, np.uint8)}
    add('qlinear_add_broadcast', 'lsb1', [node('QLinearAdd', qa, ['c'], domain=MS)], {'a': q((2, 3, 8))},
        {**bin_inits, 'b': q((3, 1))}, [('c', U8)])
    add('qlinear_mul', 'lsb1', [node('QLinearMul', qa, ['c'], domain=MS)], {'a': q((2, 3, 8)), 'b': q((2, 3, 8))},
        {**bin_inits, 'cs': s(0.2)}, [('c', U8)])
    add('qlinear_add_s8', 'lsb1', [node('QLinearAdd', qa, ['c'], domain=MS)], {'a': q((4, 8), np.int8)},
        {'as': s(0.031), 'az': np.array(-2, np.int8), 'b': q((8,), np.int8), 'bs': s(0.017),
         'bz': np.array(3, np.int8), 'cs': s(0.05), 'cz': np.array(1, np.int8)}, [('c', I8)])
    ql = ['x', 'xs', 'xz', 'ys', 'yz']
    add('qlinear_sigmoid', 'lsb1', [node('QLinearSigmoid', ql, ['y'], domain=MS)], {'x': q((3, 50))},
        {'xs': s(0.05), 'xz': np.array(128, np.uint8), 'ys': s(1 / 256), 'yz': np.array(0, np.uint8)}, [('y', U8)])
    add('qlinear_leaky_relu_s8', 'exact', [node('QLinearLeakyRelu', ql, ['y'], domain=MS, alpha=0.1)],
        {'x': q((3, 50), np.int8)}, {'xs': s(0.05), 'xz': np.array(-5, np.int8), 'ys': s(0.04),
                                     'yz': np.array(-20, np.int8)}, [('y', I8)])
    add('qlinear_global_average_pool', 'exact', [node('QLinearGlobalAveragePool', ql, ['y'], domain=MS)],
        {'x': q((2, 5, 7, 6))}, {'xs': s(0.05), 'xz': np.array(128, np.uint8), 'ys': s(0.01),
                                 'yz': np.array(128, np.uint8)}, [('y', U8)])
    add('qlinear_global_average_pool_nhwc', 'exact',
        [node('QLinearGlobalAveragePool', ql, ['y'], domain=MS, channels_last=1)], {'x': q((2, 7, 6, 5))},
        {'xs': s(0.05), 'xz': np.array(128, np.uint8), 'ys': s(0.02), 'yz': np.array(100, np.uint8)}, [('y', U8)])
    add('qlinear_concat', 'exact',
        [node('QLinearConcat', ['ys', 'yz', 'x1', 's1', 'z1', 'x2', 's2', 'z2', 'x3', 'ys', 'yz'], ['y'], domain=MS,
              axis=1)], {'x1': q((2, 3, 4)), 'x2': q((2, 2, 4)), 'x3': q((2, 1, 4))},
        {'ys': s(0.05), 'yz': np.array(128, np.uint8), 's1': s(0.03), 'z1': np.array(120, np.uint8), 's2': s(0.08),
         'z2': np.array(140, np.uint8)}, [('y', U8)])
    add('qlinear_average_pool', 'exact',
        [node('QLinearAveragePool', ql, ['y'], domain=MS, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
        {'x': q((2, 3, 9, 8))}, {'xs': s(0.05), 'xz': np.array(128, np.uint8), 'ys': s(0.03),
                                 'yz': np.array(125, np.uint8)}, [('y', U8)])
    add('qlinear_average_pool_include_pad_s8', 'exact',
        [node('QLinearAveragePool', ql, ['y'], domain=MS, kernel_shape=[2, 2], pads=[1, 1, 0, 0],
              count_include_pad=1)], {'x': q((1, 4, 5, 5), np.int8)},
        {'xs': s(0.05), 'xz': np.array(-3, np.int8), 'ys': s(0.02), 'yz': np.array(7, np.int8)}, [('y', I8)])
    add('qlinear_softmax_opset13_axis1', 'exact',
        [node('QLinearSoftmax', ql, ['y'], domain=MS, opset=13, axis=1)], {'x': q((2, 6, 5))},
        {'xs': s(0.08), 'xz': np.array(128, np.uint8), 'ys': s(1 / 256), 'yz': np.array(0, np.uint8)}, [('y', U8)])
    add('qlinear_softmax_opset12_s8', 'exact',
        [node('QLinearSoftmax', ql, ['y'], domain=MS, opset=12, axis=1)], {'x': q((3, 2, 4), np.int8)},
        {'xs': s(0.1), 'xz': np.array(0, np.int8), 'ys': s(1 / 256), 'yz': np.array(-128, np.int8)}, [('y', I8)])
    # onnxruntime-genai's int4 ops.
    K, N, blk = 64, 12, 32
    kb = K // blk
    b4 = q((N, kb, blk // 2))
    zp4 = q((N, (kb + 1) // 2))
    sc = (RNG.rand(N * kb) * 0.05 + 0.01).astype(np.float32)
    add('matmul_nbits_4bit_zp_bias', 'float',
        [node('MatMulNBits', ['a', 'b', 'sc', 'zp', '', 'bias'], ['y'], domain=MS, K=K, N=N, bits=4, block_size=blk)],
        {'a': f32(2, 3, K)}, {'b': b4, 'sc': sc, 'zp': zp4, 'bias': f32(N)}, ['y'])
    add('matmul_nbits_4bit_default_zp', 'float',
        [node('MatMulNBits', ['a', 'b', 'sc'], ['y'], domain=MS, K=K, N=N, bits=4, block_size=blk)],
        {'a': f32(5, K)}, {'b': b4, 'sc': sc}, ['y'])
    add('matmul_nbits_8bit', 'float',
        [node('MatMulNBits', ['a', 'b8', 'sc', 'zp8'], ['y'], domain=MS, K=K, N=N, bits=8, block_size=blk)],
        {'a': f32(5, K)}, {'b8': q((N, kb, blk)), 'sc': sc, 'zp8': q((N, kb))}, ['y'])
    V, H = 10, 64
    add('gather_block_quantized_4bit', 'float',
        [node('GatherBlockQuantized', ['data', 'ids', 'gs', 'gz'], ['y'], domain=MS, gather_axis=0, quantize_axis=1,
              block_size=32, bits=4)],
        {'ids': RNG.randint(0, V, (2, 3)).astype(np.int64)},
        {'data': q((V, H // 2)), 'gs': (RNG.rand(V, H // 32) * 0.05).astype(np.float32), 'gz': q((V, 1))}, ['y'])
    return c


def refused():
    m = contrib_ops.model
    qmm = ['a', 'as', 'az', 'b', 'bs', 'bz', 'ys', 'yz']
    return {
        'qlinear_matmul_per_row_a_scale': m([node('QLinearMatMul', qmm, ['y'])], {'a': q((3, 8))},
                                            {'as': s([0.1, 0.2, 0.3]), 'az': np.array(1, np.uint8), 'b': q((8, 2)),
                                             'bs': s(0.1), 'bz': np.array(1, np.uint8), 'ys': s(0.1),
                                             'yz': np.array(1, np.uint8)}, [('y', U8)]),
        'matmul_integer_int16': m([node('MatMulInteger', ['a', 'b'], ['y'])], {'a': q((3, 8), np.int16)},
                                  {'b': q((8, 2), np.int16)}, [('y', I32)]),
        'matmul_nbits_g_idx': m([node('MatMulNBits', ['a', 'b', 'sc', '', 'g'], ['y'], domain=MS, K=32, N=2, bits=4,
                                      block_size=32)], {'a': f32(1, 32)},
                                {'b': q((2, 1, 16)), 'sc': s([0.1, 0.1]), 'g': np.zeros(32, np.int32)}, ['y']),
        'matmul_nbits_3bit': m([node('MatMulNBits', ['a', 'b', 'sc'], ['y'], domain=MS, K=32, N=2, bits=3,
                                     block_size=32)], {'a': f32(1, 32)}, {'b': q((2, 1, 12)), 'sc': s([0.1, 0.1])},
                               ['y']),
        'gather_block_quantized_axis1': m([node('GatherBlockQuantized', ['d', 'i', 'gs'], ['y'], domain=MS,
                                                gather_axis=1, quantize_axis=1, block_size=16)],
                                          {'i': np.array([0], np.int64)},
                                          {'d': q((4, 16)), 'gs': s(np.ones((4, 2)))}, ['y']),
    }


def compare(name, kind, got, want):
    if got.shape != want.shape:
        print(f'FAIL {name}: shape {got.shape}, ORT {want.shape}')
        return False
    if kind == 'float':
        err = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
        tol = 1e-5 * float(np.abs(want).max() if want.size else 0.0) + 1e-6
        ok = err <= tol
        print(f'{"ok  " if ok else "FAIL"} {name}: max abs error {err:.3g} (tolerance {tol:.3g})')
        return ok
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    limit = 0 if kind == 'exact' else 1
    ok = got.dtype == want.dtype and int(diff.max(initial=0)) <= limit
    print(f'{"ok  " if ok else "FAIL"} {name}: {got.dtype}, {int((diff > 0).sum())} of {diff.size} values differ, '
          f'max {int(diff.max(initial=0))} (allowed {limit})')
    return ok


def main():
    only = set(sys.argv[1:])
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for name, (mdl, feeds, kind, expected) in cases().items():
            if only and name not in only:
                continue
            path, files = contrib_ops.write_case(work, name, mdl, feeds)
            ref, _ = qtest.ort_run(path, files, os.path.join(work, 'o_' + name))
            qdir = os.path.join(work, 'q_' + name)
            r = contrib_ops.qtool_run(path, files, qdir)
            if r.returncode != 0:
                print(f'FAIL {name}: qtool run exited {r.returncode}: {r.stderr.strip()}')
                ok = False
                continue
            for out, want in ref.items():
                got = np.load(os.path.join(qdir, out + '.npy'))
                if kind == 'numpy':
                    ok = compare(f'{name} {out} (NumPy int64)', 'exact', got, expected[out].astype(got.dtype)) and ok
                    n = int((want != expected[out]).sum())
                    print(f'     {name} {out}: ORT differs from the exact sum in {n} of {want.size} values, max '
                          f'{int(np.abs(want.astype(np.int64) - expected[out]).max())}')
                    continue
                ok = compare(f'{name} {out}', kind, got, want) and ok
        for name, (m, inputs) in refused().items():
            if not only or name in only:
                ok = contrib_ops.check_refused(work, name, m, inputs) and ok
    print('all quantized operators match ONNX Runtime' if ok else 'some quantized operators differ from ONNX Runtime')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
