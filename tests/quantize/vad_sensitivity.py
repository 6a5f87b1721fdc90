#!/usr/bin/env python3
"""Usage: vad_sensitivity.py [TENSOR ...]   (Debian's /usr/bin/python3; needs scripts/ort)

Diagnostic for the silero VAD acceptance check (not a CTest test): inserts ONE QuantizeLinear/DequantizeLinear
pair (uint8, then uint16) on one tensor of the FLOAT model, with that tensor's min/max over the espeak stream
(the range calibration gives it), streams the espeak speech as acceptance.py does and prints max |dp| per chunk
against the float model. Everything else stays float, so the figure is a lower bound for any quantizer that
quantizes that tensor linearly. Prints one JSON line {tensor: {"uint8": dp, "uint16": dp}}.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

MODEL = os.path.join(qtest.MODELS, 'silero-vad-16k-flat.onnx')
WAVE = qtest.t('vad_espeak_speech_16k_full.npy')
DEFAULT = ['unsqueeze', 'conv1d', 'sqrt', 'relu', 'relu_1', 'relu_2', 'relu_3', 'select_1', 'select_2',
           'linear_1', 'add_177', 'mul_182']


def stream(model, out):
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', model, WAVE, '--out', out])
    return np.load(out)


def ranges(work, names):
    """min/max of each tensor over the stream's chunks, each chunk with the float model's state."""
    batch = os.path.join(work, 'batch')
    stream(MODEL, os.path.join(work, 'pf.npy'))
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', MODEL, WAVE, '--out', os.path.join(work, 'pf2.npy'),
              '--save-batch', batch])
    m = onnx.load(MODEL)
    for n in names:
        m.graph.output.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, None))
    p = os.path.join(work, 'probe.onnx')
    onnx.save(m, p)
    outs, _ = qtest.ort_run(p, {'input': os.path.join(batch, 'input.npy'), 'state': os.path.join(batch, 'state.npy')},
                            os.path.join(work, 'probe'))
    return {n: (min(float(outs[n].min()), 0.0), max(float(outs[n].max()), 0.0)) for n in names}


def with_qdq(tensor, lo, hi, bits, path):
    m = onnx.load(MODEL)
    qmax = 2**bits - 1
    scale = (hi - lo) / qmax
    zp = int(round(-lo / scale))
    m.graph.initializer.extend([numpy_helper.from_array(np.array(scale, np.float32), 'probe_scale'),
                                helper.make_tensor('probe_zp', TensorProto.UINT8 if bits == 8 else TensorProto.UINT16,
                                                   [], [zp])])
    for n in m.graph.node:
        for k, i in enumerate(n.input):
            if i == tensor:
                n.input[k] = tensor + '_probe_dq'
    at = [k for k, n in enumerate(m.graph.node) if tensor in n.output]
    at = at[0] + 1 if at else 0  # a graph input: at the front
    m.graph.node.insert(at, helper.make_node('DequantizeLinear', [tensor + '_probe_q', 'probe_scale', 'probe_zp'],
                                             [tensor + '_probe_dq']))
    m.graph.node.insert(at, helper.make_node('QuantizeLinear', [tensor, 'probe_scale', 'probe_zp'],
                                             [tensor + '_probe_q']))
    for o in m.opset_import:
        if o.domain in ('', 'ai.onnx'):
            o.version = max(o.version, 21)  # uint16 Q/DQ
    onnx.save(m, path)


def main():
    names = sys.argv[1:] or DEFAULT
    with tempfile.TemporaryDirectory() as work:
        rg = ranges(work, names)
        pf = np.load(os.path.join(work, 'pf.npy'))
        res = {}
        for n in names:
            res[n] = {}
            for bits in (8, 16):
                p = os.path.join(work, f'{n}_{bits}.onnx')
                with_qdq(n, *rg[n], bits, p)
                res[n][f'uint{bits}'] = round(float(np.abs(stream(p, p + '.npy') - pf).max()), 4)
    print(json.dumps(res))


if __name__ == '__main__':
    main()
