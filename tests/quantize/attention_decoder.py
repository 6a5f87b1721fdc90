#!/usr/bin/python3
"""A decoder attention block with a KV cache, built with onnx.helper in the three forms models from outside qtool
carry it (ai.onnx Attention-23 with GQA heads, ORT's GroupQueryAttention with rotary, ORT's MultiHeadAttention with
bias), through `qtool calibrate` and `qtool quantize` with the default config, as a user would:
    x -> MatMul q / k / v -> attention op (past_key, past_value -> present_key, present_value) -> MatMul o -> + x
  1. quantize exits 0 and ONNX Runtime 1.30 loads and runs the result;
  2. the four MatMuls read DequantizeLinear on both inputs and ORT runs each as an integer kernel; the attention op
     stays float (ORT 1.30 has no int8 kernel or QDQ fusion for it) with no Q/DQ pair on a tensor only it reads
     (the q / k / v MatMuls keep float outputs: MatMulIntegerToFloat); past and present keys / values (the cache, a
     graph state) stay float;
  3. output and present_key follow float: SQNR on disjoint evaluation inputs at least MIN_SQNR_DB.
MIN_SQNR_DB is a collapse bar, not fitted to these models: 20 dB is an error a tenth of the signal's amplitude, where
int8 rounding of the MatMuls' inputs and weights sits far above it (the figures are printed below).
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
B, S, P, H, HQ, HKV = 1, 8, 8, 64, 4, 2
HD = H // HQ  # head size 16 (GroupQueryAttention's rotary needs a multiple of 16)


def build(form, path, rng):
    def w(*shape):
        return (rng.randn(*shape) / np.sqrt(shape[0])).astype(np.float32)

    kvd = HKV * HD if form != 'mha' else H
    inits = {'wq': w(H, H), 'wk': w(H, kvd), 'wv': w(H, kvd), 'wo': w(H, H)}
    nodes = [helper.make_node('MatMul', ['x', 'wq'], ['q']), helper.make_node('MatMul', ['x', 'wk'], ['k']),
             helper.make_node('MatMul', ['x', 'wv'], ['v'])]
    ins = [helper.make_tensor_value_info('x', TensorProto.FLOAT, [B, S, H])]
    heads = HKV if form != 'mha' else HQ
    for n in ('past_key', 'past_value'):
        ins.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, [B, heads, P, HD]))
    outs = ['y', 'present_key', 'present_value']
    opsets = [helper.make_opsetid('', 23 if form == 'onnx' else 17), helper.make_opsetid(MS, 1)]
    if form == 'onnx':
        nodes.append(helper.make_node('Attention', ['q', 'k', 'v', '', 'past_key', 'past_value'], outs, is_causal=1,
                                      q_num_heads=HQ, kv_num_heads=HKV))
    elif form == 'gqa':
        ang = np.arange(64)[:, None] / (10000 ** (np.arange(HD // 2) / (HD // 2)))[None]
        inits.update(cos=np.cos(ang).astype(np.float32), sin=np.sin(ang).astype(np.float32))
        ins += [helper.make_tensor_value_info('seqlens_k', TensorProto.INT32, [B]),
                helper.make_tensor_value_info('total_sequence_length', TensorProto.INT32, [])]
        nodes.append(helper.make_node('GroupQueryAttention', ['q', 'k', 'v', 'past_key', 'past_value', 'seqlens_k',
                                                              'total_sequence_length', 'cos', 'sin'], outs,
                                      domain=MS, num_heads=HQ, kv_num_heads=HKV, do_rotary=1))
    else:
        inits['bqkv'] = (rng.randn(3 * H) * 0.1).astype(np.float32)
        nodes.append(helper.make_node('MultiHeadAttention', ['q', 'k', 'v', 'bqkv', '', '', 'past_key', 'past_value'],
                                      outs, domain=MS, num_heads=HQ, unidirectional=1))
    nodes += [helper.make_node('MatMul', ['y', 'wo'], ['o']), helper.make_node('Add', ['o', 'x'], ['out'])]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ('out', 'present_key', 'present_value')]
    g = helper.make_graph(nodes, 'attention_' + form, ins, vo, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=opsets, ir_version=10)
    onnx.save(m, path)


def samples(form, rng, folder, tag, count):
    """`count` decoding steps of S tokens after P cached ones: one {input: .npy} per step."""
    heads = HKV if form != 'mha' else HQ
    out = []
    for i in range(count):
        feeds = {'x': rng.randn(B, S, H).astype(np.float32),
                 'past_key': rng.randn(B, heads, P, HD).astype(np.float32),
                 'past_value': rng.randn(B, heads, P, HD).astype(np.float32)}
        if form == 'gqa':
            feeds.update(seqlens_k=np.full(B, P + S - 1, np.int32), total_sequence_length=np.array(P + S, np.int32))
        files = {}
        for k, v in feeds.items():
            files[k] = os.path.join(folder, f'{form}_{tag}{i}_{k}.npy')
            np.save(files[k], v)
        out.append(files)
    return out


def sqnr(f, g):
    f, g = f.astype(np.float64), g.astype(np.float64)
    return 10 * np.log10((f ** 2).sum() / max(((f - g) ** 2).sum(), 1e-30))


def check(form, d, rng):
    ok = True
    fp, qp, calib = (os.path.join(d, f'{form}_{n}') for n in ('float.onnx', 'q.onnx', 'calib.json'))
    build(form, fp, rng)
    cal, ev = samples(form, rng, d, 'calib', 8), samples(form, rng, d, 'eval', 4)
    qtest.calibrate(fp, cal, calib)
    qtest.quantize(fp, qp, calib)
    q = onnx.load(qp)
    producer = {o: n for n in q.graph.node for o in n.output}
    att = [n for n in q.graph.node if n.op_type in ('Attention', 'GroupQueryAttention', 'MultiHeadAttention')]
    for n in q.graph.node:
        if n.op_type == 'MatMul':
            fed = all(producer.get(i) is not None and producer[i].op_type == 'DequantizeLinear' for i in n.input)
            print(f'{"ok  " if fed else "FAIL"} {form}: MatMul {n.name or n.output[0]} reads DequantizeLinear on both '
                  f'inputs')
            ok = ok and fed
    dq_in = [i for n in att for i in n.input if i and producer.get(i) is not None and
             producer[i].op_type == 'DequantizeLinear']
    quant_out = [o for o in q.graph.output if producer.get(o.name) is not None and
                 producer[o.name].op_type == 'DequantizeLinear']
    good = len(att) == 1 and not dq_in and not quant_out
    print(f'{"ok  " if good else "FAIL"} {form}: {att[0].op_type if att else "no attention op"} float, fed by '
          f'{len(dq_in)} DequantizeLinear, {len(quant_out)} graph outputs behind Q/DQ')
    ok = ok and good
    opt = os.path.join(d, f'{form}_q_opt.onnx')
    worst = {}
    for i, smp in enumerate(ev):
        ref, _ = qtest.ort_run(fp, smp, os.path.join(d, f'{form}_of{i}'))
        got, _ = qtest.ort_run(qp, smp, os.path.join(d, f'{form}_oq{i}'), optimized=opt)
        for k in ('out', 'present_key'):
            worst[k] = min(worst.get(k, np.inf), sqnr(ref[k], got[k]))
    ops = [n.op_type for n in onnx.load(opt).graph.node]
    print(f'{"ok  " if ops.count("MatMul") == 0 else "FAIL"} {form}: ORT-optimized Q has {ops.count("MatMul")} float '
          f'MatMul, {ops.count("MatMulIntegerToFloat")} MatMulIntegerToFloat, {ops.count("QLinearMatMul")} '
          f'QLinearMatMul')
    ok = ok and ops.count('MatMul') == 0
    for k, v in worst.items():
        good = v >= MIN_SQNR_DB
        ok = ok and good
        print(f'{"ok  " if good else "FAIL"} {form}: ORT runs Q; worst {k} SQNR vs float over {len(ev)} evaluation '
              f'steps {v:.1f} dB (bar {MIN_SQNR_DB})')
    return ok


def main():
    rng = np.random.RandomState(11)
    forms = sys.argv[1:] or ['onnx', 'gqa', 'mha']
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for form in forms:
            ok = check(form, d, rng) and ok
    print('attention decoder blocks quantize' if ok else 'attention decoder blocks: FAILED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
