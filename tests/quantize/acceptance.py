#!/usr/bin/python3
"""Out-of-sample acceptance checks for `qtool quantize` on the eleven shared real models (issue 12).

usage: acceptance.py MODEL_KEY [--workdir DIR] [--config QCONFIG.json] [--random N [--seed S] [--shape S]]
MODEL_KEY: one of CHECKS below (mobilenetv2, det, rec, cls, vad, superres, digits, fastestdet, ultraface, cifar10,
llama2c).

Each check quantizes with `qtool quantize --data CALIBRATION` (calibration and the accuracy guard see the
calibration samples only), then runs the float and the int8 model in ONNX Runtime 1.30 on a DISJOINT set of
inputs and compares them with the task's own metric. The splits and bars are those of issue 12 ("Must show"):

  mobilenetv2  calibrate astronaut+bus+rocket; score chelsea+coffee+motorcycle_left: top-1 identical,
               mean |dp(float top-1)| <= 0.03
  det          calibrate ocr_en-01 + ocr_cn-02; score ocr_rendered: text-mask (p > 0.3) IoU vs float >= 0.95
  rec          calibrate the detected crops of en-01 / cn-02; score the three rendered lines: lines = float's
  cls          calibrate the en-01 / cn-02 crops (upright and turned 180 deg); score rendered lines (the three
               shared ones and lines drawn here with DejaVu fonts), both ways up: orientation = float's
  vad          calibrate on the silero_test stream; score the espeak stream: max |dp| per chunk <= 0.05
  superres     calibrate on astronaut + coffee (Y, 224x224, made here); score the bus crop: PSNR vs float >= 35 dB
  digits       calibrate digits_calib_images (train split); score digits_test_images: accuracy within 0.5 point
  fastestdet   calibrate fastestdet_calib4; score the three eval photos: >= 90 % of float detections matched
               (same class, IoU >= 0.5), mean |dscore| <= 0.05 over the matches
  ultraface    calibrate ultraface_calib3; score the three eval photos: the same detection bars
  cifar10      calibrate cifar10_calib50; score cifar10_eval50: top-1 agreement with float >= 98 %
  llama2c      calibrate llama2c_calib32; score llama2c_eval32 at the sampled (non-prompt) positions:
               next-token top-1 agreement with float >= 95 %, perplexity <= 1.05 x float

Where ../shared/data/README.md documents what the float model answers on the scored inputs (top-1 classes,
accuracy, detections per photo, lines read, perplexity, PSNR), the check also requires the float side to reproduce
it, so that a broken decoder or split fails instead of measuring something else.

Prints one JSON line: {"model", "ok", "failures", "metrics": [{metric, float, int8, bar, ok}], "seconds",
"figures"}; exit 1 when a bar is missed (or quantize fails), 0 otherwise. scripts/accuracy_table.py runs all.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402
from qtest import MODELS, SHARED, t  # noqa: E402

failures = []
metrics = []
RANDOM = []  # --random N [--shape S ...]: quantize arguments that replace the calibration data
figures = {}
seconds = {}


class QuantizeFailed(Exception):
    pass


def metric(name, float_value, int8_value, bar, ok):
    """One task metric: ok None = for information, no bar."""
    metrics.append({'metric': name, 'float': float_value, 'int8': int8_value, 'bar': bar, 'ok': ok})
    if ok is False:
        failures.append(f'{name}: int8 {int8_value} (float {float_value}), bar {bar}')


def instrument(what, value, expected):
    """The float side must reproduce what ../shared/data/README.md says it answers: a decoder or split that went
    wrong fails the check instead of measuring something else."""
    figures.setdefault('float_as_documented', {})[what] = value == expected
    if value != expected:
        failures.append(f'instrument: float {what} = {value}, the data README says {expected}')


def save(work, name, array):
    path = os.path.join(work, name)
    np.save(path, np.ascontiguousarray(array))
    return path


def npz(name):
    """The one array of a shared .npz tensor file."""
    z = np.load(t(name))
    return z[z.files[0]]


def quantize(model, samples, work, config):
    """qtool quantize MODEL --data CALIBRATION: calibration and the accuracy guard see these samples only."""
    key = os.path.splitext(os.path.basename(model))[0]
    out = os.path.join(work, key + '.int8.onnx')
    cmd = [qtest.qtool(), 'quantize', model, '-o', out, '--json', '--threads', '2']
    if RANDOM:  # --random: the calibration set is not used, only scoring is the same
        cmd += RANDOM
    else:
        cmd += qtest.data_args(samples, os.path.join(work, key + '.calib'))
    if config:
        cmd += ['--config', config]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds['quantize'] = round(time.time() - t0, 1)
    if r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
        raise QuantizeFailed(f'qtool quantize exited {r.returncode}: {msg[-1] if msg else ""}')
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    fig = {k: summary.get(k) for k in ('quantized_nodes', 'float_nodes')}
    g = summary.get('accuracy_guard') or {}
    if g:
        fig['guard'] = {'note': g.get('note'), 'kept_float': len(g.get('kept_float', [])),
                        'seconds': g.get('seconds'), 'evaluations': g.get('evaluations'),
                        'sqnr_db': {o['output']: [round(o['sqnr_db'], 1), round(o['final_sqnr_db'], 1)]
                                    for o in g.get('outputs', [])},
                        'worst_sample_sqnr_db': {o['output']: [round(o['worst_sample_sqnr_db'], 1),
                                                               round(o['final_worst_sample_sqnr_db'], 1)]
                                                 for o in g.get('outputs', []) if not o.get('state')}}
        top1 = {o['output']: [o['clear_top1_flips'], o['final_clear_top1_flips'], o['clear_rows']]
                for o in g.get('outputs', []) if 'clear_rows' in o}
        if top1:  # clear top-1 flips before, after, of clear rows
            fig['guard']['clear_top1'] = top1
        missed = sorted({k.get('missed_criterion', 'sqnr') for k in g.get('kept_float', [])})
        if missed:
            fig['guard']['missed'] = missed
    figures['quantize'] = fig
    return out


def run(model, inputs, work, tag):
    """ONNX Runtime 1.30, one call on {input name: array}; returns {output name: array}."""
    files = {k: save(work, f'{tag}_in_{i}.npy', v) for i, (k, v) in enumerate(inputs.items())}
    outs, _ = qtest.ort_run(model, files, os.path.join(work, tag))
    return outs


def run_rows(model, inputs, work, tag):
    """As run(), one ORT call per row of the inputs, for models that fix the batch to 1 (one node process)."""
    cmd = ['node', qtest.ORT_TOOLS, 'run-rows', model, '--output-dir', os.path.join(work, tag)]
    for i, (k, v) in enumerate(inputs.items()):
        cmd += ['--input', f'{k}={save(work, f"{tag}_in_{i}.npy", v)}']
    res = json.loads(qtest.sh(cmd).strip().splitlines()[-1])
    return {k: np.load(v['file']) for k, v in res['outputs'].items()}


def float_and_int8(fn, m, q, inputs, work):
    t0 = time.time()
    a, b = fn(m, inputs, work, 'f'), fn(q, inputs, work, 'q')
    seconds['score'] = round(time.time() - t0, 1)
    return a, b


# ---------------------------------------------------------------- classifiers

def mobilenetv2(work, config):
    m = os.path.join(MODELS, 'mobilenetv2-1.0-224-fp32.onnx')
    cal = np.concatenate([np.load(t(f'mobilenetv2_{n}.npy')) for n in ('astronaut', 'bus', 'rocket')])
    q = quantize(m, [{'input': save(work, 'calib.npy', cal)}], work, config)
    ev = np.concatenate([np.load(t(f'mobilenetv2_{n}.npy')) for n in ('chelsea', 'coffee', 'motorcycle_left')])
    of, oq = float_and_int8(run, m, q, {'input': ev}, work)
    pf, pq = of['probs'], oq['probs']
    top_f, top_q = pf.argmax(1), pq.argmax(1)
    rows = np.arange(len(pf))
    dp = np.abs(pf[rows, top_f] - pq[rows, top_f])
    same = int((top_f == top_q).sum())
    metric('top-1 same as float (3 photos)', f'{len(pf)}/{len(pf)}', f'{same}/{len(pf)}', 'all', same == len(pf))
    metric('mean |Δp(float top-1)|', 0, round(float(dp.mean()), 4), '≤ 0.03', float(dp.mean()) <= 0.03)
    instrument('top-1 classes', [int(k) for k in top_f], [282, 967, 670])  # tiger cat, espresso, motor scooter
    figures['top1_float'] = [[int(k), round(float(p), 3)] for k, p in zip(top_f, pf[rows, top_f])]
    figures['top1_int8'] = [[int(k), round(float(p), 3)] for k, p in zip(top_q, pq[rows, top_q])]


def digits(work, config):
    m = os.path.join(MODELS, 'digits-vit.onnx')
    q = quantize(m, [{'pixel_values': t('digits_calib_images.npy')}], work, config)
    labels = np.load(t('digits_test_labels.npy'))
    of, oq = float_and_int8(run, m, q, {'pixel_values': np.load(t('digits_test_images.npy'))}, work)
    af = float((of['logits'].argmax(1) == labels).mean())
    aq = float((oq['logits'].argmax(1) == labels).mean())
    instrument('test accuracy', round(af, 4), 0.975)
    metric('test accuracy (360 images)', round(af, 4), round(aq, 4), '≥ float − 0.005', aq >= af - 0.005)


def cifar10(work, config):
    m = os.path.join(MODELS, 'cifar10-resnet20.onnx')
    q = quantize(m, [{'input': t('cifar10_calib50.npz')}], work, config)
    labels = np.load(t('cifar10_eval50_labels.npy'))
    of, oq = float_and_int8(run_rows, m, q, {'input': npz('cifar10_eval50.npz')}, work)
    top_f, top_q = of['output'].argmax(1), oq['output'].argmax(1)
    agree = float((top_f == top_q).mean())
    metric('top-1 agreement with float (50 images)', 1.0, round(agree, 4), '≥ 0.98', agree >= 0.98)
    instrument('top-1 correct', int((top_f == labels).sum()), 49)
    metric('top-1 accuracy (labels)', round(float((top_f == labels).mean()), 4),
           round(float((top_q == labels).mean()), 4), '—', None)


# ---------------------------------------------------------------- OCR

def ocr_keys():
    path = os.path.join(SHARED, 'data', 'ocr', 'ppocr_keys_v1.txt')
    return open(path, encoding='utf-8').read().splitlines()


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


def det(work, config):
    m = os.path.join(MODELS, 'ppocrv4-det.onnx')
    q = quantize(m, [{'x': t('ppocrdet_ocr_en-01.npy')}, {'x': t('ppocrdet_ocr_cn-02.npy')}], work, config)
    of, oq = float_and_int8(run, m, q, {'x': np.load(t('ppocrdet_ocr_rendered.npy'))}, work)
    mf = next(iter(of.values()))[0, 0] > 0.3
    mq = next(iter(oq.values()))[0, 0] > 0.3
    iou = float((mf & mq).sum() / max(1, (mf | mq).sum()))
    metric('text-mask IoU vs float (p > 0.3)', 1.0, round(iou, 4), '≥ 0.95', iou >= 0.95)
    figures['mask_pixels_float_int8'] = [int(mf.sum()), int(mq.sum())]


def rec(work, config):
    m = os.path.join(MODELS, 'ppocrv4-rec.onnx')
    crops = np.concatenate([np.load(t(f'ppocrrec_ocr_{n}_detected_crops.npy')) for n in ('en-01', 'cn-02')])
    q = quantize(m, [{'x': save(work, 'calib.npy', crops)}], work, config)
    lines = np.concatenate([np.load(t(f'ppocrrec_rendered_line{k}.npy')) for k in range(3)])
    of, oq = float_and_int8(run, m, q, {'x': lines}, work)
    keys = ocr_keys()
    tf, tq = ctc_decode(next(iter(of.values())), keys), ctc_decode(next(iter(oq.values())), keys)
    same = sum(a == b for a, b in zip(tf, tq))
    metric('rendered lines read as float reads them', f'{len(tf)}/{len(tf)}', f'{same}/{len(tf)}', 'all',
           same == len(tf))
    gt = json.load(open(t('ocr_meta.json'), encoding='utf-8'))['gt']
    figures['lines_float'], figures['lines_int8'] = tf, tq
    instrument('lines', tf, gt)


# Lines drawn for the orientation classifier's held-out set (DejaVu ships with Debian's fonts-dejavu-core).
CLS_TEXTS = ['Invoice No. 20931', 'Total due: $1,284.50', 'quick brown fox', 'Keep away from heat',
             'Tel +49 30 1234567', 'Made in Portugal', 'SERIAL 7Q-44821-X', 'www.example.org',
             'Batch 2025/11 exp 03', 'Handle with care!']
CLS_FONTS = ['DejaVuSans.ttf', 'DejaVuSerif.ttf', 'DejaVuSansMono.ttf', 'DejaVuSans-Bold.ttf',
             'DejaVuSerif-Italic.ttf']
FONT_DIR = '/usr/share/fonts/truetype/dejavu'


def cls_input(bgr01):
    """PaddleOCR's cls preprocessing of one BGR line image in [0, 1] (H, W, 3): height 48, width
    min(ceil(48 W / H), 192) (bilinear), (x - 0.5) / 0.5, right-padded with 0 to [3, 48, 192]."""
    h, w = bgr01.shape[:2]
    nw = min(192, int(math.ceil(48 * w / h)))
    out = np.zeros((3, 48, 192), np.float32)
    out[:, :, :nw] = (resize(bgr01, 48, nw).transpose(2, 0, 1) - 0.5) / 0.5
    return out


def resize(img, nh, nw):
    """Bilinear resize of (H, W, C) with half-pixel centres (numpy only)."""
    h, w = img.shape[:2]

    def axis(n, size):
        x = np.clip((np.arange(n) + 0.5) * size / n - 0.5, 0, size - 1)
        i0 = np.floor(x).astype(int)
        return i0, np.minimum(i0 + 1, size - 1), (x - i0).astype(np.float32)
    y0, y1, fy = axis(nh, h)
    x0, x1, fx = axis(nw, w)
    rows = img[y0] * (1 - fy)[:, None, None] + img[y1] * fy[:, None, None]
    return rows[:, x0] * (1 - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]


def rec_crop_to_cls(crop):
    """A rec crop [3, 48, 320] ((x - 0.5) / 0.5, right-padded with 0) as a cls input [3, 48, 192]."""
    cols = np.nonzero(np.abs(crop).sum(axis=(0, 1)))[0]
    w = int(cols.max()) + 1 if len(cols) else 1
    return cls_input(crop[:, :, :w].transpose(1, 2, 0) * 0.5 + 0.5)


def drawn_lines():
    from PIL import Image, ImageDraw, ImageFont
    out = []
    for i, text in enumerate(CLS_TEXTS):
        font = ImageFont.truetype(os.path.join(FONT_DIR, CLS_FONTS[i % len(CLS_FONTS)]), 28 + 4 * (i % 3))
        x0, y0, x1, y1 = font.getbbox(text)
        bg = (255, 255, 255) if i % 2 == 0 else (226, 218, 196)
        img = Image.new('RGB', (x1 - x0 + 16, y1 - y0 + 14), bg)
        ImageDraw.Draw(img).text((8 - x0, 7 - y0), text, font=font, fill=(20, 20, 20) if i % 3 else (30, 40, 120))
        out.append(cls_input(np.asarray(img, np.float32)[:, :, ::-1] / 255.0))
    return out


def both_ways(crops):
    """Each crop upright (label 0) and turned by 180 degrees (label 1) as PaddleOCR sees it: the line image is
    turned, then resized and padded."""
    xs, ys = [], []
    for c in crops:
        cols = np.nonzero(np.abs(c).sum(axis=(0, 1)))[0]
        w = int(cols.max()) + 1 if len(cols) else 1
        turned = np.zeros_like(c)
        turned[:, :, :w] = c[:, ::-1, :w][:, :, ::-1]
        xs += [c, turned]
        ys += [0, 1]
    return np.stack(xs), np.array(ys)


def cls(work, config):
    m = os.path.join(MODELS, 'ppocr-mobile-v2-cls.onnx')
    photo = np.concatenate([np.load(t(f'ppocrrec_ocr_{n}_detected_crops.npy')) for n in ('en-01', 'cn-02')])
    cal, _ = both_ways([rec_crop_to_cls(c) for c in photo])
    q = quantize(m, [{'x': save(work, 'calib.npy', cal)}], work, config)
    rendered = [rec_crop_to_cls(np.load(t(f'ppocrrec_rendered_line{k}.npy'))[0]) for k in range(3)]
    ev, truth = both_ways(rendered + drawn_lines())
    of, oq = float_and_int8(run, m, q, {'x': ev}, work)
    pf, pq = next(iter(of.values())), next(iter(oq.values()))
    same = int((pf.argmax(1) == pq.argmax(1)).sum())
    metric(f'orientation same as float ({len(ev)} held-out lines)', f'{len(ev)}/{len(ev)}', f'{same}/{len(ev)}',
           'all', same == len(ev))
    metric('orientation correct', f'{int((pf.argmax(1) == truth).sum())}/{len(ev)}',
           f'{int((pq.argmax(1) == truth).sum())}/{len(ev)}', '—', None)
    figures['calibration_crops'] = len(cal)
    figures['max_abs_dprob'] = round(float(np.abs(pf - pq).max()), 4)
    figures['float_min_top_prob'] = round(float(pf.max(1).min()), 4)  # how close to the boundary the set comes


# ---------------------------------------------------------------- audio, image restoration

def vad(work, config):
    m = os.path.join(MODELS, 'silero-vad-16k-flat.onnx')
    # Calibration: the silero_test stream through the float model, states carried; one sample per chunk.
    batch = os.path.join(work, 'calib_stream')
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', m, t('vad_silero_test_first20s_16k_full.npy'),
              '--out', os.path.join(work, 'calib_p.npy'), '--save-batch', batch])
    xs, st = np.load(os.path.join(batch, 'input.npy')), np.load(os.path.join(batch, 'state.npy'))
    samples = []
    for k in range(xs.shape[0]):
        samples.append({'input': save(batch, f'in_{k}.npy', xs[k:k + 1]),
                        'state': save(batch, f'st_{k}.npy', st[:, k:k + 1])})
    q = quantize(m, samples, work, config)
    wave = t('vad_espeak_speech_16k_full.npy')
    t0 = time.time()
    pf_file, pq_file = os.path.join(work, 'vad_f.npy'), os.path.join(work, 'vad_q.npy')
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', m, wave, '--out', pf_file])
    qtest.sh(['node', qtest.ORT_TOOLS, 'vad-stream', q, wave, '--out', pq_file])
    seconds['score'] = round(time.time() - t0, 1)
    pf, pq = np.load(pf_file), np.load(pq_file)
    d = float(np.abs(pf - pq).max())
    metric(f'espeak stream max |Δp| per chunk ({len(pf)} chunks)', 0, round(d, 4), '≤ 0.05', d <= 0.05)
    figures['calibration_chunks'] = len(samples)
    figures['speech_chunks_float_int8'] = [int((pf > 0.5).sum()), int((pq > 0.5).sum())]


def superres_y(name):
    """Y channel / 255 of a centre square crop of a shared photo, bicubic to 224x224, [1, 1, 224, 224]."""
    from PIL import Image
    img = Image.open(os.path.join(SHARED, 'data', 'images', name)).convert('RGB')
    s = min(img.size)
    left, top = (img.size[0] - s) // 2, (img.size[1] - s) // 2
    img = img.crop((left, top, left + s, top + s)).resize((224, 224), Image.BICUBIC)
    y = np.asarray(img.convert('YCbCr'), np.float32)[:, :, 0] / 255.0
    return y[None, None]


def superres(work, config):
    m = os.path.join(MODELS, 'superres-espcn-3x.onnx')
    cal = np.concatenate([superres_y('astronaut.png'), superres_y('coffee.png')])
    q = quantize(m, [{'input': save(work, 'calib.npy', cal)}], work, config)
    of, oq = float_and_int8(run, m, q, {'input': np.load(t('superres_bus_lr_y.npy'))}, work)
    mse = float(((of['output'] - oq['output']) ** 2).mean())
    psnr = 10 * math.log10(1.0 / max(mse, 1e-20))
    metric('PSNR vs float on the bus crop (dB)', 'ref', round(psnr, 2), '≥ 35', psnr >= 35.0)
    from PIL import Image
    hr = Image.open(os.path.join(SHARED, 'data', 'images', 'superres_hr_crop672.png')).convert('YCbCr')
    hr = np.asarray(hr, np.float32)[:, :, 0] / 255.0
    vs_hr = [10 * math.log10(1.0 / float(((np.clip(o['output'][0, 0], 0, 1) - hr) ** 2).mean())) for o in (of, oq)]
    instrument('PSNR vs the 672x672 original (dB)', round(vs_hr[0], 2), 22.22)
    metric('PSNR vs the 672x672 original (dB)', round(vs_hr[0], 2), round(vs_hr[1], 2), '—', None)


# ---------------------------------------------------------------- detectors

def box_iou(a, b):
    """IoU of boxes a [4] and b [N, 4] (x1, y1, x2, y2)."""
    iw = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    ih = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = iw * ih
    area = lambda r: np.clip(r[..., 2] - r[..., 0], 0, None) * np.clip(r[..., 3] - r[..., 1], 0, None)  # noqa
    return inter / np.maximum(area(a) + area(b) - inter, 1e-12)


def nms(dets, thr, candidates=None):
    """Greedy NMS over all classes: dets [N, 6] = x1, y1, x2, y2, score, class; highest score first."""
    order = np.argsort(-dets[:, 4], kind='stable')
    if candidates:
        order = order[:candidates]
    keep = []
    while len(order):
        i = order[0]
        keep.append(i)
        rest = order[1:]
        order = rest[box_iou(dets[i, :4], dets[rest, :4]) <= thr]
    return dets[keep]


def fastestdet_decode(fmap):
    """FastestDet's runtime.py: fmap [85, 22, 22] -> detections [N, 6] in 352x352 input pixels."""
    c, h, w = fmap.shape
    obj, cls_p = fmap[0], fmap[5:]
    score = obj ** 0.6 * cls_p.max(0) ** 0.4
    ys, xs = np.nonzero(score > 0.65)
    if not len(ys):
        return np.zeros((0, 6))
    cx = (xs + np.tanh(fmap[1, ys, xs])) / w
    cy = (ys + np.tanh(fmap[2, ys, xs])) / h
    bw, bh = 1 / (1 + np.exp(-fmap[3, ys, xs])), 1 / (1 + np.exp(-fmap[4, ys, xs]))
    d = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2, score[ys, xs], cls_p[:, ys, xs].argmax(0)], 1)
    d[:, :4] *= 352
    return nms(d, 0.45)


