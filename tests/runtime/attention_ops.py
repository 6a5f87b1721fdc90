#!/usr/bin/python3
"""`qtool run` against ONNX Runtime 1.30 on the attention ops of models from outside qtool: ai.onnx Attention
(opsets 23, 24; what PyTorch's newer exporters write for scaled_dot_product_attention) and ORT's contrib
MultiHeadAttention and GroupQueryAttention (ORT's transformer optimizer, onnxruntime-genai). One tiny seeded model
per op and option, built here with onnx.helper; every output within max |qtool - ort| <= 1e-4 * max |ort| + 1e-5,
as tests/runtime/contrib_ops.py (float32 throughout: the two differ only in summation order and exp/tanh
approximations, ~1e-7 relative on these sizes). Then the variants qtool refuses: exit 2, one line naming the node.

usage: attention_ops.py [NAME ...]   (default: every case)
"""
import os
import sys

import numpy as np
from onnx import helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contrib_ops as C  # noqa: E402  (model builder, ORT/qtool runners, comparison)

RNG = np.random.RandomState(7)
i32, i64 = np.int32, np.int64


def rand(*shape, scale=1.0):
    return (RNG.randn(*shape) * scale).astype(np.float32)


def onnx_model(nodes, feeds, outs, opset=23):
    m, feeds = C.model(nodes, feeds, {}, outs, opset=opset)
    m.ir_version = 10  # opsets 23 / 24 need IR 10 in ORT
    return m, feeds


def att(ins, outs, **attrs):
    return helper.make_node('Attention', ins, outs, **attrs)


def onnx_attention_cases():
    B, Hq, Hkv, S, L, P, h, hv = 2, 4, 2, 3, 5, 2, 8, 6
    q, k, v = rand(B, Hq, S, h), rand(B, Hkv, L, h), rand(B, Hkv, L, hv)
    k4, v4 = rand(B, Hq, L, h), rand(B, Hq, L, h)
    pk, pv = rand(B, Hkv, P, h), rand(B, Hkv, P, hv)
    T = P + L
    c = {}
    c['attn23_mha'] = onnx_model([att(['q', 'k', 'v'], ['y'])], {'q': q, 'k': k4, 'v': v4}, ['y'])
    c['attn23_gqa_causal'] = onnx_model([att(['q', 'k', 'v'], ['y'], is_causal=1)], {'q': q, 'k': k, 'v': v}, ['y'])
    c['attn23_3d'] = onnx_model([att(['q', 'k', 'v'], ['y'], q_num_heads=Hq, kv_num_heads=Hkv, scale=0.2)],
                                {'q': rand(B, S, Hq * h), 'k': rand(B, L, Hkv * h), 'v': rand(B, L, Hkv * hv)}, ['y'])
    c['attn23_past_present_causal'] = onnx_model(
        [att(['q', 'k', 'v', '', 'pk', 'pv'], ['y', 'present_k', 'present_v'], is_causal=1)],
        {'q': q, 'k': k, 'v': v, 'pk': pk, 'pv': pv}, ['y', 'present_k', 'present_v'])
    c['attn23_3d_past_bool_mask'] = onnx_model(
        [att(['q', 'k', 'v', 'm', 'pk', 'pv'], ['y', 'present_k', 'present_v'], q_num_heads=Hq, kv_num_heads=Hkv)],
        {'q': rand(B, S, Hq * h), 'k': rand(B, L, Hkv * h), 'v': rand(B, L, Hkv * hv), 'm': RNG.rand(B, 1, S, T) > 0.3,
         'pk': pk, 'pv': pv}, ['y', 'present_k', 'present_v'])
    keep = RNG.rand(S, L) > 0.3
    keep[1, :] = False  # a query that sees no key: ORT 1.30 gives it zeros
    c['attn23_bool_mask_masked_row'] = onnx_model([att(['q', 'k', 'v', 'm'], ['y'])],
                                                  {'q': q, 'k': k, 'v': v, 'm': keep}, ['y'])
    for shape in [(S, L), (Hq, S, L), (1, Hq, S, L), (B, 1, S, L), (B, Hq, S, L)]:
        c['attn23_float_mask_' + 'x'.join(map(str, shape))] = onnx_model(
            [att(['q', 'k', 'v', 'm'], ['y'], softcap=2.0, scale=0.3)], {'q': q, 'k': k, 'v': v, 'm': rand(*shape)},
            ['y'])
    for mode in range(4):
        c[f'attn23_qk_output_mode{mode}'] = onnx_model(
            [att(['q', 'k', 'v', 'm'], ['y', '', '', 'qk'], qk_matmul_output_mode=mode, softcap=1.5, is_causal=1)],
            {'q': q, 'k': k, 'v': v, 'm': rand(B, Hq, S, L)}, ['y', 'qk'])
    c['attn24_causal_past'] = onnx_model(
        [att(['q', 'k', 'v', '', 'pk', 'pv'], ['y', 'present_k', 'present_v'], is_causal=1, softcap=3.0)],
        {'q': q, 'k': k, 'v': v, 'pk': pk, 'pv': pv}, ['y', 'present_k', 'present_v'], opset=24)
    # nonpad_kv_seqlen: padding keys masked; with is_causal the diagonal ends at the last real key, so [2, 5] with
    # S = 3 leaves query 0 of batch 0 no key (zeros, as ORT).
    c['attn24_nonpad_kv_seqlen'] = onnx_model([att(['q', 'k', 'v', '', '', '', 'n'], ['y'])],
                                              {'q': q, 'k': k, 'v': v, 'n': np.array([3, 5], i64)}, ['y'], opset=24)
    c['attn24_nonpad_kv_seqlen_causal'] = onnx_model([att(['q', 'k', 'v', '', '', '', 'n'], ['y'], is_causal=1)],
                                                     {'q': q, 'k': k, 'v': v, 'n': np.array([2, 5], i64)}, ['y'],
                                                     opset=24)
    return c


