#!/usr/bin/python3
"""`qtool run` against ONNX Runtime 1.30 on ORT's contrib ops (what its transformer optimizer writes): one tiny
model per op and variant, built here with onnx.helper on seeded random inputs; every output must agree within
max |qtool - ort| <= 1e-4 * max |ort| + 1e-5 (summation order and exp/erf/tanh approximations only).
Then the variants qtool refuses: exit 2 with a one-line message naming the node.

usage: contrib_ops.py [NAME ...]   (default: every case)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'quantize'))
import qtest  # noqa: E402

MS = 'com.microsoft'
RNG = np.random.RandomState(0)


def rand(*shape, scale=1.0):
    return (RNG.randn(*shape) * scale).astype(np.float32)


def model(nodes, inputs, inits, outputs, opset=17):
    """inputs: {name: array} fed at run time; inits: {name: array} initializers; outputs: names (float unless
    given as (name, TensorProto type)). Returns (ModelProto, inputs)."""
    vi = [helper.make_tensor_value_info(k, mapping.NP_TYPE_TO_TENSOR_TYPE[v.dtype], list(v.shape))
          for k, v in inputs.items()]
    vo = [helper.make_tensor_value_info(*(o if isinstance(o, tuple) else (o, TensorProto.FLOAT)), None)
          for o in outputs]
    g = helper.make_graph(nodes, 'contrib', vi, vo, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', opset), helper.make_opsetid(MS, 1)],
                             ir_version=8), inputs


def ms(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain=MS, **attrs)


def cases():
    B, S, H = 2, 5, 16
    x, skip, g, b, bias = rand(B, S, H), rand(B, S, H), rand(H), rand(H), rand(H)
    c = {}
    # LayerNormalization below opset 17 (ORT's contrib registration in the default domain), with Mean / InvStdDev.
    c['layernorm_opset13'] = model([helper.make_node('LayerNormalization', ['x', 'g', 'b'], ['y', 'mean', 'inv'],
                                                     axis=-1, epsilon=1e-5)],
                                   {'x': x}, {'g': g, 'b': b}, ['y', 'mean', 'inv'], opset=13)
    c['layernorm_opset11_axis1_nobias'] = model(
        [helper.make_node('LayerNormalization', ['x', 'g2'], ['y'], axis=1, epsilon=1e-3)],
        {'x': x}, {'g2': rand(S, H)}, ['y'], opset=11)
    c['simplified_layernorm'] = model(
        [helper.make_node('SimplifiedLayerNormalization', ['x', 'g'], ['y', 'inv'], axis=-1, epsilon=1e-6)],
        {'x': x}, {'g': g}, ['y', 'inv'], opset=14)
    # SkipLayerNormalization: full skip + beta + bias with the sum output; broadcast skip [S, H] and [1, S, H].
    c['skip_layernorm_full'] = model(
        [ms('SkipLayerNormalization', ['x', 'skip', 'g', 'b', 'bias'], ['y', '', '', 'sum'], epsilon=1e-5)],
        {'x': x, 'skip': skip}, {'g': g, 'b': b, 'bias': bias}, ['y', 'sum'])
    c['skip_layernorm_2d_skip'] = model([ms('SkipLayerNormalization', ['x', 'skip2', 'g'], ['y'])],
                                        {'x': x}, {'skip2': rand(S, H), 'g': g}, ['y'])
    c['skip_layernorm_1sh_skip'] = model(
        [ms('SkipLayerNormalization', ['x', 'skip3', 'g', 'b'], ['y'], epsilon=1e-6)],
        {'x': x}, {'skip3': rand(1, S, H), 'g': g, 'b': b}, ['y'])
    c['skip_layernorm_2d_input'] = model([ms('SkipLayerNormalization', ['x2', 'skip2', 'g', 'b'], ['y', '', '', 'sum'])],
                                         {'x2': rand(S, H), 'skip2': rand(S, H)}, {'g': g, 'b': b}, ['y', 'sum'])
    c['skip_simplified_layernorm'] = model(
        [ms('SkipSimplifiedLayerNormalization', ['x', 'skip', 'g', 'bias'], ['y', '', '', 'sum'], epsilon=1e-6)],
        {'x': x, 'skip': skip}, {'g': g, 'bias': bias}, ['y', 'sum'])
    xg = rand(B, S, H, scale=3.0)
    c['ms_gelu'] = model([ms('Gelu', ['x'], ['y'])], {'x': xg}, {}, ['y'])
    c['bias_gelu'] = model([ms('BiasGelu', ['x', 'bias'], ['y'])], {'x': xg}, {'bias': bias}, ['y'])
    c['fast_gelu'] = model([ms('FastGelu', ['x'], ['y'])], {'x': xg}, {}, ['y'])
    c['fast_gelu_bias'] = model([ms('FastGelu', ['x', 'bias'], ['y'])], {'x': xg}, {'bias': bias}, ['y'])
    c['quick_gelu'] = model([ms('QuickGelu', ['x'], ['y'])], {'x': xg}, {}, ['y'])
    c['quick_gelu_alpha'] = model([ms('QuickGelu', ['x'], ['y'], alpha=1.25)], {'x': xg}, {}, ['y'])
    # FusedMatMul: alpha and every transpose combination, batched A against a 2-D or batched B.
    a, w = rand(B, S, H), rand(H, 8)
    c['fused_matmul_alpha'] = model([ms('FusedMatMul', ['a', 'w'], ['y'], alpha=0.125)], {'a': a}, {'w': w}, ['y'])
    c['fused_matmul_transB'] = model([ms('FusedMatMul', ['a', 'wt'], ['y'], transB=1, alpha=2.0)],
                                     {'a': a}, {'wt': np.ascontiguousarray(w.T)}, ['y'])
    c['fused_matmul_transA_batched'] = model([ms('FusedMatMul', ['at', 'b3'], ['y'], transA=1)],
                                             {'at': rand(B, H, S), 'b3': rand(B, H, 4)}, {}, ['y'])
    c['fused_matmul_transAB'] = model([ms('FusedMatMul', ['at', 'bt'], ['y'], transA=1, transB=1, alpha=0.5)],
                                      {'at': rand(3, B, H, S), 'bt': rand(B, 4, H)}, {}, ['y'])
    # Attention (BERT: packed QKV weights, the mask_index forms; GPT-2: unidirectional with past / present).
    Nh, Hin, P = 2, 12, 3
    xa, wa, ba = rand(B, S, Hin), rand(Hin, 3 * H, scale=0.3), rand(3 * H)
    i32 = np.int32

    def att(name, ins, feeds, inits, outs=('y',), **attrs):
        c[name] = model([ms('Attention', ins, list(outs), num_heads=Nh, **attrs)], feeds, inits,
                        [o for o in outs if o])

    att('attention_nomask', ['x', 'w', 'b'], {'x': xa}, {'w': wa, 'b': ba})
    att('attention_mask_end', ['x', 'w', 'b', 'm'], {'x': xa, 'm': np.array([3, 5], i32)}, {'w': wa, 'b': ba})
    att('attention_mask_end_start', ['x', 'w', 'b', 'm'], {'x': xa, 'm': np.array([4, 5, 1, 0], i32)},
        {'w': wa, 'b': ba})
    att('attention_mask_raw2d', ['x', 'w', 'b', 'm'],
        {'x': xa, 'm': np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], i32)}, {'w': wa, 'b': ba})
    att('attention_mask_3d_filter', ['x', 'w', 'b', 'm'], {'x': xa, 'm': (RNG.rand(B, S, S) > 0.3).astype(i32)},
        {'w': wa, 'b': ba}, mask_filter_value=-1e4 * 3)
    att('attention_qkv_sizes_scale', ['x', 'w2', 'b2'], {'x': xa},
        {'w2': rand(Hin, 8 + 8 + 12, scale=0.3), 'b2': rand(28)}, qkv_hidden_sizes=[8, 8, 12], scale=0.2)
    att('attention_bias_input', ['x', 'w', 'b', '', '', 'ab'], {'x': xa, 'ab': rand(1, Nh, S, S)}, {'w': wa, 'b': ba})
    att('attention_gpt2_past', ['x', 'w', 'b', 'm', 'past'], {'x': xa, 'm': np.ones((B, P + S), i32),
                                                               'past': rand(2, B, Nh, P, H // Nh)},
        {'w': wa, 'b': ba}, outs=('y', 'present'), unidirectional=1)
    att('attention_gpt2_first', ['x', 'w', 'b', 'm'], {'x': xa, 'm': np.array([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], i32)},
        {'w': wa, 'b': ba}, outs=('y', 'present'), unidirectional=1)
    # (Without bias ORT 1.30's CPU kernel crashes: no reference; qtool treats it as a zero bias.)
    att('attention_causal_3d', ['x', 'w', 'b', 'm'], {'x': xa, 'm': (RNG.rand(B, S, S) > 0.5).astype(i32)},
        {'w': wa, 'b': ba}, unidirectional=1)
    # EmbedLayerNormalization (BERT embeddings): with segments, mask and position_ids, and the minimal form.
    V, Pmax, ids = 30, 8, RNG.randint(0, 30, (B, S)).astype(i32)
    emb = {'we': rand(V, H), 'pe': rand(Pmax, H), 'se': rand(2, H), 'g': g, 'b': b}
    c['embed_layernorm_full'] = model(
        [ms('EmbedLayerNormalization', ['ids', 'seg', 'we', 'pe', 'se', 'g', 'b', 'm', 'pos'], ['y', 'mi', 'sum'],
            epsilon=1e-5)],
        {'ids': ids, 'seg': RNG.randint(0, 2, (B, S)).astype(i32), 'm': np.array([[1, 1, 1, 0, 0], [1] * 5], i32),
         'pos': np.array([[2, 3, 4, 5, 6]], i32)}, emb, ['y', ('mi', TensorProto.INT32), 'sum'])
    c['embed_layernorm_minimal'] = model([ms('EmbedLayerNormalization', ['ids', '', 'we', 'pe', '', 'g', 'b'],
                                             ['y', 'mi'])], {'ids': ids}, emb, ['y', ('mi', TensorProto.INT32)])
    # RotaryEmbedding: 3-D and 4-D input, half and interleaved rotation, partial rotary dim, both position_ids forms.
    i64, hd, Mp = np.int64, 8, 16
    ang = np.arange(Mp)[:, None] / (10000 ** (np.arange(hd // 2) / (hd // 2)))[None]
    caches = {'cos': np.cos(ang).astype(np.float32), 'sin': np.sin(ang).astype(np.float32)}
    half_caches = {k: np.ascontiguousarray(v[:, :2]) for k, v in caches.items()}
    posbs = RNG.randint(0, Mp, (B, S)).astype(i64)
    c['rotary_3d'] = model([ms('RotaryEmbedding', ['x', 'p', 'cos', 'sin'], ['y'], num_heads=2)],
                           {'x': x, 'p': posbs}, caches, ['y'])
    c['rotary_3d_interleaved_offset'] = model(
        [ms('RotaryEmbedding', ['x', 'p', 'cos', 'sin'], ['y'], num_heads=2, interleaved=1)],
        {'x': x, 'p': np.array([4], i64)}, caches, ['y'])
    c['rotary_4d_partial'] = model(
        [ms('RotaryEmbedding', ['x4', 'p', 'cos', 'sin'], ['y'], rotary_embedding_dim=4, num_heads=2)],
        {'x4': rand(B, 2, S, hd), 'p': posbs}, half_caches, ['y'])
    return c


# Variants qtool refuses (exit 2, one line naming the node).
def refused():
    x = rand(2, 3, 8)
    xa, wa = rand(2, 5, 12), rand(12, 24)
    return {
        'attention_mask_4d': model([ms('Attention', ['x', 'w', '', 'm'], ['y'], num_heads=2)],
                                   {'x': xa, 'm': np.ones((2, 1, 5, 5), np.int32)}, {'w': wa}, ['y']),
        'attention_rotary': model([ms('Attention', ['x', 'w'], ['y'], num_heads=2, do_rotary=1)], {'x': xa},
                                  {'w': wa}, ['y']),
        'attention_heads_mismatch': model([ms('Attention', ['x', 'w'], ['y'], num_heads=5)], {'x': xa},
                                          {'w': wa}, ['y']),
        'embed_layernorm_bad_id': model([ms('EmbedLayerNormalization', ['ids', '', 'we', 'pe', '', 'g', 'b'], ['y'])],
                                        {'ids': np.array([[1, 40]], np.int32)},
                                        {'we': rand(30, 8), 'pe': rand(4, 8), 'g': rand(8), 'b': rand(8)}, ['y']),
        'rotary_position_outside': model([ms('RotaryEmbedding', ['x', 'p', 'c', 's'], ['y'], num_heads=2)],
                                         {'x': rand(1, 2, 8), 'p': np.array([[0, 9]], np.int64)},
                                         {'c': rand(4, 2), 's': rand(4, 2)}, ['y']),
        'fused_matmul_transBatchA': model([ms('FusedMatMul', ['x', 'w'], ['y'], transBatchA=1)], {'x': x},
                                          {'w': rand(8, 4)}, ['y']),
        'bias_gelu_bad_bias': model([ms('BiasGelu', ['x', 'b'], ['y'])], {'x': x}, {'b': rand(5)}, ['y']),
        'skip_layernorm_bad_skip': model([ms('SkipLayerNormalization', ['x', 's', 'g'], ['y'])], {'x': x},
                                         {'s': rand(2, 8), 'g': rand(8)}, ['y']),
        'skip_layernorm_2d_input_3d_skip': model([ms('SkipLayerNormalization', ['x2', 's', 'g'], ['y'])],
                                                 {'x2': rand(3, 8)}, {'s': rand(1, 3, 8), 'g': rand(8)}, ['y']),
    }


def write_case(work, name, m, inputs):
    """Saves the model and its inputs; returns (model path, {input: .npy path})."""
    path = os.path.join(work, name + '.onnx')
    with open(path, 'wb') as f:
        f.write(m.SerializeToString())
    files = {}
    for k, v in inputs.items():
        files[k] = os.path.join(work, f'{name}_{k}.npy')
        np.save(files[k], v)
    return path, files


def qtool_run(path, files, outdir):
    args = [a for k, v in files.items() for a in ('--input', f'{k}={v}')]
    return subprocess.run([qtest.qtool(), 'run', path, '--output-dir', outdir, '--threads', '2'] + args,
                          capture_output=True, text=True)


def check_refused(work, cases, only=()):
    """Each {name: (model, inputs)} must make `qtool run` exit 2 with one line naming the node; prints a row each."""
    ok = True
    for name, (m, inputs) in cases.items():
        if only and name not in only:
            continue
        path, files = write_case(work, name, m, inputs)
        r = qtool_run(path, files, os.path.join(work, 'q_' + name))
        msg = r.stderr.strip()
        good = r.returncode == 2 and len(msg.splitlines()) == 1 and "'" in msg
        ok = ok and good
        print(f'{"ok  " if good else "FAIL"} {name}: refused with exit {r.returncode}: {msg}')
    return ok


def run_case(work, name, m, inputs):
    path, files = write_case(work, name, m, inputs)
    ref, _ = qtest.ort_run(path, files, os.path.join(work, 'o_' + name))
    qdir = os.path.join(work, 'q_' + name)
    r = qtool_run(path, files, qdir)
    if r.returncode != 0:
        print(f'FAIL {name}: qtool run exited {r.returncode}: {r.stderr.strip()}')
        return False
    ok = True
    for out, want in ref.items():
        got = np.load(os.path.join(qdir, out + '.npy'))
        if got.shape != want.shape:
            print(f'FAIL {name} {out}: shape {got.shape}, ORT {want.shape}')
            ok = False
            continue
        err = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
        tol = 1e-4 * float(np.abs(want).max() if want.size else 0.0) + 1e-5
        good = err <= tol
        ok = ok and good
        print(f'{"ok  " if good else "FAIL"} {name} {out}: max abs error {err:.3g} (tolerance {tol:.3g})')
    return ok


def main():
    only = set(sys.argv[1:])
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for name, (m, inputs) in cases().items():
            if only and name not in only:
                continue
            ok = run_case(work, name, m, inputs) and ok
        ok = check_refused(work, refused(), only) and ok
    print('all contrib ops match ONNX Runtime' if ok else 'some contrib ops differ from ONNX Runtime')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
