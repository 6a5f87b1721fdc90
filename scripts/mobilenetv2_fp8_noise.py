#!/usr/bin/python3
"""Where FP8-full mobilenetv2 loses: per activation, FP8 E4M3 rounding noise against int8's, and what scale helps.

usage: QTOOL_EXE=build/bin/qtool scripts/mobilenetv2_fp8_noise.py CONFIG.json [--sensitivity]
Quantizes with CONFIG (accuracy guard off; calibration astronaut+bus+rocket, as mobilenetv2_heldout.py), then reads
every activation that has its own QuantizeLinear from the model with all activation Q/DQ removed (its quantized
weights kept), on the calibration photos and on the nine VAL photos of mobilenetv2_heldout.py, in ORT 1.30.
Prints per activation, on VAL:
  - SQNR of E4M3FN rounding at the model's own scale (amax / 448) and of int8 at the same calibration range
    (uint8 [0, max] / 255 for non-negative tensors, int8 amax / 127 otherwise), and their noise-power ratio;
  - the E4M3 scale with the least squared error on the calibration values (scan of f * amax / 448, f = 0.30..1.00)
    and that scale's error on VAL relative to amax's.
With --sensitivity: VAL mean KL(float || quantized) with only that activation in FP8 (weights as CONFIG makes them),
minus the KL with no activation in FP8 (ORT, optimizations disabled).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mobilenetv2_heldout as ho  # noqa: E402
from mobilenetv2_heldout import MODELS, qtest, t  # noqa: E402


def e4m3fn(x):
    """Round to the nearest E4M3FN value (ties to even), saturating at 448: QuantizeLinear with saturate=1."""
    a = np.minimum(np.abs(np.asarray(x, np.float64)), 448.0)
    step = 2.0 ** (np.maximum(np.floor(np.log2(np.maximum(a, 1e-30))), -6) - 3)  # 3 mantissa bits; subnormals 2^-9
    return np.sign(x) * np.minimum(np.round(a / step) * step, 448.0)


def activation_qs(m):
    inits = {i.name for i in m.graph.initializer}
    return [n for n in m.graph.node if n.op_type == 'QuantizeLinear' and n.input[0] not in inits]


def without_activation_qdq(src, dst, keep=(), outputs=()):
    """src with every activation Q/DQ removed except those on tensors in `keep`; `outputs` added as graph outputs."""
    m = onnx.load(src)
    qs = {n.output[0]: n for n in activation_qs(m) if n.input[0] not in keep}
    nodes = []
    for n in m.graph.node:
        if n.output[0] in qs:
            continue
        if n.op_type == 'DequantizeLinear' and n.input[0] in qs:
            n = helper.make_node('Identity', [qs[n.input[0]].input[0]], [n.output[0]])
        nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    for o in outputs:
        m.graph.output.append(helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None))
    onnx.save(m, dst)


def mean_kl(pf, pq):
    return float((pf * (np.log(np.maximum(pf, 1e-12)) - np.log(np.maximum(pq, 1e-12)))).sum(1).mean())


def main():
    cfg, sensitivity = sys.argv[1], '--sensitivity' in sys.argv[2:]
    model = os.path.join(MODELS, 'mobilenetv2-1.0-224-fp32.onnx')
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as w:
        cal, val, q = (os.path.join(w, f) for f in ('cal.npy', 'val.npy', 'q.onnx'))
        np.save(cal, np.concatenate([np.load(t(f'mobilenetv2_{n}.npy')) for n in ('astronaut', 'bus', 'rocket')]))
        np.save(val, ho.heldout())
        r = subprocess.run([qtest.qtool(), 'quantize', model, '-o', q, '--threads', '2', '--data', 'input=' + cal,
                            '--config', cfg, '--accuracy-guard', 'off'], capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr.strip())
        m = onnx.load(q)
        inits = {i.name: i for i in m.graph.initializer}
        names = [n.input[0] for n in activation_qs(m)]
        scales = {n.input[0]: float(numpy_helper.to_array(inits[n.input[1]])) for n in activation_qs(m)}
        probe = os.path.join(w, 'probe.onnx')
        without_activation_qdq(q, probe, outputs=names)
        acts = {}
        for tag, x in (('cal', cal), ('val', val)):
            acts[tag], _ = qtest.ort_run(probe, {'input': x}, os.path.join(w, 'o' + tag), opt_level='disabled')
        print(f'{"activation":40s} {"fp8 dB":>7s} {"int8 dB":>7s} {"ratio":>7s} {"best f":>6s} {"VAL err":>7s}')
        ratios, gains, nonneg = [], [], 0
        for nm in names:
            xc = acts['cal'][nm].ravel()
            xv = acts['val'][nm].ravel()
            xc = rng.choice(xc, 400000, replace=False) if xc.size > 400000 else xc
            xv = rng.choice(xv, 400000, replace=False) if xv.size > 400000 else xv
            s = scales[nm]
            amax = s * 448
            fp8_err = np.mean((e4m3fn(xv / s) * s - xv) ** 2)
            lo, hi = float(acts['cal'][nm].min()), float(acts['cal'][nm].max())
            st = hi / 255 if lo >= 0 else max(-lo, hi) / 127
            qmin, qmax = (0, 255) if lo >= 0 else (-127, 127)
            nonneg += lo >= 0
            int8_err = np.mean((np.clip(np.round(xv / st), qmin, qmax) * st - xv) ** 2)
            power = np.mean(xv ** 2)
            err = lambda x, sc: np.mean((e4m3fn(x / sc) * sc - x) ** 2)  # noqa: E731
            f = min(np.linspace(0.3, 1.0, 71), key=lambda f: err(xc, f * amax / 448))
            gain = err(xv, f * amax / 448) / fp8_err
            ratios.append(fp8_err / int8_err)
            gains.append(gain)
            print(f'{nm[-40:]:40s} {10 * np.log10(power / fp8_err):7.1f} {10 * np.log10(power / int8_err):7.1f} '
                  f'{fp8_err / int8_err:7.1f} {f:6.2f} {gain:7.3f}')
        print(f'{len(names)} activations, {nonneg} non-negative; fp8/int8 noise power: median {np.median(ratios):.1f}, '
              f'min {min(ratios):.1f}, max {max(ratios):.1f}; least-error scale on VAL: median {np.median(gains):.3f} '
              f'of amax\'s error ({min(gains):.3f}..{max(gains):.3f}), within 1 % on '
              f'{sum(abs(g - 1) <= 0.01 for g in gains)}')
        if not sensitivity:
            return
        pf, _ = qtest.ort_run(model, {'input': val}, os.path.join(w, 'f'))
        pf = pf['probs']

        def kl_of(keep):
            without_activation_qdq(q, probe, keep=keep)
            o, _ = qtest.ort_run(probe, {'input': val}, os.path.join(w, 'q'), opt_level='disabled')
            return mean_kl(pf, o['probs'])
        base = kl_of(())
        print(f'VAL KL with no activation in FP8 (weights only): {base:.4f}; with each one alone in FP8:')
        rows = sorted(((kl_of((nm,)) - base, nm) for nm in names), reverse=True)
        for d, nm in rows:
            print(f'  {d:+.4f}  {nm}')


if __name__ == '__main__':
    main()