def ultraface_decode(scores, boxes):
    """detect_imgs_onnx.py: face probability > 0.7, boxes in 320x240 pixels, hard NMS at IoU 0.3 (the repo keeps
    the 200 best candidates)."""
    p = scores[0, :, 1]
    keep = p > 0.7
    d = np.concatenate([boxes[0, keep] * [320, 240, 320, 240], p[keep, None], np.zeros((int(keep.sum()), 1))], 1)
    return nms(d, 0.3, candidates=200)


def match(df, dq):
    """Float detections (best first) matched one-to-one to int8 ones of the same class with IoU >= 0.5 (the
    unmatched int8 detection of highest IoU). Returns the list of (float score, int8 score)."""
    used = np.zeros(len(dq), bool)
    pairs = []
    for f in df[np.argsort(-df[:, 4], kind='stable')]:
        if not len(dq):
            break
        ious = box_iou(f[:4], dq[:, :4])
        ious[(dq[:, 5] != f[5]) | used] = -1
        j = int(ious.argmax())
        if ious[j] >= 0.5:
            used[j] = True
            pairs.append((f[4], dq[j, 4]))
    return pairs


def detection_metrics(dets_f, dets_q, names, documented):
    pairs, n_f, per = [], 0, {}
    for name, df, dq in zip(names, dets_f, dets_q):
        p = match(df, dq)
        per[name] = [len(df), len(dq), len(p)]
        pairs += p
        n_f += len(df)
    instrument('detections per photo', [len(d) for d in dets_f], documented)
    frac = len(pairs) / n_f if n_f else 0.0
    dscore = float(np.mean([abs(a - b) for a, b in pairs])) if pairs else float('inf')
    metric('float detections matched (class, IoU ≥ 0.5)', n_f, f'{len(pairs)} ({frac:.3f})', '≥ 0.90',
           n_f > 0 and frac >= 0.90)
    metric('mean |Δscore| over matches', 0, round(dscore, 4), '≤ 0.05', dscore <= 0.05)
    worst = min(per, key=lambda n: per[n][2] / max(1, per[n][0]))
    metric(f'worst photo: matched ({worst})', per[worst][0], per[worst][2], '—', None)
    figures['detections_float_int8_matched'] = per


