#!/usr/bin/python3
"""An ORT-optimized BERT-like encoder layer built with onnx.helper (EmbedLayerNormalization -> Attention ->
SkipLayerNormalization -> MatMul -> FastGelu -> MatMul -> SkipLayerNormalization, the ops ORT's transformer optimizer
writes), through `qtool calibrate` and `qtool quantize` with the default config, as a user would:
  1. quantize exits 0 and ORT 1.30 loads and runs the result;
  2. the MatMuls get Q/DQ on both inputs and ORT fuses every one into an integer kernel; the contrib ops stay float
     and no Q/DQ pair sits on a tensor that only contrib ops read (it would only add rounding: ORT has no QDQ fusion
     for them; a MatMul's float output fuses as MatMulIntegerToFloat);
  3. the output follows float: SQNR on a disjoint evaluation batch at least MIN_SQNR_DB.
MIN_SQNR_DB is a collapse bar, not fitted to this model: 20 dB is an error a tenth of the signal's amplitude, where int8
rounding of two MatMuls' inputs and weights sits far above it (this model: printed below).
"""
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

MS = 'com.microsoft'
MIN_SQNR_DB = 20.0
B, S, H, NH, FF, V = 4, 16, 32, 4, 64, 50


def build(path, rng):
    def w(*shape, scale=None):
        return (rng.randn(*shape) * (scale or 1.0 / np.sqrt(shape[0]))).astype(np.float32)

    inits = {'word': w(V, H, scale=1.0), 'pos': w(S, H, scale=0.5), 'seg': w(2, H, scale=0.5),
             'g0': 1 + w(H, scale=0.1), 'b0': w(H, scale=0.1), 'qkv_w': w(H, 3 * H), 'qkv_b': w(3 * H, scale=0.1),
             'o_w': w(H, H), 'o_b': w(H, scale=0.1), 'g1': 1 + w(H, scale=0.1), 'b1': w(H, scale=0.1),
             'f1_w': w(H, FF), 'f1_b': w(FF, scale=0.1), 'f2_w': w(FF, H), 'f2_b': w(H, scale=0.1),
             'g2': 1 + w(H, scale=0.1), 'b2': w(H, scale=0.1)}
    nodes = [
        helper.make_node('EmbedLayerNormalization', ['ids', 'segs', 'word', 'pos', 'seg', 'g0', 'b0', 'mask'],
                         ['emb', 'mask_index'], domain=MS, epsilon=1e-12),
        helper.make_node('Attention', ['emb', 'qkv_w', 'qkv_b', 'mask_index'], ['ctx'], domain=MS, num_heads=NH),
        helper.make_node('MatMul', ['ctx', 'o_w'], ['attn_out']),
        helper.make_node('SkipLayerNormalization', ['attn_out', 'emb', 'g1', 'b1', 'o_b'], ['ln1'], domain=MS,
                         epsilon=1e-12),
        helper.make_node('MatMul', ['ln1', 'f1_w'], ['ff1']),
        helper.make_node('FastGelu', ['ff1', 'f1_b'], ['act'], domain=MS),
        helper.make_node('MatMul', ['act', 'f2_w'], ['ff2']),
        helper.make_node('SkipLayerNormalization', ['ff2', 'ln1', 'g2', 'b2', 'f2_b'], ['out'], domain=MS,
                         epsilon=1e-12),
    ]
    ints = [helper.make_tensor_value_info(n, TensorProto.INT32, ['batch', S]) for n in ('ids', 'segs', 'mask')]
    out = helper.make_tensor_value_info('out', TensorProto.FLOAT, ['batch', S, H])
    g = helper.make_graph(nodes, 'bert_layer', ints, [out], [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13), helper.make_opsetid(MS, 1)], ir_version=8)
    onnx.save(m, path)


def inputs(rng, folder, tag):
    lens = rng.randint(S // 2, S + 1, B)
    feeds = {'ids': rng.randint(0, V, (B, S)).astype(np.int32), 'segs': (np.arange(S)[None] >= S // 2).repeat(B, 0),
             'mask': (np.arange(S)[None] < lens[:, None])}
    files = {}
    for k, v in feeds.items():
        files[k] = os.path.join(folder, f'{tag}_{k}.npy')
        np.save(files[k], v.astype(np.int32))
    return files


def main():
    rng = np.random.RandomState(7)
    ok = True
    with tempfile.TemporaryDirectory() as d:
        fp, qp, calib = (os.path.join(d, n) for n in ('float.onnx', 'q.onnx', 'calib.json'))
        build(fp, rng)
        cal, ev = inputs(rng, d, 'calib'), inputs(rng, d, 'eval')
        qtest.calibrate(fp, [cal], calib)
        qtest.quantize(fp, qp, calib)
        q = onnx.load(qp)
        producer = {o: n for n in q.graph.node for o in n.output}
        consumers = {}
        for n in q.graph.node:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        for n in q.graph.node:
            if n.op_type == 'MatMul':
                fed = all(producer.get(i) is not None and producer[i].op_type == 'DequantizeLinear' for i in n.input)
                print(f'{"ok  " if fed else "FAIL"} MatMul {n.name}: both inputs from DequantizeLinear')
                ok = ok and fed
            if n.op_type == 'QuantizeLinear':
                readers = {c.op_type for dq in consumers.get(n.output[0], []) for c in consumers.get(dq.output[0], [])}
                useless = readers and all(r not in ('MatMul', 'Gemm', 'Conv', 'Add', 'Mul') for r in readers)
                if useless:
                    print(f'FAIL QuantizeLinear {n.name}: its DequantizeLinear feeds only {sorted(readers)}')
                    ok = False
        contrib = [n.op_type for n in q.graph.node if n.domain == MS]
        print(f'contrib ops kept float in Q: {contrib}')
        ref, _ = qtest.ort_run(fp, ev, os.path.join(d, 'of'))
        opt = os.path.join(d, 'q_ort_optimized.onnx')
        got, _ = qtest.ort_run(qp, ev, os.path.join(d, 'oq'), optimized=opt)
        # ORT turns each DQ -> MatMul into an integer kernel (MatMulIntegerToFloat without an output Q, QLinearMatMul
        # with one): no float MatMul may be left.
        ops = [n.op_type for n in onnx.load(opt).graph.node]
        float_mm = ops.count('MatMul')
        print(f'{"ok  " if float_mm == 0 else "FAIL"} ORT-optimized Q: {float_mm} float MatMul, '
              f'{ops.count("MatMulIntegerToFloat")} MatMulIntegerToFloat, {ops.count("QLinearMatMul")} QLinearMatMul')
        ok = ok and float_mm == 0
        f, g = ref['out'].astype(np.float64), got['out'].astype(np.float64)
        sqnr = 10 * np.log10((f ** 2).sum() / max(((f - g) ** 2).sum(), 1e-30))
        good = sqnr >= MIN_SQNR_DB
        ok = ok and good
        print(f'{"ok  " if good else "FAIL"} ORT runs Q; SQNR vs float on the evaluation batch {sqnr:.1f} dB '
              f'(bar {MIN_SQNR_DB})')
    print('contrib BERT layer quantizes' if ok else 'contrib BERT layer: FAILED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
