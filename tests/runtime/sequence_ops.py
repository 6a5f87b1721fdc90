#!/usr/bin/python3
"""Sequences of tensors (runtime/value.h) and GlobalLpPool: `qtool run` against ONNX Runtime 1.30 on tiny models built
here with onnx.helper and on torch.jit.script exports (torch 1.13 writes SplitToSequence, a Loop building a list with
SequenceInsert, ConcatFromSequence), seeded inputs; every output within max |qtool - ort| <= 1e-4 * max |ort| + 1e-5.
onnxruntime-node returns tensors only, so these graphs end in tensors; sequence graph outputs and inputs (`qtool run`
writes NAME_0.npy, ...; reads a SequenceProto .pb) are checked against NumPy. Then the inputs qtool refuses: exit 2
with one line naming the node.

usage: sequence_ops.py [NAME ...]   (default: every case)
"""
import json
import os
import subprocess
import sys
import tempfile
from typing import List

import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contrib_ops as C  # noqa: E402  (ORT/qtool runners, comparison)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'quantize'))
import qtest  # noqa: E402

RNG = np.random.RandomState(0)
F = TensorProto.FLOAT


def rand(*shape):
    return RNG.randn(*shape).astype(np.float32)


def const(name, v, dt=np.int64):
    return numpy_helper.from_array(np.array(v, dt), name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    """inputs: {name: array}; outputs: names of float outputs, or (name, TensorProto type)."""
    vi = [helper.make_tensor_value_info(k, mapping.NP_TYPE_TO_TENSOR_TYPE[v.dtype], list(v.shape))
          for k, v in inputs.items()]
    vo = [helper.make_tensor_value_info(*(o if isinstance(o, tuple) else (o, F)), None) for o in outputs]
    g = helper.make_graph(nodes, 'seq', vi, vo, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)], ir_version=8), inputs


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def seq_info(name, elem=F):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def loop_body_append(body_nodes, carried='acc_in', out='acc_out'):
    """A Loop body (iter, cond, acc) -> (cond, acc'): body_nodes make `item`, SequenceInsert appends it."""
    nodes = body_nodes + [node('SequenceInsert', [carried, 'item'], [out]), node('Identity', ['cond_in'], ['cond_out'])]
    return helper.make_graph(
        nodes, 'body',
        [helper.make_tensor_value_info('iter', TensorProto.INT64, []),
         helper.make_tensor_value_info('cond_in', TensorProto.BOOL, []), seq_info(carried)],
        [helper.make_tensor_value_info('cond_out', TensorProto.BOOL, []), seq_info(out)])