def fastestdet(work, config):
    m = os.path.join(MODELS, 'fastestdet-coco-352.onnx')
    q = quantize(m, [{'input.1': t('fastestdet_calib4.npz')}], work, config)
    names = ['bus', 'voc000004', 'dog']
    ev = np.concatenate([npz(f'fastestdet_eval_{n}.npz') for n in names])
    of, oq = float_and_int8(run_rows, m, q, {'input.1': ev}, work)
    ff, fq = next(iter(of.values())), next(iter(oq.values()))
    detection_metrics([fastestdet_decode(x) for x in ff], [fastestdet_decode(x) for x in fq], names, [3, 6, 3])


def ultraface(work, config):
    m = os.path.join(MODELS, 'ultraface-rfb-320.onnx')
    q = quantize(m, [{'input': t('ultraface_calib3.npz')}], work, config)
    names = ['faces4', 'faces5', 'faces44']
    ev = np.concatenate([npz(f'ultraface_eval_{n}.npz') for n in names])
    of, oq = float_and_int8(run_rows, m, q, {'input': ev}, work)
    dec = lambda o: [ultraface_decode(o['scores'][k:k + 1], o['boxes'][k:k + 1]) for k in range(len(names))]  # noqa
    detection_metrics(dec(of), dec(oq), names, [4, 5, 44])


