#!/usr/bin/env python3
"""Writes a Llama-shaped float ONNX model of a chosen size with its weights in an external data file.

For memory and speed benchmarks of big models (issue 14): random weights (N(0, 0.02), seeded), so its outputs mean
nothing; use the shared llama2c model for accuracy. The weights are generated and written one chunk at a time, so
the script needs little memory whatever the size.

Graph (opset 17), per layer: RMSNorm -> Q, K, V MatMul -> single-head attention (Q K^T / sqrt(D), Softmax, x V) ->
O MatMul -> residual Add -> RMSNorm -> gate and up MatMul -> SiLU(gate) * up -> down MatMul -> residual Add;
token embedding Gather in front, final RMSNorm and LM-head MatMul behind. Input `input_ids` int64 [1, T];
output `logits` float [1, T, vocab].

usage: /usr/bin/python3 scripts/make_llama.py OUT.onnx [--size-mb 3000 | --layers N] [--dim D] [--ffn F]
       [--vocab V] [--seed S]
The data file is OUT.onnx.data beside the model. --size-mb picks the number of layers for --dim/--ffn/--vocab.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

CHUNK = 1 << 22  # floats generated and written at a time (16 MiB)


class DataFile:
    """Appends tensors to the external data file and returns initializers that refer to them."""

    def __init__(self, path, rng):
        self.path, self.rng, self.offset = path, rng, 0
        self.f = open(path, 'wb')

    def tensor(self, name, shape, kind='normal'):
        n = int(np.prod(shape))
        pad = (-self.offset) % 64
        self.f.write(b'\0' * pad)
        self.offset += pad
        start = self.offset
        for i in range(0, n, CHUNK):
            m = min(CHUNK, n - i)
            a = (self.rng.standard_normal(m, dtype=np.float32) * np.float32(0.02) if kind == 'normal'
                 else np.ones(m, dtype=np.float32))
            self.f.write(a.astype('<f4').tobytes())
        self.offset += 4 * n
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (('location', os.path.basename(self.path)), ('offset', str(start)), ('length', str(4 * n))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    def close(self):
        self.f.close()


def layer_params(d, f):
    return 4 * d * d + 3 * d * f + 2 * d


def build(out, layers, d, f, vocab, seed):
    data = DataFile(out + '.data', np.random.default_rng(seed))
    inits, nodes = [], []
    c = lambda name, value: inits.append(helper.make_tensor(name, TensorProto.FLOAT, [], [value]))
    c('eps', 1e-5)
    c('inv_sqrt_d', float(1.0 / np.sqrt(d)))

    def rmsnorm(x, g, tag):
        nodes.extend([
            helper.make_node('Mul', [x, x], [tag + '_sq']),
            helper.make_node('ReduceMean', [tag + '_sq'], [tag + '_ms'], axes=[-1], keepdims=1),
            helper.make_node('Add', [tag + '_ms', 'eps'], [tag + '_mse']),
            helper.make_node('Sqrt', [tag + '_mse'], [tag + '_rms']),
            helper.make_node('Div', [x, tag + '_rms'], [tag + '_n']),
            helper.make_node('Mul', [tag + '_n', g], [tag + '_out']),
        ])
        return tag + '_out'

    def matmul(x, w, shape, tag):
        inits.append(data.tensor(w, shape))
        nodes.append(helper.make_node('MatMul', [x, w], [tag], name=tag))
        return tag

    inits.append(data.tensor('embed.weight', [vocab, d]))
    nodes.append(helper.make_node('Gather', ['embed.weight', 'input_ids'], ['x0'], name='embed'))
    x = 'x0'
    for i in range(layers):
        p = f'l{i}'
        inits.append(data.tensor(p + '.attn_norm', [d], 'ones'))
        h = rmsnorm(x, p + '.attn_norm', p + '_an')
        q = matmul(h, p + '.wq', [d, d], p + '_q')
        k = matmul(h, p + '.wk', [d, d], p + '_k')
        v = matmul(h, p + '.wv', [d, d], p + '_v')
        nodes.extend([
            helper.make_node('Transpose', [k], [p + '_kt'], perm=[0, 2, 1]),
            helper.make_node('MatMul', [q, p + '_kt'], [p + '_s']),
            helper.make_node('Mul', [p + '_s', 'inv_sqrt_d'], [p + '_ss']),
            helper.make_node('Softmax', [p + '_ss'], [p + '_p'], axis=-1),
            helper.make_node('MatMul', [p + '_p', v], [p + '_a']),
        ])
        o = matmul(p + '_a', p + '.wo', [d, d], p + '_o')
        nodes.append(helper.make_node('Add', [x, o], [p + '_x1']))
        inits.append(data.tensor(p + '.ffn_norm', [d], 'ones'))
        h2 = rmsnorm(p + '_x1', p + '.ffn_norm', p + '_fn')
        g = matmul(h2, p + '.w_gate', [d, f], p + '_g')
        u = matmul(h2, p + '.w_up', [d, f], p + '_u')
        nodes.extend([
            helper.make_node('Sigmoid', [g], [p + '_gs']),
            helper.make_node('Mul', [g, p + '_gs'], [p + '_silu']),
            helper.make_node('Mul', [p + '_silu', u], [p + '_gu']),
        ])
        dn = matmul(p + '_gu', p + '.w_down', [f, d], p + '_d')
        nodes.append(helper.make_node('Add', [p + '_x1', dn], [p + '_x2']))
        x = p + '_x2'
    inits.append(data.tensor('norm', [d], 'ones'))
    h = rmsnorm(x, 'norm', 'final')
    matmul(h, 'lm_head.weight', [d, vocab], 'logits')
    data.close()
    graph = helper.make_graph(
        nodes, 'llama_shaped',
        [helper.make_tensor_value_info('input_ids', TensorProto.INT64, [1, 'T'])],
        [helper.make_tensor_value_info('logits', TensorProto.FLOAT, [1, 'T', vocab])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)], producer_name='make_llama.py')
    m.ir_version = 8
    with open(out, 'wb') as fh:
        fh.write(m.SerializeToString())
    return data.offset


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out')
    ap.add_argument('--size-mb', type=float, help='approximate weight bytes in MiB (picks --layers)')
    ap.add_argument('--layers', type=int)
    ap.add_argument('--dim', type=int, default=2048)
    ap.add_argument('--ffn', type=int, help='default: 8/3 dim rounded up to 256')
    ap.add_argument('--vocab', type=int, default=32000)
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    d, vocab = a.dim, a.vocab
    f = a.ffn or -(-8 * d // 3 // 256) * 256
    if a.layers is None:
        if a.size_mb is None:
            ap.error('give --size-mb or --layers')
        budget = a.size_mb * (1 << 20) / 4 - 2 * vocab * d
        a.layers = max(1, round(budget / layer_params(d, f)))
    total = build(a.out, a.layers, d, f, vocab, a.seed)
    print(f'{a.out}: {a.layers} layers, dim {d}, ffn {f}, vocab {vocab}, {total / (1 << 20):.0f} MiB of weights '
          f'in {os.path.basename(a.out)}.data')
    return 0


if __name__ == '__main__':
    sys.exit(main())
