#!/usr/bin/python3
"""`--random` on a model with token inputs (issue 12): `qtool calibrate --random` and `quantize --random` fill token
ids below the embedding's rows, masks with ones, positions with 0..T-1, type ids with zeros, and pick the sequence
length from the positional table (docs/calibration.md, "Random samples"); an integer input nothing reads as indices
is exit 2 with one line naming it and --data.

usage: random_inputs.py QTOOL SCRATCH_DIR
The model casts each integer input to float as a graph output, so the calibration table shows the values fed.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

qtool, scratch = sys.argv[1:3]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
failures = []
VOCAB, POSITIONS, D = 50, 32, 8


def check(name, ok, detail):
    print(('ok   ' if ok else 'FAIL ') + name + ': ' + json.dumps(detail))
    if not ok:
        failures.append(name)


def build(path, extra_input=False):
    """input_ids -> Gather(emb [50,8]); position_ids -> Gather(pos [32,8]); token_type_ids -> Gather(types [2,8]);
    attention_mask cast to float and turned into an additive mask; the embeddings summed and projected. With
    extra_input: an int64 input `flags` that is only added, never used as indices."""
    rng = np.random.RandomState(0)
    inits = [numpy_helper.from_array(rng.randn(*s).astype(np.float32), n)
             for n, s in (('emb', (VOCAB, D)), ('pos', (POSITIONS, D)), ('types', (2, D)), ('w', (D, D)))]
    inits.append(numpy_helper.from_array(np.array(1.0, np.float32), 'one'))
    nodes = [helper.make_node('Gather', ['emb', 'input_ids'], ['e']),
             helper.make_node('Gather', ['pos', 'position_ids'], ['p']),
             helper.make_node('Gather', ['types', 'token_type_ids'], ['t']),
             helper.make_node('Add', ['e', 'p'], ['ep']), helper.make_node('Add', ['ep', 't'], ['h']),
             helper.make_node('MatMul', ['h', 'w'], ['y']),
             helper.make_node('Cast', ['attention_mask'], ['mask_f'], to=TensorProto.FLOAT),
             helper.make_node('Sub', ['one', 'mask_f'], ['additive_mask'])]
    ints = ['input_ids', 'attention_mask', 'position_ids', 'token_type_ids'] + (['flags'] if extra_input else [])
    outputs = [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['batch', 'seq', D]),
               helper.make_tensor_value_info('additive_mask', TensorProto.FLOAT, ['batch', 'seq'])]
    for name in ints:
        if name != 'attention_mask':
            nodes.append(helper.make_node('Cast', [name], [name + '_f'], to=TensorProto.FLOAT))
            outputs.append(helper.make_tensor_value_info(name + '_f', TensorProto.FLOAT, ['batch', 'seq']))
    if extra_input:
        nodes.append(helper.make_node('Add', ['flags', 'flags'], ['flags2']))
        outputs.append(helper.make_tensor_value_info('flags2', TensorProto.INT64, ['batch', 'seq']))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ['batch', 'seq']) for n in ints]
    outputs.append(helper.make_tensor_value_info('mask_f', TensorProto.FLOAT, ['batch', 'seq']))
    g = helper.make_graph(nodes, 'tiny_lm', inputs, outputs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], ir_version=8), path)


def calibrate(model, *args):
    out = os.path.join(scratch, 'table.json')
    r = subprocess.run([qtool, '-v', 'calibrate', model, '-o', out, '-t', '1'] + list(args), capture_output=True,
                       text=True, timeout=120)
    table = json.load(open(out))['tensors'] if r.returncode == 0 else {}
    return r, {k: [v.get('min'), v.get('max')] for k, v in table.items()}


model = os.path.join(scratch, 'tiny_lm.onnx')
build(model)

# 1. Default shapes: the sequence is the position table's 32 rows; values are what each input wants.
r, seen = calibrate(model, '--random', '4')
check('calibrate --random fills each input as the graph reads it',
      r.returncode == 0 and seen.get('input_ids_f', [None])[0] is not None and 0 <= seen['input_ids_f'][0] and
      seen['input_ids_f'][1] <= VOCAB - 1 and seen['input_ids_f'][1] > seen['input_ids_f'][0] and
      seen.get('position_ids_f') == [0, POSITIONS - 1] and seen.get('mask_f') == [1, 1] and
      seen.get('token_type_ids_f') == [0, 0] and f"dim 'seq' = {POSITIONS}" in r.stderr and
      f'token ids uniform in [0, {VOCAB})' in r.stderr,
      {'rc': r.returncode, 'ranges': {k: v for k, v in seen.items() if k.endswith('_f')},
       'stderr': [ln for ln in r.stderr.splitlines() if '--random' in ln]})

# 2. --shape SYMBOL=N sets the sequence on every input.
r, seen = calibrate(model, '--random', '2', '--shape', 'seq=8')
check('--shape seq=8 sets the sequence everywhere', r.returncode == 0 and seen.get('position_ids_f') == [0, 7],
      {'rc': r.returncode, 'position_ids': seen.get('position_ids_f'), 'stderr': r.stderr.strip()[-300:]})

# 3. A sequence past the position table, and a --shape naming nothing: one line each.
for args, fragment, code in ((['--shape', 'seq=40'], 'rows', 1),
                              (['--shape', 'sequence=8'], "dim named 'sequence'", 2)):
    r, _ = calibrate(model, '--random', '2', *args)
    check(f'{" ".join(args)} is refused with one line', r.returncode == code and fragment in r.stderr and
          len(r.stderr.strip().splitlines()) == 1, {'rc': r.returncode, 'stderr': r.stderr.strip()})

# 4. quantize --random runs end to end and quantizes the MatMul.
r = subprocess.run([qtool, 'quantize', model, '--random', '4', '-t', '1', '-o', os.path.join(scratch, 'q.onnx'),
                    '--json'], capture_output=True, text=True, timeout=120)
weights = json.loads(r.stdout.strip().splitlines()[-1]).get('weights_quantized') if r.returncode == 0 else None
check('quantize --random on token inputs exits 0 and quantizes the MatMul', r.returncode == 0 and weights == 1,
      {'rc': r.returncode, 'weights_quantized': weights, 'stderr': r.stderr.strip()[-300:]})

# 5. An integer input no reader bounds: exit 2, one line naming it and --data.
bad = os.path.join(scratch, 'flags.onnx')
build(bad, extra_input=True)
r, _ = calibrate(bad, '--random', '2')
msg = r.stderr.strip()
check('an integer input with no table of known size is exit 2 naming it and --data',
      r.returncode == 2 and len(msg.splitlines()) == 1 and "'flags'" in msg and '--data flags=' in msg,
      {'rc': r.returncode, 'stderr': msg})

if failures:
    print('FAILED: ' + ', '.join(failures))
    sys.exit(1)
print('all checks passed')