# ---------------------------------------------------------------- language model

LLAMA2C_EVAL_PROMPTS = ['I remember', 'Once upon a time', 'Gradients', 'At night']  # 8 rows each


def llama2c_encode(text, tok_file):
    """The llama2.c tokenizer (data README): BOS, ' ', UTF-8 characters (byte tokens id = byte + 3 when unknown),
    then repeatedly merge the adjacent pair whose concatenation is the token of highest score."""
    b = open(tok_file, 'rb').read()
    off, vocab, scores = 4, [], []
    for _ in range(512):
        sc, n = struct.unpack_from('<fi', b, off)
        vocab.append(b[off + 8:off + 8 + n])
        scores.append(sc)
        off += 8 + n
    idx = {v: i for i, v in enumerate(vocab)}
    toks = [idx[b' ']]
    for ch in text:
        c = ch.encode('utf-8')
        toks += [idx[c]] if c in idx else [x + 3 for x in c]
    while True:
        best = None
        for i in range(len(toks) - 1):
            j = idx.get(vocab[toks[i]] + vocab[toks[i + 1]])
            if j is not None and (best is None or scores[j] > best[0]):
                best = (scores[j], j, i)
        if best is None:
            return [1] + toks
        toks[best[2]:best[2] + 2] = [best[1]]


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def llama2c(work, config):
    m = os.path.join(MODELS, 'llama2c-aidreams-260k.onnx')
    q = quantize(m, [{'input_ids': t('llama2c_calib32.npy')}], work, config)
    ids = np.load(t('llama2c_eval32.npy'))
    # Positions whose next token was sampled (not part of the prompt): logits at i predict token i + 1.
    mask = np.zeros(ids.shape, bool)
    tok = os.path.join(MODELS, 'llama2c-aidreams-260k.tok512.bin')
    for p, prompt in enumerate(LLAMA2C_EVAL_PROMPTS):
        n = len(llama2c_encode(prompt, tok))
        rows = slice(8 * p, 8 * p + 8)
        if not (ids[rows, :n] == llama2c_encode(prompt, tok)).all():
            raise SystemExit(f'llama2c_eval32 rows {8 * p}..{8 * p + 7} do not start with the prompt "{prompt}"')
        mask[rows, n - 1:ids.shape[1] - 1] = True
    of, oq = float_and_int8(run, m, q, {'input_ids': ids}, work)
    lf, lq = of['logits'][mask], oq['logits'][mask]
    nxt = np.roll(ids, -1, axis=1)[mask]
    agree = float((lf.argmax(-1) == lq.argmax(-1)).mean())
    rows = np.arange(len(nxt))
    ppl_f = math.exp(-float(log_softmax(lf.astype(np.float64))[rows, nxt].mean()))
    ppl_q = math.exp(-float(log_softmax(lq.astype(np.float64))[rows, nxt].mean()))
    instrument('scored positions, perplexity', [len(nxt), round(ppl_f, 2)], [3824, 5.64])
    metric(f'next-token top-1 agreement with float ({len(nxt)} positions)', 1.0, round(agree, 4), '≥ 0.95',
           agree >= 0.95)
    metric('perplexity of the sampled tokens', round(ppl_f, 3), round(ppl_q, 3),
           f'≤ 1.05 × float = {1.05 * ppl_f:.3f}', ppl_q <= 1.05 * ppl_f)


