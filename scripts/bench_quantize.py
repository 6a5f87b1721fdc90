#!/usr/bin/python3
"""Benchmark of `qtool quantize` outputs in ONNX Runtime 1.30 (run through scripts/bench_quantize.sh).

Per model: calibrate on the shared real inputs, quantize with the default config, then run fp32 and int8 in
ONNX Runtime with the same thread count (in one process, runs alternating; median ms and median per-pair
ratio of --repeat runs) and count, in ORT's optimized int8 graph,
how many Conv/MatMul/Gemm became integer kernels. The CPU-time ratio (median of the per-pair ratios of the process's
CPU time during each run, ort_run.mjs) is the figure to compare on a loaded machine: with 1 thread a preempted run
grows on the wall clock, not in CPU time. Also compares qtool's mobilenetv2 int8 with the vendor's
int8 model on agreement with the float model. Prints a table and one JSON line at the end."""
import argparse
import json
import os
import sys
import tempfile
from collections import Counter

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'quantize'))
import qtest  # noqa: E402
from qtest import t  # noqa: E402

INT_KERNELS = {'QLinearConv', 'QLinearMatMul', 'MatMulInteger', 'ConvInteger', 'QGemm', 'MatMulIntegerToFloat',
               'DynamicQuantizeMatMul', 'QLinearConvTranspose', 'MatMulNBits'}
FLOAT_KERNELS = {'Conv', 'MatMul', 'Gemm', 'FusedConv', 'FusedMatMul', 'FusedGemm', 'ConvTranspose', 'NhwcFusedConv',
                 'ConvTransposeWithDynamicPads'}

# mobilenetv2 and ppocrv4-det (the two models with a latency bar in issue 12) calibrate on their acceptance split
# (tests/quantize/acceptance.py), so the model timed is the model whose accuracy the acceptance test scores; the
# timed input only sets the shapes (det keeps en-01, 640x960, as in the earlier figures).
MODELS = {
    'mobilenetv2-1.0-224-fp32': ([{'input': t(f'mobilenetv2_{p}.npy')} for p in ('astronaut', 'bus', 'rocket')],
                                 {'input': t('mobilenetv2_chelsea.npy')}),
    'ppocrv4-det': ([{'x': t(f)} for f in ('ppocrdet_ocr_en-01.npy', 'ppocrdet_ocr_cn-02.npy')],
                    {'x': t('ppocrdet_ocr_en-01.npy')}),
    'ppocrv4-rec': ([{'x': t(f'ppocrrec_rendered_line{k}.npy')} for k in range(3)],
                    {'x': t('ppocrrec_rendered_line0.npy')}),
    'ppocr-mobile-v2-cls': ([{'x': t('ppocrcls_rendered_line0_upright.npy')},
                             {'x': t('ppocrcls_rendered_line0_rot180.npy')}],
                            {'x': t('ppocrcls_rendered_line0_upright.npy')}),
    'superres-espcn-3x': ([{'input': t('superres_bus_lr_y.npy')}], {'input': t('superres_bus_lr_y.npy')}),
    'digits-vit': ([{'pixel_values': t('digits_calib_images.npy')}], {'pixel_values': t('digits_test64.npy')}),
    'silero-vad-16k-flat': ([{'input': t('vad_chunk576_speech.npy'), 'state': t('vad_state_zeros.npy')},
                             {'input': t('vad_chunk576_silence.npy'), 'state': t('vad_state_zeros.npy')}],
                            {'input': t('vad_chunk576_speech.npy'), 'state': t('vad_state_zeros.npy')}),
}

# The four models added for issue 12 read .npz tensors (one array each): unpacked to .npy on first use.
NPZ_MODELS = {
    'fastestdet-coco-352': ('input.1', 'fastestdet_calib4.npz', 'fastestdet_eval_bus.npz'),
    'ultraface-rfb-320': ('input', 'ultraface_calib3.npz', 'ultraface_eval_faces4.npz'),
    'cifar10-resnet20': ('input', 'cifar10_calib50.npz', 'cifar10_eval50.npz'),
}


def npz_to_npy(path, work, first=None):
    z = np.load(path)
    a = z[z.files[0]]
    out = os.path.join(work, os.path.basename(path)[:-4] + ('_first.npy' if first else '.npy'))
    np.save(out, a[:first] if first else a)
    return out


def add_npz_models(work):
    for name, (inp, calib, timed) in NPZ_MODELS.items():
        MODELS[name] = ([{inp: npz_to_npy(t(calib), work)}], {inp: npz_to_npy(t(timed), work, first=1)})
    first = os.path.join(work, 'llama2c_eval1.npy')
    np.save(first, np.load(t('llama2c_eval32.npy'))[:1])
    MODELS['llama2c-aidreams-260k'] = ([{'input_ids': t('llama2c_calib32.npy')}], {'input_ids': first})