def cases():
    c = {}
    x = rand(2, 6, 5)
    # SplitToSequence -> ConcatFromSequence round trips: 1-D split, scalar split (uneven: 4, 2), and no split with
    # keepdims 0 stacked back (new_axis 1), on axes 1, -1 and 0.
    c['split_sizes_concat'] = model(
        [node('SplitToSequence', ['x', 'sizes'], ['s'], axis=1), node('ConcatFromSequence', ['s'], ['y'], axis=1),
         node('SequenceLength', ['s'], ['n'])],
        {'x': x}, ['y', ('n', TensorProto.INT64)], [const('sizes', [1, 2, 3])])
    c['split_scalar_uneven'] = model(
        [node('SplitToSequence', ['x', 'k'], ['s'], axis=1), node('SequenceAt', ['s', 'last'], ['tail']),
         node('SequenceAt', ['s', 'first'], ['head']), node('ConcatFromSequence', ['s'], ['y'], axis=-2)],
        {'x': x}, ['y', 'tail', 'head'], [const('k', 4), const('last', -1), const('first', 0, np.int32)])
    c['unbind_stack'] = model(
        [node('SplitToSequence', ['x'], ['s'], axis=-1, keepdims=0),
         node('ConcatFromSequence', ['s'], ['y'], axis=1, new_axis=1),
         node('ConcatFromSequence', ['s'], ['y_last'], axis=-1, new_axis=1)],
        {'x': x}, ['y', 'y_last'])
    # torch.jit.script's torch.unbind: a scalar split of 1 with keepdims 0 drops the axis (ORT's reading).
    c['split_scalar1_keepdims0'] = model(
        [node('SplitToSequence', ['x', 'one'], ['s'], axis=1, keepdims=0),
         node('ConcatFromSequence', ['s'], ['y'], axis=2, new_axis=1)], {'x': x}, ['y'], [const('one', 1)])
    c['split_keepdims_axis0'] = model(
        [node('SplitToSequence', ['x'], ['s'], axis=0), node('ConcatFromSequence', ['s'], ['y'], axis=2)],
        {'x': x}, ['y'])
    # Construct / insert / erase / at / length, positions from both ends; an int64 sequence.
    a, b, d = rand(3, 4), rand(3, 4), rand(3, 4)
    c['construct_insert_erase'] = model(
        [node('SequenceConstruct', ['a', 'b'], ['s0']), node('SequenceInsert', ['s0', 'd', 'p1'], ['s1']),
         node('SequenceInsert', ['s1', 'a'], ['s2']), node('SequenceErase', ['s2', 'm2'], ['s3']),
         node('SequenceErase', ['s3'], ['s4']), node('SequenceAt', ['s4', 'p1'], ['y1']),
         node('SequenceLength', ['s4'], ['n']), node('ConcatFromSequence', ['s4'], ['y'], axis=0),
         node('ConcatFromSequence', ['s2'], ['y2'], axis=1)],
        {'a': a, 'b': b, 'd': d}, ['y', 'y1', 'y2', ('n', TensorProto.INT64)], [const('p1', 1), const('m2', -2)])
    c['empty_insert_int64'] = model(
        [node('SequenceEmpty', [], ['e'], dtype=TensorProto.INT64), node('SequenceInsert', ['e', 'i'], ['s1']),
         node('SequenceInsert', ['s1', 'j', 'zero'], ['s2']), node('ConcatFromSequence', ['s2'], ['y'], axis=0)],
        {'i': np.arange(6, dtype=np.int64).reshape(2, 3), 'j': np.arange(3, dtype=np.int64).reshape(1, 3) * 7},
        [('y', TensorProto.INT64)], [const('zero', 0)])
    # A Loop that builds a list: acc starts as SequenceEmpty, the body appends x * iter; then stacked.
    body = loop_body_append([node('Cast', ['iter'], ['fi'], to=F), node('Mul', ['x', 'fi'], ['item'])])
    c['loop_builds_sequence'] = model(
        [node('SequenceEmpty', [], ['e']), node('Loop', ['trips', '', 'e'], ['acc'], body=body),
         node('ConcatFromSequence', ['acc'], ['y'], axis=0, new_axis=1), node('SequenceLength', ['acc'], ['n'])],
        {'x': rand(3, 4)}, ['y', ('n', TensorProto.INT64)], [const('trips', 5)])
    # A Loop carrying a sequence it reads and grows (each item = the previous one + 1), with a scan output too.
    body2 = helper.make_graph(
        [node('SequenceAt', ['acc_in', 'minus1'], ['prev']), node('Add', ['prev', 'one'], ['item']),
         node('SequenceInsert', ['acc_in', 'item'], ['acc_out']), node('Identity', ['cond_in'], ['cond_out']),
         node('ReduceSum', ['item'], ['total'], keepdims=0)],
        'body2',
        [helper.make_tensor_value_info('iter', TensorProto.INT64, []),
         helper.make_tensor_value_info('cond_in', TensorProto.BOOL, []), seq_info('acc_in')],
        [helper.make_tensor_value_info('cond_out', TensorProto.BOOL, []), seq_info('acc_out'),
         helper.make_tensor_value_info('total', F, [])],
        [const('minus1', -1), numpy_helper.from_array(np.array(1, np.float32), 'one')])
    c['loop_reads_and_grows'] = model(
        [node('SequenceConstruct', ['x'], ['s']), node('Loop', ['trips', '', 's'], ['acc', 'totals'], body=body2),
         node('ConcatFromSequence', ['acc'], ['y'], axis=0)],
        {'x': rand(2, 3)}, ['y', 'totals'], [const('trips', 4)])
    # If returning a sequence: the then branch splits x, the else branch builds [x, -x]; both end in a Concat.
    then_g = helper.make_graph([node('SplitToSequence', ['x'], ['ts'], axis=0)], 'then', [], [seq_info('ts')])
    else_g = helper.make_graph([node('Neg', ['x'], ['nx']), node('SequenceConstruct', ['x', 'nx'], ['es'])], 'else',
                               [], [seq_info('es')])
    for flag in (True, False):
        c[f'if_returns_sequence_{str(flag).lower()}'] = model(
            [node('If', ['cond'], ['s'], then_branch=then_g, else_branch=else_g),
             node('ConcatFromSequence', ['s'], ['y'], axis=1), node('SequenceLength', ['s'], ['n'])],
            {'x': rand(4, 3), 'cond': np.array(flag)}, ['y', ('n', TensorProto.INT64)])
    # SequenceMap (opset 17): a body over each element with an extra tensor input, two output sequences.
    map_body = helper.make_graph(
        [node('Add', ['el', 'bias'], ['r0']), node('Relu', ['r0'], ['o0']), node('Shape', ['el'], ['o1'])], 'map',
        [helper.make_tensor_value_info('el', F, None), helper.make_tensor_value_info('bias', F, None)],
        [helper.make_tensor_value_info('o0', F, None), helper.make_tensor_value_info('o1', TensorProto.INT64, None)])
    c['sequence_map'] = model(
        [node('SplitToSequence', ['x', 'sizes'], ['s'], axis=1),
         node('SequenceMap', ['s', 'bias'], ['m0', 'm1'], body=map_body),
         node('ConcatFromSequence', ['m0'], ['y'], axis=1), node('ConcatFromSequence', ['m1'], ['shapes'], axis=0)],
        {'x': x, 'bias': rand(5)}, ['y', ('shapes', TensorProto.INT64)], [const('sizes', [2, 4])], opset=17)
    # GlobalLpPool, p = 2 and 3.
    xp = rand(2, 3, 5, 4)
    c['global_lp_pool_p2'] = model([node('GlobalLpPool', ['x'], ['y'])], {'x': xp}, ['y'])
    c['global_lp_pool_p3'] = model([node('GlobalLpPool', ['x'], ['y'], p=3)], {'x': xp}, ['y'])
    return c


