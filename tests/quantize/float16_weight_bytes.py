#!/usr/bin/python3
"""`qtool quantize`'s "weights: A MB -> B MB" on a float16 model: A is the bytes its weights take in the input file
(float16, 2 bytes each), not the float32 they are computed in, and B the bytes of the written model's weights
(initializers and Constant values). The default config equalizes before calibrating, which prepares (and widens)
the model first: the case ISNet medium showed (88 MB file, "176.07 MB -> 44.25 MB"). Checked in --json (bytes)
and in the text line. Prints one JSON line; exit 1 on any failure.
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
RNG = np.random.RandomState(7)


def expect(name, cond, detail=''):
    if not cond:
        failures.append(f'{name}: {detail}')


run = qtest.run_qtool


def weight_bytes(model):
    """Bytes of every initializer and Constant value, bodies included, as stored (numpy's itemsize per dtype)."""
    total = 0

    def graph(g):
        nonlocal total
        total += sum(numpy_helper.to_array(t).nbytes for t in g.initializer)
        for n in g.node:
            for a in n.attribute:
                if n.op_type == 'Constant' and a.name == 'value':
                    total += numpy_helper.to_array(a.t).nbytes
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)
                for body in a.graphs:
                    graph(body)
    graph(model.graph)
    return total


work = tempfile.mkdtemp(prefix='qtool-f16-bytes-')
f16 = os.path.join(work, 'conv_f16.onnx')
inits = {'w1': RNG.randn(64, 3, 3, 3) * 0.3, 'b1': RNG.randn(64) * 0.1,
         'w2': RNG.randn(64, 64, 3, 3) * 0.05, 'b2': RNG.randn(64) * 0.1}
inits = {k: v.astype(np.float16) for k, v in inits.items()}
nodes = [helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], pads=[1, 1, 1, 1]),
         helper.make_node('Relu', ['c1'], ['r1']),
         helper.make_node('Conv', ['r1', 'w2', 'b2'], ['c2'], pads=[1, 1, 1, 1]),
         helper.make_node('Relu', ['c2'], ['y'])]
g = helper.make_graph(nodes, 'f16', [helper.make_tensor_value_info('x', TensorProto.FLOAT16, [1, 3, 16, 16])],
                      [helper.make_tensor_value_info('y', TensorProto.FLOAT16, [1, 64, 16, 16])],
                      [numpy_helper.from_array(v, k) for k, v in inits.items()])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8), f16)
stored = sum(v.nbytes for v in inits.values())  # 2 bytes per weight
expect('the model is float16', stored == 2 * sum(v.size for v in inits.values()), stored)

out = os.path.join(work, 'conv_f16.int8.onnx')
rc, so, se = run(['quantize', f16, '-o', out, '--random', '4', '--threads', '2', '--json'])
j = json.loads(so) if rc == 0 else {}
expect('quantize --json exit 0', rc == 0, se)
expect('weight_bytes_before = the float16 bytes in the file', j.get('weight_bytes_before') == stored,
       (j.get('weight_bytes_before'), stored))
after = weight_bytes(onnx.load(out)) if rc == 0 else None
expect('weight_bytes_after = the written model\'s weight bytes', j.get('weight_bytes_after') == after,
       (j.get('weight_bytes_after'), after))

rc, so, se = run(['quantize', f16, '-o', out, '--random', '4', '--threads', '2'])
line = next((s for s in so.splitlines() if s.startswith('weights: ')), '')
want = f'weights: {stored / 1e6:.2f} MB -> {(after or 0) / 1e6:.2f} MB ('
expect('text line', rc == 0 and line.startswith(want), (line, want))

print(json.dumps({'ok': not failures, 'failures': failures, 'stored': stored, 'after': after}))
sys.exit(1 if failures else 0)