def kernel_share(optimized):
    ops = Counter(n.op_type for n in onnx.load(optimized).graph.node)
    ints = sum(v for k, v in ops.items() if k in INT_KERNELS)
    floats = sum(v for k, v in ops.items() if k in FLOAT_KERNELS)
    return ints, floats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--repeat', type=int, default=40, help='timed runs of each model (alternating fp32, int8)')
    ap.add_argument('--models', default=','.join(list(MODELS) + list(NPZ_MODELS) + ['llama2c-aidreams-260k']))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix='qtool-bench-')
    add_npz_models(work)
    rows = {}
    print(f'{"model":28s} {"fp32 ms":>9s} {"int8 ms":>9s} {"ratio":>6s} {"int kernels":>12s}  (ORT 1.30, '
          f'{a.threads} thread(s), {a.repeat} alternating runs each; ratio = median of the per-pair ratios)')
    for name in a.models.split(','):
        calib_samples, bench_in = MODELS[name]
        src = os.path.join(qtest.MODELS, name + '.onnx')
        q = os.path.join(work, name + '.int8.onnx')
        # `qtool quantize --data`, the default pipeline: calibration runs inside quantize, after the equalizations
        # (a --calib table from `qtool calibrate` describes the unequalized model, so quantize would skip them),
        # and the accuracy guard sees the same samples.
        qtest.sh([qtest.qtool(), 'quantize', src, '-o', q, '--json'] +
                 qtest.data_args(calib_samples, os.path.join(work, name + '.samples')))
        # fp32 and int8 run in one process, their runs alternating, and the ratio is the median of the per-pair
        # ratios: on a shared machine the load drifts over seconds, and separate processes (or blocks of runs)
        # see different loads (mobilenetv2 gave 0.55-0.84 that way for the same two files).
        opt = os.path.join(work, name + '.int8.ort.onnx')
        qtest.ort_run(q, bench_in, os.path.join(work, 'q'), threads=a.threads, optimized=opt)
        ints, floats = kernel_share(opt)
        _, r = qtest.ort_run(src, bench_in, os.path.join(work, 'f'), threads=a.threads, repeat=a.repeat, against=q)
        lf, lq, ratio = r['latency_ms']['median'], r['latency_b_ms']['median'], r['ratio']
        mf, mq = r['latency_ms']['min'], r['latency_b_ms']['min']
        share = ints / max(1, ints + floats)
        rows[name] = {'fp32_ms': round(lf, 3), 'int8_ms': round(lq, 3), 'ratio': round(ratio, 3),
                      'ratio_of_min': round(mq / mf, 3), 'cpu_ratio': round(r['cpu_ratio'], 3),
                      'fp32_cpu_ms': round(r['cpu_ms']['median'], 3), 'int8_cpu_ms': round(r['cpu_b_ms']['median'], 3),
                      'int_kernels': ints, 'float_kernels': floats, 'int_share': round(share, 3)}
        print(f'{name:28s} {lf:9.2f} {lq:9.2f} {ratio:6.2f} {ints:5d}/{ints + floats:<5d} {100 * share:5.1f}%'
              f'   (ratio of fastest runs {mq / mf:.2f}, of CPU times {r["cpu_ratio"]:.2f})')

    # qtool int8 vs the vendor's int8 mobilenetv2, both against the float model, on the six photos.
    if 'mobilenetv2-1.0-224-fp32' in rows:
        src = os.path.join(qtest.MODELS, 'mobilenetv2-1.0-224-fp32.onnx')
        vendor = os.path.join(qtest.MODELS, 'extra', 'mobilenetv2-1.0-224-int8-qdq-st.onnx')
        ours = os.path.join(work, 'mobilenetv2-1.0-224-fp32.int8.onnx')
        pf = qtest.ort_run(src, {'input': t('mobilenetv2_calib6.npy')}, os.path.join(work, 'vf'))[0]['probs']
        pq = qtest.ort_run(ours, {'input': t('mobilenetv2_calib6.npy')}, os.path.join(work, 'vq'))[0]['probs']
        x = np.load(t('mobilenetv2_calib6.npy'))
        u8 = np.clip(np.round(x / 0.00784314 + 127), 0, 255).astype(np.uint8)  # undo (x - 127) * 0.00784314
        np.save(os.path.join(work, 'u8.npy'), u8)
        vin = onnx.load(vendor).graph.input[0].name
        pv = list(qtest.ort_run(vendor, {vin: os.path.join(work, 'u8.npy')}, os.path.join(work, 'vv'))[0].values())[0]
        top = pf.argmax(1)
        idx = np.arange(len(top))
        cmp = {}
        for tag, p in (('qtool', pq), ('vendor', pv)):
            cmp[tag] = {'top1_agree': f'{int((p.argmax(1) == top).sum())}/{len(top)}',
                        'mean_abs_dprob_top1': round(float(np.abs(p[idx, top] - pf[idx, top]).mean()), 4),
                        'max_abs_dprob': round(float(np.abs(p - pf).max()), 4)}
            print(f'mobilenetv2 {tag:6s} int8 vs float: top-1 {cmp[tag]["top1_agree"]}, mean |dp(top-1)| '
                  f'{cmp[tag]["mean_abs_dprob_top1"]}, max |dp| {cmp[tag]["max_abs_dprob"]}')
        rows['mobilenetv2_vs_vendor'] = cmp
    print(json.dumps(rows))


if __name__ == '__main__':
    main()