def torch_cases(work):
    """torch.jit.script exports (torch 1.13, opset 13): a split into a list processed by a loop (SplitToSequence,
    SequenceEmpty, a Loop with SequenceAt / SequenceInsert, ConcatFromSequence), and unbind + stack."""
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print('skip torch exports: no torch')
        return {}

    class SplitLoop(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1)

        def forward(self, x):
            chunks = torch.split(x, 2, 1)
            out: List[torch.Tensor] = []
            for c in chunks:
                out.append(torch.relu(self.conv(c)) * 2.0)
            return torch.cat(out, 1)

    class UnbindStack(nn.Module):
        def forward(self, x):
            parts = torch.unbind(x, 1)
            return torch.stack(parts, 2)

    torch.manual_seed(0)
    out = {}
    for name, m, shape in (('torch_script_split_loop', SplitLoop(), (2, 6, 8, 8)),
                           ('torch_script_unbind_stack', UnbindStack(), (2, 5, 4))):
        path = os.path.join(work, name + '.onnx')
        x = torch.randn(*shape)
        torch.onnx.export(torch.jit.script(m.eval()), (x,), path, input_names=['x'], output_names=['y'],
                          dynamic_axes={'x': {0: 'B'}, 'y': {0: 'B'}}, opset_version=13)
        import onnx
        out[name] = (onnx.load(path), {'x': x.numpy()})
    return out


