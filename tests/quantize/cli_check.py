#!/usr/bin/python3
"""`qtool quantize` as a CLI: exit codes and one-line errors with JSON paths, deterministic output bytes,
the TensorRT profile's structure, graph inputs/outputs unchanged, --explain. Prints one JSON line."""
import filecmp
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

failures = []


def expect(name, cond, detail=''):
    if not cond:
        failures.append(f'{name}: {detail}')


def run(args):
    r = subprocess.run([qtool] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


qtool = qtest.qtool()
work = tempfile.mkdtemp(prefix='qtool-cli-')
model = os.path.join(qtest.MODELS, 'superres-espcn-3x.onnx')
calib = os.path.join(work, 'sr.calib.json')
qtest.calibrate(model, [{'input': qtest.t('superres_bus_lr_y.npy')}], calib)

# Config errors: exit code 2, one line naming the file and the JSON path.
bad = os.path.join(work, 'bad.json')
with open(bad, 'w') as f:
    json.dump({'format': 'qtool-qconfig', 'version': 1, 'global': {},
               'op_types': {'Conv': {'weight': {'granularity': 'perchannel'}}}}, f)
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'x.onnx'), '--calib', calib, '--config', bad])
expect('bad granularity exit code', rc == 2, rc)
expect('bad granularity message', 'bad.json: $.op_types.Conv.weight.granularity: expected one of per_tensor, '
       'per_channel, per_block, got "perchannel"' in err, err)
expect('bad granularity one line', err.strip().count('\n') == 0, err)
with open(bad, 'w') as f:
    json.dump({'format': 'qtool-qconfig', 'version': 1, 'global': {}, 'node_names': {'no_such_node': None}}, f)
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'x.onnx'), '--calib', calib, '--config', bad])
expect('unknown node name', rc == 2 and '$.node_names.no_such_node: no node of the model is named' in err, err)
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'x.onnx')])
expect('no calibration source is a usage error', rc == 1, (rc, err))
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'x.onnx'), '--calib', calib, '--random', '4'])
expect('--calib and --random exclude each other', rc == 1, (rc, err))
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'x.onnx'), '--calib', model])
expect('calibration file that is not JSON', rc == 2 and 'not valid JSON' in err, (rc, err))

# With no calibration file, --random N calibrates first (`qtool quantize MODEL -o OUT --random 32` just works).
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'r.onnx'), '--random', '2', '--threads', '2'])
expect('--random calibrates first', rc == 0 and 'quantized: Conv 4' in out, (rc, out, err))

# Calibrating inside quantize gives the same bytes with 1 and 2 threads.
t1, t2 = os.path.join(work, 't1.onnx'), os.path.join(work, 't2.onnx')
for p, n in ((t1, '1'), (t2, '2')):
    rc, out, err = run(['quantize', model, '-o', p, '--data', 'input=' + qtest.t('superres_bus_lr_y.npy'), '--threads', n])
    expect('--data calibrates first', rc == 0, err)
expect('byte-identical across thread counts', filecmp.cmp(t1, t2, shallow=False))

# Accuracy guard (on in the default config): SQNR per output on the samples; --calib alone has no samples.
sr_data = ['--data', 'input=' + qtest.t('superres_bus_lr_y.npy')]
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'g.onnx'), '--json'] + sr_data)
g = json.loads(out.strip().splitlines()[-1])['accuracy_guard'] if rc == 0 else {}
expect('guard runs with --data', g.get('ran') and g.get('met') and g.get('kept_float') == [], (rc, g, err))
expect('guard SQNR of the output', g.get('outputs') and g['outputs'][0]['output'] == 'output' and
       not g['outputs'][0]['state'] and 30 < g['outputs'][0]['sqnr_db'] == g['outputs'][0]['final_sqnr_db'], g)
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'g.onnx'), '--calib', calib])
expect('guard cannot run on --calib alone', rc == 0 and 'accuracy guard: not run: no calibration samples' in out, out)
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'g.onnx'), '--calib', calib, '--json',
                    '--accuracy-guard', 'off'] + sr_data)
expect('--accuracy-guard off', rc == 0 and json.loads(out)['accuracy_guard']['note'] == 'off', (rc, out, err))
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'g.onnx'), '--accuracy-guard', 'maybe'] + sr_data)
expect('--accuracy-guard takes on|off', rc != 0 and 'maybe' in err, (rc, err))
# A threshold the int8 model misses (37 dB measured): tensors go back to float, the same bytes with 1 and 2 threads,
# and the text summary names them.
g1, g2 = os.path.join(work, 'g1.onnx'), os.path.join(work, 'g2.onnx')
for p, n in ((g1, '1'), (g2, '2')):
    rc, out, err = run(['quantize', model, '-o', p, '--calib', calib, '--min-sqnr', '45', '--threads', n] + sr_data)
    expect('guard with --min-sqnr 45', rc == 0 and 'kept float: activation' in out or 'kept float: weight' in out,
           (rc, out, err))