CHECKS = {'mobilenetv2': mobilenetv2, 'det': det, 'rec': rec, 'cls': cls, 'vad': vad, 'superres': superres,
          'digits': digits, 'fastestdet': fastestdet, 'ultraface': ultraface, 'cifar10': cifar10,
          'llama2c': llama2c}
MODEL_FILES = {'mobilenetv2': 'mobilenetv2-1.0-224-fp32', 'det': 'ppocrv4-det', 'rec': 'ppocrv4-rec',
               'cls': 'ppocr-mobile-v2-cls', 'vad': 'silero-vad-16k-flat', 'superres': 'superres-espcn-3x',
               'digits': 'digits-vit', 'fastestdet': 'fastestdet-coco-352', 'ultraface': 'ultraface-rfb-320',
               'cifar10': 'cifar10-resnet20', 'llama2c': 'llama2c-aidreams-260k'}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('model', choices=list(CHECKS))
    ap.add_argument('--workdir', help='keep the intermediate files here (default: a temporary folder, removed)')
    ap.add_argument('--config', help='QConfig JSON for qtool quantize (default: the built-in default)')
    ap.add_argument('--random', type=int, metavar='N',
                    help='quantize --random N instead of --data CALIBRATION (what a user without data gets; scored '
                         'on the same evaluation set)')
    ap.add_argument('--shape', action='append', default=[], help='--shape for --random (repeatable)')
    ap.add_argument('--seed', type=int, default=0, help='--seed for --random')
    a = ap.parse_args()
    if a.random:
        RANDOM.extend(['--random', str(a.random), '--seed', str(a.seed)] + [x for s in a.shape for x in ('--shape', s)])
    # A config whose target is not ONNX Runtime's CPU provider (FP8 activations for TensorRT) is scored in ORT with
    # graph optimizations disabled: ORT runs its Q/DQ as written but cannot fuse them (qconfig.h, Target).
    target = 'ort-cpu'
    if a.config:
        with open(a.config) as f:
            target = json.load(f).get('target', 'ort-cpu')
    if target != 'ort-cpu':
        os.environ['QTOOL_ORT_OPT_LEVEL'] = 'disabled'
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix='qtool-accept-') as tmp:
        work = a.workdir or tmp
        os.makedirs(work, exist_ok=True)
        try:
            CHECKS[a.model](work, a.config)
        except QuantizeFailed as e:
            failures.append(str(e))
    seconds['total'] = round(time.time() - t0, 1)
    print(json.dumps({'model': a.model, 'file': MODEL_FILES[a.model], 'ok': not failures, 'failures': failures,
                      'ort_opt_level': os.environ.get('QTOOL_ORT_OPT_LEVEL', 'all'), 'metrics': metrics,
                      'seconds': seconds, 'figures': figures}, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
