#!/usr/bin/python3
"""`qtool quantize` and `qtool inspect` on models that are already quantized, built here the way ONNX Runtime's
quantize_dynamic writes a convolution (ISNet background removal holds 119 of these blocks: DynamicQuantizeLinear,
ConvInteger with uint8 weights, Cast, Mul by x_scale * w_scale, Add bias, Relu; then MaxPool, Concat, Sigmoid):

  1. quantize refuses it before calibrating (exit 2, one line naming what the model holds and the fix, nothing
     written; no calibration or accuracy guard line), with --random, with --json and with no sample option at all;
     a QDQ model qtool wrote is refused the same way when given back;
  2. quantize on the same model with a float Conv after it (quantized in part) warns, quantizes that Conv (and the
     Concat and Sigmoid before it, which it now reads) and leaves the integer nodes as they are;
  3. inspect counts the integer ops: "quantization  ConvInteger 2, DynamicQuantizeLinear 2", and in --json.
Prints one JSON line; exit 1 on any failure.
"""
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

failures = []
RNG = np.random.RandomState(5)


def expect(name, cond, detail=''):
    if not cond:
        failures.append(f'{name}: {detail}')


run = qtest.run_qtool


def dynamic_block(nodes, inits, x, cin, cout, tag):
    """x -> DynamicQuantizeLinear -> ConvInteger (3x3, pad 1) -> Cast -> Mul(x_scale * w_scale) -> Add bias -> Relu."""
    inits[f'{tag}_w'] = RNG.randint(64, 192, (cout, cin, 3, 3)).astype(np.uint8)
    inits[f'{tag}_wz'] = np.array(128, np.uint8)
    inits[f'{tag}_ws'] = np.array(0.01, np.float32)
    inits[f'{tag}_b'] = (RNG.randn(cout, 1, 1) * 0.1).astype(np.float32)
    nodes += [helper.make_node('DynamicQuantizeLinear', [x], [f'{tag}_xq', f'{tag}_xs', f'{tag}_xz']),
              helper.make_node('ConvInteger', [f'{tag}_xq', f'{tag}_w', f'{tag}_xz', f'{tag}_wz'], [f'{tag}_acc'],
                               pads=[1, 1, 1, 1]),
              helper.make_node('Cast', [f'{tag}_acc'], [f'{tag}_accf'], to=TensorProto.FLOAT),
              helper.make_node('Mul', [f'{tag}_xs', f'{tag}_ws'], [f'{tag}_s']),
              helper.make_node('Mul', [f'{tag}_accf', f'{tag}_s'], [f'{tag}_m']),
              helper.make_node('Add', [f'{tag}_m', f'{tag}_b'], [f'{tag}_h']),
              helper.make_node('Relu', [f'{tag}_h'], [f'{tag}_r'])]
    return f'{tag}_r'


def build(path, float_tail):
    nodes, inits = [], {}
    r1 = dynamic_block(nodes, inits, 'x', 3, 4, 'b1')
    nodes.append(helper.make_node('MaxPool', [r1], ['p'], kernel_shape=[2, 2], strides=[2, 2]))
    r2 = dynamic_block(nodes, inits, 'p', 4, 4, 'b2')
    nodes += [helper.make_node('Concat', ['p', r2], ['cat'], axis=1),
              helper.make_node('Sigmoid', ['cat'], ['y'])]
    out = 'y'
    if float_tail:  # a float Conv the config quantizes
        inits['wt'] = (RNG.randn(2, 8, 1, 1) * 0.3).astype(np.float32)
        nodes.append(helper.make_node('Conv', ['y', 'wt'], ['z'], name='tail_conv'))
        out = 'z'
    g = helper.make_graph(nodes, 'dynamic', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8), path)


def ops(path):
    return [n.op_type for n in onnx.load(path).graph.node]


work = tempfile.mkdtemp(prefix='qtool-already-quantized-')
dyn = os.path.join(work, 'dynamic.onnx')
build(dyn, float_tail=False)