expect('guard: byte-identical across thread counts', filecmp.cmp(g1, g2, shallow=False))
sq = [float(x.split('->')[1].split('dB')[0]) for x in out.splitlines() if x.strip().startswith('output output: SQNR')]
expect('guard meets --min-sqnr 45', sq and sq[0] >= 45, out)
yf = qtest.ort_run(model, {'input': qtest.t('superres_bus_lr_y.npy')}, os.path.join(work, 'gf'))[0]['output']
yq = qtest.ort_run(g1, {'input': qtest.t('superres_bus_lr_y.npy')}, os.path.join(work, 'gq'))[0]['output']
ort_sqnr = 10 * np.log10(float((yf.astype(np.float64) ** 2).sum() / ((yf - yq).astype(np.float64) ** 2).sum()))
expect('guard: ONNX Runtime agrees (SQNR >= 43 dB)', ort_sqnr >= 43, ort_sqnr)

# Deterministic: the same bytes twice.
a, b = os.path.join(work, 'a.onnx'), os.path.join(work, 'b.onnx')
for p in (a, b):
    rc, out, err = run(['quantize', model, '-o', p, '--calib', calib])
    expect('quantize runs', rc == 0, err)
expect('byte-identical output', filecmp.cmp(a, b, shallow=False))
expect('summary printed', 'quantized:' in out and 'kept float:' in out and 'MB ->' in out, out)

# Structure of the default (ORT) output.
src, q = onnx.load(model), onnx.load(a)
inits = {i.name for i in src.graph.initializer}
expect('graph inputs unchanged', [i.name for i in q.graph.input] == [i.name for i in src.graph.input if i.name not in inits])
expect('graph outputs unchanged', [o.name for o in q.graph.output] == [o.name for o in src.graph.output])
ops = Counter(n.op_type for n in q.graph.node)
# One Q per activation: the input and three Conv/Relu outputs. The last conv's output reaches the graph output only
# through the pixel shuffle (Reshape -> Transpose -> Reshape), so it stays float like the output (qdq.cc output_values).
expect('one Q per activation', ops['QuantizeLinear'] == 4, ops)
qinit = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
expect('int8 weights', qinit['conv1.weight_quantized'].dtype.name == 'int8')
expect('per-channel weight scales', qinit['conv1.weight_scale'].shape == (64,))
expect('int32 bias', qinit['conv1.bias_quantized'].dtype.name == 'int32')
expect('names unique', len({o for n in q.graph.node for o in n.output}) == sum(len(n.output) for n in q.graph.node))

# TensorRT profile: int8 symmetric activations on weighted ops' inputs only, biases float, no output Q/DQ.
trt = os.path.join(work, 'trt.onnx')
rc, out, err = run(['quantize', model, '-o', trt, '--calib', calib, '--config',
                    os.path.join(qtest.ROOT, 'configs', 'int8-tensorrt.json')])
expect('trt profile runs', rc == 0, err)
t = onnx.load(trt)
tinit = {i.name: numpy_helper.to_array(i) for i in t.graph.initializer}
tops = Counter(n.op_type for n in t.graph.node)
expect('trt: one Q per conv input', tops['QuantizeLinear'] == 4, tops)
expect('trt: biases stay float', 'conv1.bias' in tinit and 'conv1.bias_quantized' not in tinit)
expect('trt: symmetric int8 activations', tinit['input_zero_point'].dtype.name == 'int8' and int(tinit['input_zero_point']) == 0)
expect('trt: narrow-range weights', int(tinit['conv2.weight_quantized'].min()) >= -127)

# --explain names the rules per node.
rc, out, err = run(['quantize', model, '-o', os.path.join(work, 'e.onnx'), '--calib', calib, '--explain'])
expect('explain', rc == 0 and '$.global > $.op_types.Conv' in out and 'values, axis 0' in out, out[:400])

# qtool inspect MODEL --config --calib --explain shows the same per-node decisions without writing a model.
rc, out, err = run(['inspect', model, '--explain', '--calib', calib, '--config',
                    os.path.join(qtest.ROOT, 'configs', 'int8-tensorrt.json')])
expect('inspect --explain', rc == 0 and '$.global > $.op_types.*' in out and 'input int8 scale=' in out, out[:400])