# Inputs qtool refuses: exit 2, one line naming the node and saying what is wrong (the words expected).
def refused():
    x = rand(2, 6, 5)
    return {
        'sequence_at_out_of_range': (model(
            [node('SplitToSequence', ['x'], ['s'], axis=1), node('SequenceAt', ['s', 'p'], ['y'])],
            {'x': x}, ['y'], [const('p', 6)]), "SequenceAt 'SequenceAt_1': position 6 is outside [-6, 5]"),
        'sequence_insert_mixed_dtype': (model(
            [node('SequenceConstruct', ['x'], ['s']), node('SequenceInsert', ['s', 'i'], ['s2']),
             node('ConcatFromSequence', ['s2'], ['y'], axis=0)],
            {'x': x, 'i': np.zeros((2, 6, 5), np.int64)}, ['y']), 'the tensor is int64, the sequence holds float'),
        'concat_from_empty_sequence': (model(
            [node('SequenceEmpty', [], ['e']), node('ConcatFromSequence', ['e'], ['y'], axis=0)], {'x': x}, ['y']),
            'the input sequence is empty'),
        'split_sizes_do_not_sum': (model(
            [node('SplitToSequence', ['x', 'sizes'], ['s'], axis=1), node('ConcatFromSequence', ['s'], ['y'], axis=1)],
            {'x': x}, ['y'], [const('sizes', [2, 2])]), 'sum to 4, not to the axis length 6'),
        'split_zero': (model(
            [node('SplitToSequence', ['x', 'k'], ['s'], axis=1), node('ConcatFromSequence', ['s'], ['y'], axis=1)],
            {'x': x}, ['y'], [const('k', 0)]), 'split 0 must be > 0'),
        'split_scalar2_keepdims0': (model(
            [node('SplitToSequence', ['x', 'k'], ['s'], axis=1, keepdims=0),
             node('ConcatFromSequence', ['s'], ['y'], axis=1)], {'x': x}, ['y'], [const('k', 2)]),
            'keepdims = 0 removes the split axis, so a scalar split must be 1, got 2'),
        'concat_shapes_differ': (model(
            [node('SequenceConstruct', ['x', 'x2'], ['s']), node('ConcatFromSequence', ['s'], ['y'], axis=1)],
            {'x': x, 'x2': rand(2, 6, 4)}, ['y']), 'does not match element 0'),
        'relu_reads_a_sequence': (model(
            [node('SplitToSequence', ['x'], ['s'], axis=1), node('Relu', ['s'], ['y'])], {'x': x}, ['y']),
            "Relu 'Relu_1': input 's' is a sequence of 6 float tensors; Relu takes tensors only"),
        'erase_from_empty': (model(
            [node('SequenceEmpty', [], ['e']), node('SequenceErase', ['e'], ['e2']),
             node('SequenceLength', ['e2'], ['y'])], {'x': x}, [('y', TensorProto.INT64)]),
            'cannot erase from an empty sequence'),
    }


def check_refused(work, name, m, inputs, words):
    """qtool run must exit 2 with one line naming the node and containing `words`."""
    path, files = C.write_case(work, name, m, inputs)
    r = C.qtool_run(path, files, os.path.join(work, 'q_' + name))
    msg = r.stderr.strip()
    good = r.returncode == 2 and len(msg.splitlines()) == 1 and words in msg
    print(f'{"ok  " if good else "FAIL"} {name}: refused with exit {r.returncode}: {msg}')
    return good


def check_limit(work):
    """A SplitToSequence of 10^6 values into 1-element parts under --max-memory 64M: each element's bookkeeping
    (256 bytes) is counted, so qtool refuses it (exit 2 naming --max-memory) instead of making a million handles."""
    m, inputs = model([node('SplitToSequence', ['x'], ['s'], axis=0), node('SequenceLength', ['s'], ['y'])],
                      {'x': np.zeros(1_000_000, np.float32)}, [('y', TensorProto.INT64)])
    path, files = C.write_case(work, 'split_limit', m, inputs)
    r = subprocess.run([qtest.qtool(), 'run', path, '--input', f'x={files["x"]}', '--max-memory', '64M'],
                       capture_output=True, text=True)
    msg = r.stderr.strip()
    good = r.returncode == 2 and len(msg.splitlines()) == 1 and '--max-memory' in msg and 'SplitToSequence' in msg
    print(f'{"ok  " if good else "FAIL"} split_limit: exit {r.returncode}: {msg}')
    return good


