#!/usr/bin/python3
"""Big models in bounded memory (issue 14): `qtool convert` and weight-only `qtool quantize` of a Llama-shaped model
with external data (scripts/make_llama.py, random weights) never hold all its weights at once.

usage: big_model_memory.py QTOOL SOURCE_DIR SCRATCH_DIR

The model here is 136 MiB of weights, its largest tensor 16 MiB (the embedding and the LM head). Memory is
counted above the process's own base (peak RSS of the same command on the bundled tiny model: code, libraries,
runtime state). Bars follow from the design, not from measurements: convert copies external data through one
8 MiB buffer (bar: two of them); int4 quantize holds one float weight, its quantized form and scratch no bigger
than the weight, and spills results to disk (bar: twice the largest tensor, plus 8 MiB for the graph and the
report; the same bar for int8 per-channel weight-only, whose per-column groups once cost 8 bytes per element). Holding every weight once would need the whole 136 MiB. Also checked: the output keeps external data, runs in
ONNX Runtime 1.30 (optimizations 'basic': its 'all' level turns int4 MatMuls into MatMulNBits with int8
activations) with qtool's own outputs, equals the bytes an in-memory quantize writes, and no spill or temporary
file is left beside it. A model file that carries qtool's reserved external-data key is refused (exit 2).

In a sanitizer build (QTOOL_SANITIZE set, tests/CMakeLists.txt) the two memory bars are not checked: ASan keeps
freed blocks in a quarantine (256 MiB by default) and adds shadow memory and redzones to every allocation, so
peak RSS there measures ASan, not qtool. Everything else is checked, under ASan+UBSan.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx

qtool, source, scratch = sys.argv[1:4]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
failures = []
measure_memory = not os.environ.get('QTOOL_SANITIZE')


def expect(name, ok, detail=''):
    if not ok:
        failures.append(f'{name}: {detail}')
        print(f'FAIL {name}: {detail}', file=sys.stderr)


def path(*p):
    return os.path.join(scratch, *p)


os.makedirs(path('in'))
model = path('in', 'llama.onnx')
gen = subprocess.run([sys.executable, os.path.join(source, 'scripts', 'make_llama.py'), model, '--layers', '8',
                      '--dim', '512', '--ffn', '1536', '--vocab', '8192'], capture_output=True, text=True)
expect('generate', gen.returncode == 0, gen.stderr)
weights = os.path.getsize(model + '.data')
largest = 8192 * 512 * 4  # the embedding and the LM head
MIB = 1 << 20
ids = path('ids.npy')
np.save(ids, np.array([[1, 17, 300, 4000, 8191, 5, 9, 2]], dtype=np.int64))


def peak_of(cmd):
    """Peak RSS of one command, measured with /usr/bin/time's own wait4 (independent of earlier children)."""
    r = subprocess.run(['/usr/bin/time', '-f', 'peak_rss_kb=%M'] + cmd, capture_output=True, text=True)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith('peak_rss_kb=')]
    peak = int(lines[-1].split('=')[1]) * 1024 if lines else -1
    err = '\n'.join(ln for ln in r.stderr.splitlines()
                    if not ln.startswith(('peak_rss_kb=', 'Command exited with non-zero status')))
    return r.returncode, r.stdout, err, peak


# The process's own base: the same commands on the bundled tiny model.
tiny = os.path.join(source, 'models', 'tiny_external.onnx')
_, _, _, base = peak_of([qtool, 'quantize', tiny, '--config', os.path.join(source, 'configs', 'examples',
                                                                      'int4-weights.json'),
                         '--random', '1', '-o', path('tiny_q.onnx')])

# convert: external -> external, chunked copy.
os.makedirs(path('conv'))
rc, _, err, peak = peak_of([qtool, 'convert', model, '-o', path('conv', 'c.onnx'), '--external-data', 'always'])
expect('convert runs', rc == 0, err)
peaks = {'base': base >> 20, 'convert': peak >> 20}
expect('convert memory', not measure_memory or 0 < base and 0 < peak and peak - base < 2 * 8 * MIB,
       f'peak RSS {peak >> 20} MiB for {weights >> 20} MiB of weights')
with open(model + '.data', 'rb') as a, open(path('conv', 'c.onnx.data'), 'rb') as b:
    expect('convert copies the bytes', a.read() == b.read())

# Activation ranges are not needed by a weight-only config, but quantize wants a table: a min/max one is small.
calib = path('calib.json')
rc, _, err, _ = peak_of([qtool, 'calibrate', model, '--data', f'input_ids={ids}', '--methods', 'minmax', '-o', calib])
expect('calibrate', rc == 0, err)
config = os.path.join(source, 'configs', 'examples', 'int4-weights.json')