# Weight-only int4 (blocked, opset 21) and FP8 (opset 19) on digits-vit: ONNX Runtime runs them accurately.
digits = os.path.join(qtest.MODELS, 'digits-vit.onnx')
dcal = os.path.join(work, 'digits.calib.json')
qtest.calibrate(digits, [{'pixel_values': qtest.t('digits_calib_images.npy')}], dcal)
labels = np.load(qtest.t('digits_test_labels.npy'))
for cfg, dtype, opset in (('int4-weights', 22, 21), ('fp8-weights', 17, 19)):
    out = os.path.join(work, cfg + '.onnx')
    rc, _, err = run(['quantize', digits, '-o', out, '--calib', dcal, '--config',
                      os.path.join(qtest.ROOT, 'configs', 'examples', cfg + '.json')])
    expect(cfg + ' runs', rc == 0, err)
    m = onnx.load(out)
    expect(cfg + ' opset', [o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')] == [opset])
    expect(cfg + ' dtype', any(i.data_type == dtype for i in m.graph.initializer))
    expect(cfg + ' no activation Q', not any(n.op_type == 'QuantizeLinear' for n in m.graph.node))
    if cfg.startswith('int4'):
        expect('int4 block_size', any(a.name == 'block_size' and a.i == 32 for n in m.graph.node for a in n.attribute))
    o, _ = qtest.ort_run(out, {'pixel_values': qtest.t('digits_test_images.npy')}, os.path.join(work, cfg))
    acc = float((o['logits'].argmax(1) == labels).mean())
    expect(cfg + ' accuracy in ORT', acc >= 0.95, acc)

# GPTQ on Conv weights (configs/examples/fp8-weights-gptq.json; digits-vit's patch embedding is a Conv): needs the
# calibration samples, refused with exit 2 without them; with them FP8 weights that ORT runs accurately.
cfg = os.path.join(qtest.ROOT, 'configs', 'examples', 'fp8-weights-gptq.json')
out = os.path.join(work, 'fp8-weights-gptq.onnx')
rc, _, err = run(['quantize', digits, '-o', out, '--calib', dcal, '--config', cfg])
expect('conv gptq without samples refused', rc == 2 and '--data' in err and not os.path.exists(out), (rc, err))
rc, _, err = run(['quantize', digits, '-o', out, '--config', cfg, '--data',
                  'pixel_values=' + qtest.t('digits_calib_images.npy')])
expect('conv gptq runs', rc == 0, err)
if rc == 0:
    m = onnx.load(out)
    conv_w = {n.input[1] for n in m.graph.node if n.op_type == 'Conv'}
    dq = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == 'DequantizeLinear'}
    inits = {i.name: i.data_type for i in m.graph.initializer}
    expect('conv gptq: Conv weight in FP8', conv_w and all(inits.get(dq.get(w)) == 17 for w in conv_w), conv_w)
    o, _ = qtest.ort_run(out, {'pixel_values': qtest.t('digits_test_images.npy')}, os.path.join(work, 'fp8g'))
    acc = float((o['logits'].argmax(1) == labels).mean())
    expect('conv gptq accuracy in ORT', acc >= 0.95, acc)

# FP8 activations and weights (configs/fp8-*.json, target tensorrt): Q/DQ on the inputs of MatMul/Gemm, FP8 zero
# points; ONNX Runtime's CPU provider runs them with graph optimizations disabled, accurately. Their MatMul/Gemm
# weights are rounded by GPTQ, which needs the calibration samples beside the table (--data).
for cfg, dtype in (('fp8-e4m3fn', 17), ('fp8-e5m2', 19)):
    out = os.path.join(work, cfg + '.onnx')
    rc, _, err = run(['quantize', digits, '-o', out, '--calib', dcal, '--config',
                      os.path.join(qtest.ROOT, 'configs', cfg + '.json'),
                      '--data', 'pixel_values=' + qtest.t('digits_calib_images.npy')])
    expect(cfg + ' runs', rc == 0, err)
    m = onnx.load(out)
    zps = {i.name: i.data_type for i in m.graph.initializer}
    qs = [n for n in m.graph.node if n.op_type == 'QuantizeLinear']
    expect(cfg + ' activation Q/DQ', len(qs) > 0 and all(zps.get(n.input[2]) == dtype for n in qs), len(qs))
    o, _ = qtest.ort_run(out, {'pixel_values': qtest.t('digits_test_images.npy')}, os.path.join(work, cfg),
                         opt_level='disabled')
    acc = float((o['logits'].argmax(1) == labels).mean())
    expect(cfg + ' accuracy in ORT', acc >= 0.95, acc)

# Under the default target (ort-cpu), FP8 activations are refused before anything is written: ONNX Runtime's CPU
# provider cannot load them with its default graph optimizations.
fp8_cfg = os.path.join(work, 'fp8-ort.json')
with open(os.path.join(qtest.ROOT, 'configs', 'fp8-e4m3fn.json')) as f:
    c = json.load(f)
del c['target']
with open(fp8_cfg, 'w') as f:
    json.dump(c, f)
out = os.path.join(work, 'fp8-ort.onnx')
rc, _, err = run(['quantize', digits, '-o', out, '--calib', dcal, '--config', fp8_cfg])
expect('fp8 activations refused for ort-cpu', rc == 2 and '$.global.activation.dtype' in err and
       '"target": "tensorrt"' in err and len(err.strip().splitlines()) == 1 and not os.path.exists(out), (rc, err))

print(json.dumps({'ok': not failures, 'failures': failures}))
sys.exit(1 if failures else 0)