def check_sequence_io(work):
    """A sequence graph output is written one .npy per element (NAME_0.npy ...), and a sequence graph input is read
    from an ONNX SequenceProto .pb; values checked against NumPy (ORT's node binding returns tensors only)."""
    x = rand(4, 3)
    m, inputs = model([node('SplitToSequence', ['x', 'sizes'], ['parts'], axis=0),
                       node('SequenceInsert', ['extra', 'x'], ['grown']),
                       node('SequenceLength', ['grown'], ['n'])],
                      {'x': x}, [('n', TensorProto.INT64)], [const('sizes', [1, 3])])
    g = m.graph
    g.input.append(seq_info('extra'))
    g.output.insert(0, seq_info('parts'))
    path, files = C.write_case(work, 'sequence_io', m, inputs)
    extra = [rand(4, 3), rand(4, 3)]
    seq = helper.make_sequence('extra', 1, [numpy_helper.from_array(a) for a in extra])  # 1: SequenceProto.TENSOR
    seq_file = os.path.join(work, 'extra.pb')
    with open(seq_file, 'wb') as f:
        f.write(seq.SerializeToString())
    outdir = os.path.join(work, 'q_sequence_io')
    r = subprocess.run([qtest.qtool(), 'run', path, '--input', f'x={files["x"]}', '--input', f'extra={seq_file}',
                        '--output-dir', outdir, '--json'], capture_output=True, text=True)
    problems = []
    if r.returncode != 0:
        problems.append(f'exit {r.returncode}: {r.stderr.strip()}')
    else:
        res = json.loads(r.stdout.strip().splitlines()[-1])
        parts = next(o for o in res['outputs'] if o['name'] == 'parts')
        if not parts.get('sequence') or parts['shapes'] != [[1, 3], [3, 3]]:
            problems.append(f'parts reported as {parts}')
        for k, want in enumerate((x[:1], x[1:])):
            got = np.load(os.path.join(outdir, f'parts_{k}.npy'))
            if got.shape != want.shape or not np.array_equal(got, want):
                problems.append(f'parts_{k}.npy differs')
        if int(np.load(os.path.join(outdir, 'n.npy'))) != 3:
            problems.append('n is not 3')
        text = subprocess.run([qtest.qtool(), 'run', path, '--input', f'x={files["x"]}', '--input',
                               f'extra={seq_file}'], capture_output=True, text=True).stdout
        if 'parts  sequence of 2 float [1,3] [3,3]' not in text:
            problems.append('text report: ' + text.strip().splitlines()[0])
    # A tensor where the model declares a sequence: one line naming the input.
    r = subprocess.run([qtest.qtool(), 'run', path, '--input', f'x={files["x"]}', '--input', f'extra={files["x"]}'],
                       capture_output=True, text=True)
    if r.returncode not in (1, 2) or 'extra' not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
        problems.append(f'a tensor for the sequence input: exit {r.returncode}: {r.stderr.strip()}')
    for p in problems:
        print('FAIL sequence_io: ' + p)
    if not problems:
        print('ok   sequence_io: parts_0.npy, parts_1.npy written; SequenceProto input read')
    return not problems


def main():
    only = set(sys.argv[1:])
    ok = True
    with tempfile.TemporaryDirectory() as work:
        all_cases = {**cases(), **torch_cases(work)}
        for name, (m, inputs) in all_cases.items():
            if not only or name in only:
                ok = C.run_case(work, name, m, inputs) and ok
        for name, ((m, inputs), words) in refused().items():
            if not only or name in only:
                ok = check_refused(work, name, m, inputs, words) and ok
        if not only or 'split_limit' in only:
            ok = check_limit(work) and ok
        if not only or 'sequence_io' in only:
            ok = check_sequence_io(work) and ok
    print('all sequence cases match ONNX Runtime' if ok else 'some sequence cases differ from ONNX Runtime')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