def mha_cases():
    B, N, S, L, P, h = 2, 2, 4, 6, 3, 8
    D = N * h
    q, k, v, bias = rand(B, S, D), rand(B, L, D), rand(B, L, D), rand(3 * D)
    pk, pv = rand(B, N, P, h), rand(B, N, P, h)
    c = {}

    def mha(name, ins, feeds, outs=('y',), **attrs):
        c[name] = C.model([C.ms('MultiHeadAttention', ins, list(outs), num_heads=N, **attrs)], feeds, {},
                          [o for o in outs if o])

    mha('mha_bias', ['q', 'k', 'v', 'b'], {'q': q, 'k': k, 'v': v, 'b': bias})
    mha('mha_self_scale', ['q', 'k', 'v'], {'q': q, 'k': rand(B, S, D), 'v': rand(B, S, D)}, scale=0.25)
    mha('mha_key_lengths', ['q', 'k', 'v', 'b', 'm'], {'q': q, 'k': k, 'v': v, 'b': bias, 'm': np.array([4, 6], i32)})
    mha('mha_key_padding_2d', ['q', 'k', 'v', '', 'm'],
        {'q': q, 'k': k, 'v': v, 'm': (RNG.rand(B, L) > 0.3).astype(i32)}, mask_filter_value=-1e5)
    mha('mha_attention_bias', ['q', 'k', 'v', 'b', '', 'ab'], {'q': q, 'k': k, 'v': v, 'b': bias,
                                                               'ab': rand(1, N, S, L)})
    mha('mha_past_present_causal', ['q', 'k', 'v', 'b', '', '', 'pk', 'pv'],
        {'q': q, 'k': rand(B, S, D), 'v': rand(B, S, D), 'b': bias, 'pk': pk, 'pv': pv},
        outs=('y', 'present_k', 'present_v'), unidirectional=1)
    mha('mha_bnsh_key_value', ['q', 'k4', 'v4'], {'q': q, 'k4': rand(B, N, L, h), 'v4': rand(B, N, L, h)})
    # 4-D key / value with bias: ORT 1.30 adds only the query's part of the bias.
    mha('mha_bnsh_key_value_bias', ['q', 'k4', 'v4', 'b'],
        {'q': q, 'k4': rand(B, N, L, h), 'v4': rand(B, N, L, h), 'b': bias})
    return c