os.makedirs(path('q'))
out = path('q', 'q.onnx')
rc, _, err, peak = peak_of([qtool, 'quantize', model, '--config', config, '--calib', calib, '-o', out])
expect('quantize runs', rc == 0, err)
peaks['quantize'] = peak >> 20
expect('quantize memory', not measure_memory or 0 < base and 0 < peak and peak - base < 2 * largest + 8 * MIB,
       f'peak RSS {peak >> 20} MiB for {weights >> 20} MiB of weights')
expect('nothing but the output is left', sorted(os.listdir(path('q'))) == ['q.onnx', 'q.onnx.data'],
       os.listdir(path('q')))
m = onnx.load(out, load_external_data=False)
ext = [t for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
expect('output keeps external data', len(ext) > 0 and all(e.key in ('location', 'offset', 'length')
                                                          for t in ext for e in t.external_data))
expect('weights are int4', sum(t.data_type == 22 and t.name.endswith('_quantized') for t in m.graph.initializer) ==
       8 * 7 + 1)

# int8 per-channel weight-only (MatMul weights on their last axis: one scale per column), no samples needed. The
# same bar: one float weight, its codes and per-column state, nothing per element beyond those.
int8_config = path('int8-per-channel.json')
with open(int8_config, 'w') as f:
    json.dump({'format': 'qtool-qconfig', 'version': 1,
               'global': {'activation': None, 'weight': {'dtype': 'int8', 'granularity': 'per_channel'}, 'bias': None},
               'op_types': {'*': None, 'MatMul': {}, 'Gather': {}}}, f)
os.makedirs(path('q8'))
rc, _, err, peak = peak_of([qtool, 'quantize', model, '--config', int8_config, '-o', path('q8', 'q.onnx')])
expect('int8 per-channel quantize runs', rc == 0, err)
peaks['quantize_int8_per_channel'] = peak >> 20
expect('int8 per-channel quantize memory', not measure_memory or 0 < base and 0 < peak and
       peak - base < 2 * largest + 8 * MIB, f'peak RSS {peak >> 20} MiB (base {base >> 20}) for {weights >> 20} MiB of weights')

# The same quantization with everything in memory (the model inline) writes the same graph and tensors.
os.makedirs(path('inline'))
inline = path('inline', 'llama.onnx')
rc, _, err, _ = peak_of([qtool, 'convert', model, '-o', inline, '--external-data', 'never'])
expect('convert to one file', rc == 0, err)
rc, _, err, _ = peak_of([qtool, 'quantize', inline, '--config', config, '--calib', calib, '-o', path('inline', 'q.onnx'),
                         '--allow-calib-mismatch'])
expect('in-memory quantize', rc == 0, err)
a = onnx.load(out)
b = onnx.load(path('inline', 'q.onnx'))
expect('same model as in memory',
       [(t.name, t.data_type, tuple(t.dims), t.raw_data) for t in a.graph.initializer] ==
       [(t.name, t.data_type, tuple(t.dims), t.raw_data) for t in b.graph.initializer] and
       a.graph.node == b.graph.node)

# ONNX Runtime runs it with qtool's outputs.
res = subprocess.run(['node', os.path.join(source, 'scripts', 'ort', 'ort_run.mjs'), out, '--input', f'input_ids={ids}',
                      '--output-dir', path('ort'), '--opt-level', 'basic'], capture_output=True, text=True)
expect('ORT runs it', res.returncode == 0, res.stderr)
rc, _, err, _ = peak_of([qtool, 'run', out, '--input', f'input_ids={ids}', '-o', path('own')])
expect('qtool runs it', rc == 0, err)
if res.returncode == 0 and rc == 0:
    o, q = np.load(path('ort', 'logits.npy')), np.load(path('own', 'logits.npy'))
    expect('ORT matches qtool', np.abs(o - q).max() <= 1e-4 * max(1.0, np.abs(o).max()), np.abs(o - q).max())

# A model may not carry qtool's reserved key: it would let a file point qtool at any path.
evil = onnx.load(model, load_external_data=False)
kv = next(t for t in evil.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL).external_data.add()
kv.key, kv.value = 'qtool.resolved_path', '/etc/passwd'
onnx.save(evil, path('in', 'evil.onnx'))
rc, _, err, _ = peak_of([qtool, 'convert', path('in', 'evil.onnx'), '-o', path('evil_out.onnx')])
expect('reserved key refused', rc == 2 and 'reserved' in err and len(err.strip().splitlines()) == 1, (rc, err))

print(json.dumps({'ok': not failures, 'failures': failures, 'weights_mib': weights >> 20, 'peak_rss_mib': peaks}))
sys.exit(1 if failures else 0)
