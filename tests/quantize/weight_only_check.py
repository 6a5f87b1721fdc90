"""Weight-only configs end to end (docs/weight-only.md), in ONNX Runtime 1.30:

- llama2c's token embedding (Gather on emb.weight [512, 64]) quantized weight-only, int4 in blocks of 32 along each
  row and int8 per row, without --data: ORT runs it, its logits match qtool's interpreter on the same model and
  ORT on the float model whose table is replaced by the dequantized codes (decoded here from the int4/int8 bytes).
- int4 MatMul weights (blocked DequantizeLinear, opset 21) run in ORT with every optimisation and match the
  interpreter; the script prints which ops ORT's optimised graph holds (MatMulNBits when it fuses).
- Double-quantized block scales ("scale_bits": 8 and 4): each weight DQ's scale is the output of a DQ of uint8/uint4
  codes; ORT loads and runs it with optimisations all and disabled, equal to the interpreter (ORT then does not fuse
  MatMulNBits: the scale is no initializer), and the stored scale bytes shrink.
- AWQ ("algorithm": "awq", with --data): one Mul by 1/s before each quantized MatMul, ORT (basic optimisations)
  equals the interpreter.
- GPTQ without --data: exit 2, the message names --data.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402
from qtest import MODELS, t  # noqa: E402

LLAMA = os.path.join(MODELS, 'llama2c-aidreams-260k.onnx')
ROOT = qtest.ROOT
failures = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what)
    if not ok:
        failures.append(what)


def config(work, name, weight, op_types):
    path = os.path.join(work, name + '.json')
    json.dump({'format': 'qtool-qconfig', 'version': 1, 'name': name,
               'global': {'activation': None, 'weight': weight, 'bias': None},
               'op_types': dict({'*': None}, **{op: {} for op in op_types})}, open(path, 'w'))
    return path


def quantize(work, cfg, out, data=False):
    cmd = [qtest.qtool(), 'quantize', LLAMA, '-o', out, '--config', cfg]
    if data:
        cmd += ['--data', 'input_ids=' + t('llama2c_calib32.npy')]
    return subprocess.run(cmd, capture_output=True, text=True)


def qtool_run(model, inputs, outdir):
    cmd = [qtest.qtool(), 'run', model, '-o', outdir, '--threads', '2']
    for k, v in inputs.items():
        cmd += ['-i', f'{k}={v}']
    qtest.sh(cmd)
    return {f[:-4]: np.load(os.path.join(outdir, f)) for f in os.listdir(outdir) if f.endswith('.npy')}


def ort_basic(model, inputs, outdir):
    """ORT with basic graph optimisations (no QDQ fusions)."""
    cmd = ['node', qtest.ORT_RUN, model, '--output-dir', outdir, '--opt-level', 'basic']
    for k, v in inputs.items():
        cmd += ['--input', f'{k}={v}']
    res = json.loads(qtest.sh(cmd).strip().splitlines()[-1])
    return {k: np.load(v['file']) for k, v in res['outputs'].items()}


def close(a, b, rel=1e-4):
    return float(np.abs(a - b).max()) <= rel * float(np.abs(b).max()) + 1e-5


def codes(x):
    """An integer initializer as int64 (int4: two per byte, low nibble first; onnx 1.12 has no INT4)."""
    if x.data_type != 22:
        return numpy_helper.to_array(x).astype(np.int64)
    n = int(np.prod(list(x.dims)))
    b = np.frombuffer(x.raw_data, np.uint8)
    q = np.stack([b & 15, b >> 4], 1).reshape(-1)[:n].astype(np.int64)
    return np.where(q > 7, q - 16, q).reshape(list(x.dims))


def dequantized_embedding(model_path):
    """emb.weight as DequantizeLinear computes it from the stored codes (int4: two per byte, low nibble first)."""
    m = onnx.load(model_path)
    g = m.graph
    gather = next(n for n in g.node if n.op_type == 'Gather' and n.output[0].startswith('/emb'))
    dq = next(n for n in g.node if n.output[0] == gather.input[0] and n.op_type == 'DequantizeLinear')
    inits = {i.name: i for i in g.initializer}
    x, scale = inits[dq.input[0]], numpy_helper.to_array(inits[dq.input[1]]).astype(np.float64)
    attrs = {a.name: a.i for a in dq.attribute}
    shape = list(x.dims)
    q = codes(x)
    zp = codes(inits[dq.input[2]]) if len(dq.input) > 2 and dq.input[2] else 0
    axis, block = attrs.get('axis', 1), attrs.get('block_size', 0)
    if block:
        scale = np.repeat(scale, block, axis=axis)[:, :shape[1]] if axis == 1 else np.repeat(scale, block, axis=0)
        zp = np.repeat(zp, block, axis=axis)[:, :shape[1]] if np.ndim(zp) else zp
    elif np.ndim(scale) == 1:
        scale = scale.reshape([-1, 1] if axis == 0 else [1, -1])
        zp = zp.reshape(scale.shape) if np.ndim(zp) else zp
    return ((q - zp) * scale).astype(np.float32), x.data_type, block


def main():
    ids = t('llama2c_eval32_first2.npy')
    with tempfile.TemporaryDirectory(prefix='qtool-wo-') as work:
        float_model = onnx.load(LLAMA)
        cases = {
            'gather_int4_block32': {'dtype': 'int4', 'symmetric': True, 'granularity': 'per_block', 'block_size': 32},
            'gather_int8_per_row': {'dtype': 'int8', 'symmetric': True, 'granularity': 'per_channel',
                                    'algorithm': 'clip_search'},
        }
        for name, weight in cases.items():
            out = os.path.join(work, name + '.onnx')
            r = quantize(work, config(work, name, weight, ['Gather']), out)
            check(r.returncode == 0, f'{name}: quantize without --data exits 0 ({r.stderr.strip()[-200:]})')
            if r.returncode:
                continue
            table, dtype, block = dequantized_embedding(out)
            check(dtype == (22 if 'int4' in name else 3) and block == (32 if 'int4' in name else 0),
                  f'{name}: emb.weight stored as {dtype}, block_size {block}')
            ort, _ = qtest.ort_run(out, {'input_ids': ids}, os.path.join(work, name + '_ort'))
            mine = qtool_run(out, {'input_ids': ids}, os.path.join(work, name + '_qtool'))
            check(close(ort['logits'], mine['logits']), f'{name}: ORT logits = interpreter logits')
            ref = onnx.load(LLAMA)
            for init in ref.graph.initializer:
                if init.name == 'emb.weight':
                    init.CopyFrom(numpy_helper.from_array(table, 'emb.weight'))
            ref_path = os.path.join(work, name + '_dequantized_float.onnx')
            onnx.save(ref, ref_path)
            exp, _ = qtest.ort_run(ref_path, {'input_ids': ids}, os.path.join(work, name + '_exp'))
            check(close(ort['logits'], exp['logits']),
                  f'{name}: ORT logits = float model with the dequantized table '
                  f'(max |d| {float(np.abs(ort["logits"] - exp["logits"]).max()):.2e})')
            emb = numpy_helper.to_array(next(i for i in float_model.graph.initializer if i.name == 'emb.weight'))
            print(f'     {name}: table error rms {float(np.sqrt(((table - emb) ** 2).mean())):.2e} '
                  f'(weights rms {float(np.sqrt((emb ** 2).mean())):.2e})')

        # int4 MatMul weights (RTN, no data) in ORT with all optimisations.
        out = os.path.join(work, 'matmul_int4.onnx')
        cfg = config(work, 'matmul_int4', {'dtype': 'int4', 'symmetric': True, 'granularity': 'per_block',
                                           'block_size': 32}, ['MatMul', 'Gemm'])
        r = quantize(work, cfg, out)
        check(r.returncode == 0, 'int4 MatMul, rtn: quantize without --data exits 0')
        opt = os.path.join(work, 'matmul_int4.ort_optimized.onnx')
        ort, _ = qtest.ort_run(out, {'input_ids': ids}, os.path.join(work, 'mm_ort'), optimized=opt)
        basic = ort_basic(out, {'input_ids': ids}, os.path.join(work, 'mm_ort_basic'))
        mine = qtool_run(out, {'input_ids': ids}, os.path.join(work, 'mm_qtool'))
        check(close(basic['logits'], mine['logits']), 'int4 MatMul: ORT (basic optimisations) logits = interpreter logits')
        ops = {}
        for n in onnx.load(opt).graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        # With every optimisation ORT fuses DQ -> MatMul into MatMulNBits, whose CPU kernel by default quantizes the
        # activations to int8 too (session.qdq_matmulnbits_accuracy_level 4): close, not equal.
        d = float(np.abs(ort['logits'] - mine['logits']).max())
        print(f'     ORT optimised graph: MatMulNBits {ops.get("MatMulNBits", 0)}, '
              f'DequantizeLinear {ops.get("DequantizeLinear", 0)}, MatMul {ops.get("MatMul", 0)}; '
              f'max |logit d| vs interpreter {d:.3f} (max |logit| {float(np.abs(mine["logits"]).max()):.1f})')
        check(d <= 0.05 * float(np.abs(mine['logits']).max()), 'int4 MatMul: ORT (all optimisations) logits within 5 %')

        # Double-quantized block scales: uint8 / uint4 codes -> DQ -> the weight DQ's scale.
        for bits, code_type in ((8, 2), (4, 21)):
            name = f'scale_bits{bits}'
            out = os.path.join(work, name + '.onnx')
            cfg = config(work, name, {'dtype': 'int4', 'symmetric': True, 'granularity': 'per_block', 'block_size': 32,
                                      'scale_bits': bits, 'scale_block_size': 64}, ['MatMul', 'Gemm', 'Gather'])
            r = quantize(work, cfg, out)
            check(r.returncode == 0, f'{name}: quantize exits 0 ({r.stderr.strip()[-200:]})')
            if r.returncode:
                continue
            g = onnx.load(out).graph
            inits = {i.name: i for i in g.initializer}
            dqs = [n for n in g.node if n.op_type == 'DequantizeLinear']
            weight_dqs = [n for n in dqs if inits[n.input[0]].data_type == 22]
            scale_dqs = {n.output[0]: n for n in dqs if n not in weight_dqs}
            check(len(weight_dqs) == 30 and all(n.input[1] in scale_dqs and n.input[1] not in inits
                                                for n in weight_dqs) and
                  all(inits[n.input[0]].data_type == code_type for n in scale_dqs.values()),
                  f'{name}: 30 int4 weight DQs, each scale expanded from {bits}-bit codes by a DQ')
            mine = qtool_run(out, {'input_ids': ids}, os.path.join(work, name + '_qtool'))
            for level in ('all', 'disabled'):
                ort, _ = qtest.ort_run(out, {'input_ids': ids}, os.path.join(work, f'{name}_ort_{level}'),
                                       opt_level=level)
                d = float(np.abs(ort['logits'] - mine['logits']).max())
                check(close(ort['logits'], mine['logits']),
                      f'{name}: ORT (optimisations {level}) logits = interpreter logits (max |d| {d:.1e})')

        # AWQ: the layer input scaled by a Mul, the weight's codes those of S W.
        out = os.path.join(work, 'awq.onnx')
        cfg = config(work, 'awq', {'dtype': 'int4', 'symmetric': True, 'granularity': 'per_block', 'block_size': 32,
                                   'algorithm': 'awq'}, ['MatMul', 'Gemm'])
        r = quantize(work, cfg, out, data=True)
        check(r.returncode == 0, f'awq: quantize exits 0 ({r.stderr.strip()[-200:]})')
        if r.returncode == 0:
            g = onnx.load(out).graph
            muls = [n for n in g.node if n.op_type == 'Mul' and n.name.endswith('_awq_Mul')]
            check(len(muls) == 29, f'awq: one Mul before each of the 29 quantized MatMuls ({len(muls)})')
            basic = ort_basic(out, {'input_ids': ids}, os.path.join(work, 'awq_ort_basic'))
            mine = qtool_run(out, {'input_ids': ids}, os.path.join(work, 'awq_qtool'))
            check(close(basic['logits'], mine['logits']), 'awq: ORT (basic optimisations) logits = interpreter logits')
        r = quantize(work, cfg, os.path.join(work, 'awq_nodata.onnx'))
        check(r.returncode == 2 and '--data' in r.stderr, f'awq without --data: exit {r.returncode}')

        # GPTQ needs calibration inputs.
        gptq = os.path.join(ROOT, 'configs', 'int4-weight-only.json')
        r = quantize(work, gptq, os.path.join(work, 'gptq.onnx'))
        check(r.returncode == 2 and '--data' in r.stderr, f'gptq without --data: exit {r.returncode}, '
              f'"{r.stderr.strip()[-160:]}"')
    if failures:
        print(f'{len(failures)} failed')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