# 1. Refused before calibration: exit 2, one line naming what the model holds and the fix, nothing written.
held = "is already quantized (2 ConvInteger, 2 DynamicQuantizeLinear) and the config quantizes none of its float nodes"
for name, extra in (('--random 4', ['--random', '4']), ('--json', ['--random', '4', '--json']),
                    ('no sample option', [])):
    out = os.path.join(work, 'refused.onnx')
    rc, so, se = run(['quantize', dyn, '-o', out, '--threads', '2'] + extra)
    expect(f'refused ({name}): exit 2', rc == 2, (rc, se))
    expect(f'refused ({name}): names what the model holds', held in se, se)
    expect(f'refused ({name}): names the fix', 'give qtool quantize the float model it was made from' in se, se)
    expect(f'refused ({name}): one line', len(se.strip().splitlines()) == 1, se)
    expect(f'refused ({name}): nothing written', not os.path.exists(out), out)
    expect(f'refused ({name}): no calibration, no guard', 'calibrat' not in se and 'guard' not in se and not so,
           (so, se))

# A QDQ model qtool wrote, given back: nothing left for the config, refused the same way.
tiny = os.path.join(qtest.ROOT, 'models', 'tiny_conv.onnx')
q1 = os.path.join(work, 'tiny_conv.int8.onnx')
rc, so, se = run(['quantize', tiny, '-o', q1, '--random', '8', '--shape', 'input=1,3,32,32', '--threads', '2'])
expect('tiny_conv quantizes', rc == 0, se)
q2 = os.path.join(work, 'tiny_conv.int8.int8.onnx')
rc, so, se = run(['quantize', q1, '-o', q2, '--random', '8', '--shape', 'input=1,3,32,32', '--threads', '2'])
expect('a QDQ model given back is refused', rc == 2 and 'is already quantized (' in se and 'QuantizeLinear' in se and
       not os.path.exists(q2), (rc, se))

# 2. Quantized in part: the float Conv after the dynamic blocks is quantized; the integer nodes stay as they are.
part = os.path.join(work, 'partial.onnx')
build(part, float_tail=True)
out = os.path.join(work, 'partial.int8.onnx')
rc, so, se = run(['quantize', part, '-o', out, '--random', '4', '--threads', '2'])
expect('partly quantized: exit 0', rc == 0, (rc, se))
# The first node the config quantizes is the Concat: with the Conv reading it, the Sigmoid's output is worth a Q/DQ.
expect('partly quantized: warns', "already holds quantized ops (2 ConvInteger, 2 DynamicQuantizeLinear)" in se and
       "node '(cat)', Concat, first" in se, se)
expect('partly quantized: the Conv and the float ops before it are quantized',
       'quantized: Concat 1, Conv 1, Sigmoid 1\n' in so, so)
if rc == 0:
    before, after = ops(part), ops(out)
    expect('partly quantized: integer nodes kept', [o for o in after if o in ('ConvInteger', 'DynamicQuantizeLinear')]
           == [o for o in before if o in ('ConvInteger', 'DynamicQuantizeLinear')], after)
    m = onnx.load(out)
    conv = [n for n in m.graph.node if n.op_type == 'Conv']
    dq = {n.output[0]: n for n in m.graph.node if n.op_type == 'DequantizeLinear'}
    expect('partly quantized: the Conv reads a DequantizeLinear weight', len(conv) == 1 and conv[0].input[1] in dq,
           conv)
    x = os.path.join(work, 'x.npy')
    np.save(x, RNG.randn(1, 3, 16, 16).astype(np.float32))
    outs = []
    for model, folder in ((part, 'run_f'), (out, 'run_q')):
        rc, _, se = run(['run', model, '--input', f'x={x}', '--output-dir', os.path.join(work, folder),
                         '--threads', '2'])
        expect(f'qtool run {os.path.basename(model)}', rc == 0, se)
        outs.append(np.load(os.path.join(work, folder, 'z.npy')) if rc == 0 else None)
    if all(o is not None for o in outs):
        err = float(np.abs(outs[0] - outs[1]).max())
        expect('partly quantized: output close to the input model', err < 0.05, err)

# 3. inspect counts the integer ops, in text and --json.
rc, so, se = run(['inspect', dyn])
expect('inspect text: integer ops on the quantization line',
       rc == 0 and '\nquantization  ConvInteger 2, DynamicQuantizeLinear 2\n' in so, so[-400:])
expect('inspect text: no "QuantizeLinear 0"', 'QuantizeLinear 0' not in so, so[-400:])
rc, so, se = run(['inspect', dyn, '--json'])
q = json.loads(so)['quantization'] if rc == 0 else {}
expect('inspect --json: quantized', q.get('quantized') is True, q)
expect('inspect --json: quantized_ops', q.get('quantized_ops') == {'ConvInteger': 2, 'DynamicQuantizeLinear': 2}, q)

print(json.dumps({'ok': not failures, 'failures': failures}))
sys.exit(1 if failures else 0)
