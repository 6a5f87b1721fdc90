#!/usr/bin/python3
"""Acceptance checks for `qtool quantize` on the shared real models (issue 6, "Must show").

usage: acceptance.py MODEL_KEY [--workdir DIR] [--config QCONFIG.json]
MODEL_KEY: mobilenetv2 | ocr | cls | vad | superres | digits

Each check calibrates on the real inputs of ../shared/data with `qtool calibrate`,
quantizes with qtool (default config unless --config), runs float and int8 models in ONNX Runtime 1.30 and
compares the task-level result. Prints one JSON line of measured figures; exit 1 when a check fails.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402
from qtest import MODELS, t  # noqa: E402

failures = []
figures = {}


def check(name, ok, value):
    figures[name] = value
    if not ok:
        failures.append(f'{name} = {value}')


def quantize(key, model, samples, work, config):
    calib = os.path.join(work, key + '.calib.json')
    qtest.calibrate(model, samples, calib)
    out = os.path.join(work, key + '.int8.onnx')
    # The same samples again for the accuracy guard (the ranges come from the calibration file).
    extra = ['--threads', '2'] + qtest.data_args(samples, os.path.join(work, key + '.samples'))
    summary = qtest.quantize(model, out, calib, config=config, extra=extra)
    fig = {k: summary[k] for k in ('quantized_nodes', 'float_nodes', 'weight_bytes_before', 'weight_bytes_after')}
    g = summary['accuracy_guard']
    fig['accuracy_guard'] = {'note': g['note'], 'kept_float': len(g['kept_float']),
                             'sqnr_db': {o['output']: [round(o['sqnr_db'], 1), round(o['final_sqnr_db'], 1)]
                                         for o in g['outputs']}}
    figures.setdefault('quantize', {})[os.path.basename(model)] = fig
    return out


def run(model, inputs, work, tag):
    outs, _ = qtest.ort_run(model, inputs, os.path.join(work, tag))
    return outs


def mobilenetv2(work, config):
    m = os.path.join(MODELS, 'mobilenetv2-1.0-224-fp32.onnx')
    batch = t('mobilenetv2_calib6.npy')
    q = quantize('mobilenetv2', m, [{'input': batch}], work, config)
    pf = run(m, {'input': batch}, work, 'f')['probs']
    pq = run(q, {'input': batch}, work, 'q')['probs']
    top_f, top_q = pf.argmax(1), pq.argmax(1)
    dp = np.abs(pf[np.arange(len(pf)), top_f] - pq[np.arange(len(pf)), top_f])
    check('mobilenetv2.top1_identical', bool((top_f == top_q).all()), f'{int((top_f == top_q).sum())}/{len(pf)}')
    check('mobilenetv2.mean_abs_dprob_top1', float(dp.mean()) <= 0.03, round(float(dp.mean()), 4))
    figures['mobilenetv2.max_abs_dprob_top1'] = round(float(dp.max()), 4)


def ctc_decode(probs, keys):
    out = []
    for seq in probs.argmax(-1):
        s, prev = [], 0
        for k in seq:
            if k != prev and k != 0:
                s.append(keys[k - 1] if k - 1 < len(keys) else ' ')
            prev = k
        out.append(''.join(s))
    return out


def components(mask):
    """Axis-aligned boxes [y0, x0, y1, x1, size] of 4-connected components of a boolean map."""
    h, w = mask.shape
    seen = np.zeros_like(mask, dtype=bool)
    boxes = []
    ys, xs = np.nonzero(mask)
    for y, x in zip(ys, xs):
        if seen[y, x]:
            continue
        stack = [(y, x)]
        seen[y, x] = True
        y0, x0, y1, x1, n = y, x, y, x, 0
        while stack:
            cy, cx = stack.pop()
            n += 1
            y0, x0, y1, x1 = min(y0, cy), min(x0, cx), max(y1, cy), max(x1, cx)
            for ny, nx in ((cy - 1, cx), (cy + 1, cx), (cy, cx - 1), (cy, cx + 1)):
                if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    stack.append((ny, nx))
        if n >= 16:
            boxes.append((y0, x0, y1, x1, n))
    return sorted(boxes)


def iou(a, b):
    iy = max(0, min(a[2], b[2]) - max(a[0], b[0]) + 1)
    ix = max(0, min(a[3], b[3]) - max(a[1], b[1]) + 1)
    inter = iy * ix
    area = lambda r: (r[2] - r[0] + 1) * (r[3] - r[1] + 1)  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def ocr(work, config):
    keys = open(os.path.join(qtest.SHARED, 'data', 'ocr', 'ppocr_keys_v1.txt'), encoding='utf-8').read().splitlines()
    gt = json.load(open(t('ocr_meta.json'), encoding='utf-8'))['gt']
    det = os.path.join(MODELS, 'ppocrv4-det.onnx')
    rec = os.path.join(MODELS, 'ppocrv4-rec.onnx')
    det_imgs = ['ppocrdet_ocr_rendered.npy', 'ppocrdet_ocr_en-01.npy', 'ppocrdet_ocr_cn-02.npy']
    qdet = quantize('ppocrv4-det', det, [{'x': t(f)} for f in det_imgs], work, config)
    rec_in = ['ppocrrec_rendered_line0.npy', 'ppocrrec_rendered_line1.npy', 'ppocrrec_rendered_line2.npy',
              'ppocrrec_ocr_en-01_detected_crops.npy', 'ppocrrec_ocr_cn-02_detected_crops.npy']
    qrec = quantize('ppocrv4-rec', rec, [{'x': t(f)} for f in rec_in], work, config)
    # Recognition of the three rendered lines.
    texts_f, texts_q = [], []
    for k in range(3):
        inp = {'x': t(f'ppocrrec_rendered_line{k}.npy')}
        texts_f += ctc_decode(list(run(rec, inp, work, 'rf').values())[0], keys)
        texts_q += ctc_decode(list(run(qrec, inp, work, 'rq').values())[0], keys)
    check('ocr.rec_lines_same_as_float', texts_f == texts_q, texts_q)
    check('ocr.rec_lines_ground_truth', texts_q == gt, texts_q)
    # Detection: probability maps and boxes on the rendered page.
    inp = {'x': t('ppocrdet_ocr_rendered.npy')}
    mf = list(run(det, inp, work, 'df').values())[0][0, 0]
    mq = list(run(qdet, inp, work, 'dq').values())[0][0, 0]
    agree = float(((mf > 0.3) == (mq > 0.3)).mean())
    check('ocr.det_mask_agreement', agree >= 0.99, round(agree, 5))
    figures['ocr.det_mean_abs_diff'] = round(float(np.abs(mf - mq).mean()), 5)
    bf, bq = components(mf > 0.3), components(mq > 0.3)
    big_f = [b for b in bf if b[4] >= 200]
    matched = [max((iou(b, c) for c in bq), default=0.0) for b in big_f]
    check('ocr.det_boxes', len(big_f) >= 3 and min(matched) >= 0.8,
          {'float_boxes': len(big_f), 'int8_boxes': len([b for b in bq if b[4] >= 200]),
           'min_iou': round(min(matched), 3) if matched else None})


def cls(work, config):
    m = os.path.join(MODELS, 'ppocr-mobile-v2-cls.onnx')
    ins = ['ppocrcls_rendered_line0_upright.npy', 'ppocrcls_rendered_line0_rot180.npy']
    q = quantize('ppocr-cls', m, [{'x': t(f)} for f in ins], work, config)
    res = []
    for f in ins:
        pf = list(run(m, {'x': t(f)}, work, 'cf').values())[0]
        pq = list(run(q, {'x': t(f)}, work, 'cq').values())[0]
        res.append((int(pf.argmax()), int(pq.argmax()), round(float(pq.max()), 4)))
    check('cls.orientation_unchanged', all(a == b for a, b, _ in res), res)


def vad(work, config):
    m = os.path.join(MODELS, 'silero-vad-16k-flat.onnx')
    wave = t('vad_espeak_speech_16k_full.npy')
    pf_file, batch = os.path.join(work, 'vad_f.npy'), os.path.join(work, 'vad_batch')
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', m, wave, '--out', pf_file, '--save-batch', batch])
    # One sample per streamed chunk: input [1,576] and the float model's state [2,1,128] at that chunk.
    xs, st = np.load(os.path.join(batch, 'input.npy')), np.load(os.path.join(batch, 'state.npy'))
    samples = []
    for k in range(xs.shape[0]):
        fi, fs = os.path.join(batch, f'in_{k}.npy'), os.path.join(batch, f'st_{k}.npy')
        np.save(fi, xs[k:k + 1])
        np.save(fs, np.ascontiguousarray(st[:, k:k + 1]))
        samples.append({'input': fi, 'state': fs})
    q = quantize('silero-vad', m, samples, work, config)
    pq_file = os.path.join(work, 'vad_q.npy')
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', q, wave, '--out', pq_file])
    pf, pq = np.load(pf_file), np.load(pq_file)
    d = np.abs(pf - pq)
    check('vad.max_abs_dprob_per_chunk', float(d.max()) <= 0.05, round(float(d.max()), 4))
    figures['vad.chunks'] = len(pf)
    figures['vad.speech_chunks_float_int8'] = [int((pf > 0.5).sum()), int((pq > 0.5).sum())]


def superres(work, config):
    m = os.path.join(MODELS, 'superres-espcn-3x.onnx')
    inp = {'input': t('superres_bus_lr_y.npy')}
    q = quantize('superres', m, [inp], work, config)
    yf = run(m, inp, work, 'sf')['output']
    yq = run(q, inp, work, 'sq')['output']
    psnr = 10 * np.log10(1.0 / float(((yf - yq) ** 2).mean()))
    check('superres.psnr_vs_float_db', psnr >= 35.0, round(psnr, 2))


def digits(work, config):
    m = os.path.join(MODELS, 'digits-vit.onnx')
    q = quantize('digits-vit', m, [{'pixel_values': t('digits_calib_images.npy')}], work, config)
    labels = np.load(t('digits_test_labels.npy'))
    inp = {'pixel_values': t('digits_test_images.npy')}
    af = float((run(m, inp, work, 'vf')['logits'].argmax(1) == labels).mean())
    aq = float((run(q, inp, work, 'vq')['logits'].argmax(1) == labels).mean())
    figures['digits.accuracy_float'] = round(af, 4)
    check('digits.accuracy_int8', aq >= af - 0.005, round(aq, 4))


CHECKS = {'mobilenetv2': mobilenetv2, 'ocr': ocr, 'cls': cls, 'vad': vad, 'superres': superres, 'digits': digits}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('model', choices=sorted(CHECKS))
    ap.add_argument('--workdir')
    ap.add_argument('--config')
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix='qtool-accept-')
    os.makedirs(work, exist_ok=True)
    CHECKS[a.model](work, a.config)
    print(json.dumps({'model': a.model, 'ok': not failures, 'failures': failures, 'figures': figures},
                     ensure_ascii=False))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