def gqa_cases():
    B, Hq, Hkv, h, P = 2, 4, 2, 8, 4
    c = {}
    ang = np.arange(32)[:, None] / (10000 ** (np.arange(8) / 8))[None]  # caches for head size 16
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)

    def gqa(name, S, past, B=B, h=h, ab=None, sink=None, **attrs):
        """A step of S tokens after `past` cached ones (all batches alike); past=None: no past input; ab, sink:
        inputs attention_bias and head_sink."""
        total = (past or 0) + S
        feeds = {'q': rand(B, S, Hq * h), 'k': rand(B, S, Hkv * h), 'v': rand(B, S, Hkv * h),
                 'seqlens': np.full(B, total - 1, i32), 'total': np.array(total, i32)}
        ins = ['q', 'k', 'v', '', '', 'seqlens', 'total']
        if past is not None:
            feeds.update(pk=rand(B, Hkv, past, h), pv=rand(B, Hkv, past, h))
            ins[3:5] = ['pk', 'pv']
        if attrs.get('do_rotary'):
            feeds.update(cos=cos, sin=sin)
            ins += ['cos', 'sin']
        for i, (key, val) in enumerate((('ab', ab), ('sink', sink))):
            if val is not None:
                ins += [''] * (10 + i - len(ins)) + [key]
                feeds[key] = val
        c[name] = C.model([C.ms('GroupQueryAttention', ins, ['y', 'present_k', 'present_v'], num_heads=Hq,
                                kv_num_heads=Hkv, **attrs)], feeds, {}, ['y', 'present_k', 'present_v'])

    gqa('gqa_prompt', 5, None)
    gqa('gqa_prompt_empty_past', 5, 0)
    gqa('gqa_decode', 1, P)
    gqa('gqa_continue_2_tokens', 2, P, B=1, scale=0.3)  # ORT: batch 1 only when S > 1 follows a past
    gqa('gqa_local_window', 6, None, local_window_size=2)
    gqa('gqa_softcap', 5, None, softcap=2.0)
    gqa('gqa_smooth_softmax', 5, None, smooth_softmax=1)
    gqa('gqa_attention_bias_softcap', 1, P, softcap=1.5, ab=rand(B, 1, 1, P + 1))  # added after softcap
    gqa('gqa_head_sink_window', 5, None, local_window_size=3, sink=rand(Hq))
    # ORT 1.30 rotates only head sizes that are multiples of 16.
    gqa('gqa_rotary_prompt', 5, None, h=16, do_rotary=1)
    gqa('gqa_rotary_interleaved_decode', 1, P, h=16, do_rotary=1, rotary_interleaved=1)
    # Packed QKV: one [B, S, (Hq + 2 Hkv)·h] input, key and value absent.
    S = 3
    c['gqa_packed_qkv'] = C.model(
        [C.ms('GroupQueryAttention', ['qkv', '', '', '', '', 'seqlens', 'total'], ['y'], num_heads=Hq,
              kv_num_heads=Hkv)],
        {'qkv': rand(B, S, (Hq + 2 * Hkv) * h), 'seqlens': np.full(B, S - 1, i32), 'total': np.array(S, i32)}, {},
        ['y'])
    return c


def cases():
    c = onnx_attention_cases()
    c.update(mha_cases())
    c.update(gqa_cases())
    return c


def refused():
    q, k, v = rand(1, 2, 3, 4), rand(1, 2, 3, 4), rand(1, 2, 3, 4)
    x = rand(1, 3, 8)
    seq = {'seqlens': np.array([2], i32), 'total': np.array(3, i32)}
    return {
        'attn23_mask_wrong_length': onnx_model([att(['q', 'k', 'v', 'm'], ['y'])],
                                               {'q': q, 'k': k, 'v': v, 'm': rand(3, 2)}, ['y']),
        'attn23_3d_without_heads': onnx_model([att(['x', 'x', 'x'], ['y'])], {'x': x}, ['y']),
        'mha_packed_qkv': C.model([C.ms('MultiHeadAttention', ['qkv'], ['y'], num_heads=2)],
                                  {'qkv': rand(1, 3, 2, 3, 4)}, {}, ['y']),
        'mha_bnsh_key_with_past': C.model(
            [C.ms('MultiHeadAttention', ['x', 'k', 'v', '', '', '', 'pk', 'pv'], ['y'], num_heads=2)],
            {'x': x, 'k': rand(1, 2, 3, 4), 'v': rand(1, 2, 3, 4), 'pk': rand(1, 2, 1, 4), 'pv': rand(1, 2, 1, 4)}, {},
            ['y']),
        'gqa_qk_output': C.model(
            [C.ms('GroupQueryAttention', ['x', 'x', 'x', '', '', 'seqlens', 'total'], ['y'], num_heads=2,
                  kv_num_heads=2, qk_output=1)], dict(seq, x=x), {}, ['y']),
    }


def main():
    return C.run_all(cases(), refused(), 'attention ops')

if __name__ == '__main__':
    sys.exit(main())
