#!/usr/bin/python3
"""How much ppocrv4-det's out-of-sample text-mask IoU depends on the rendered image's background colour.

usage: det_background_sweep.py SPEC [SPEC ...] [--base QCONFIG.json] [--workdir DIR]
SPEC: the weight_algorithms of the base config (default configs/int8.json) to turn on, comma-separated from cle, bc, fold
(cross_layer_equalization, bias_correction, fold_scale_after_conv), or "none". Example: cle,bc cle,bc,fold

Each SPEC quantizes det as tests/quantize/acceptance.py does (calibrate on ocr_en-01 + ocr_cn-02), then scores
int8 against float in ONNX Runtime 1.30 on ocr_rendered (the acceptance input) and on copies of it whose
background is moved by DELTAS grey levels (text pixels move less, in proportion to their brightness), once exactly
as rendered and once with Gaussian noise of 3/255 added (seed 0), and on 12 other text images drawn here (DejaVu
fonts, plain backgrounds of several colours; a third of them blurred, a third with noise of 6/255). Prints per
SPEC: the acceptance IoU, then mean, min and max IoU and the pooled output SQNR of each set.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'quantize'))
import qtest  # noqa: E402
from qtest import MODELS, ROOT, t  # noqa: E402

DELTAS = [-12, -8, -5, -3, -2, -1, 1, 2, 3, 5]
MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
KEYS = {'cle': 'cross_layer_equalization', 'bc': 'bias_correction', 'fold': 'fold_scale_after_conv'}
OUT = 'sigmoid_0.tmp_0'


def variants(x, noise):
    """x [1,3,H,W] normalized BGR -> [len(DELTAS),3,H,W]: background moved by each delta (grey levels)."""
    px = (x[0] * STD + MEAN) * 255.0
    lum = px.mean(axis=0)
    w = lum / np.median(lum)  # 1 on the background (most of the image), less on darker text
    rng = np.random.default_rng(0)
    out = []
    for d in DELTAS:
        v = np.clip(px + d * w[None], 0, 255)
        if noise:
            v = v + rng.normal(0, 3, v.shape)
        out.append((v / 255.0 - MEAN) / STD)
    return np.stack(out).astype(np.float32)


def other_texts():
    """12 text images [12,3,320,800] (preprocessed as det's inputs): fonts, sizes, colours, blur and noise vary."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
    import random
    fonts = ['DejaVuSans.ttf', 'DejaVuSerif.ttf', 'DejaVuSansMono.ttf', 'DejaVuSans-Bold.ttf', 'DejaVuSerif-Italic.ttf',
             'DejaVuSansCondensed.ttf', 'DejaVuSans-Oblique.ttf', 'DejaVuSerif-Bold.ttf']
    lines = ['Invoice 2024-11 total 318.40 EUR', 'The quick brown fox jumps over', 'Quantization error is rounding',
             'Call +1 555 0100 before noon', 'ONNX Runtime int8 latency', 'Meeting room B, floor 3',
             'Pack 12 x 500 ml bottles', 'Expires 03/27 keep refrigerated', 'hello world: 3.14159 and 2.71828',
             'Section 4.2 bias correction']
    rng, noise = random.Random(7), np.random.default_rng(7)
    out = []
    for k in range(12):
        level = rng.choice([255, 250, 235, 200, 160])
        im = Image.new('RGB', (800, 320), tuple(int(level * rng.uniform(0.85, 1.0)) for _ in range(3)))
        d = ImageDraw.Draw(im)
        y = 15
        while y < 280:
            f = ImageFont.truetype('/usr/share/fonts/truetype/dejavu/' + rng.choice(fonts), rng.choice([18, 22, 28, 34, 40]))
            ink = tuple(rng.randint(0, 90) for _ in range(3)) if level > 180 else tuple(rng.randint(200, 255) for _ in range(3))
            d.text((rng.randint(10, 120), y), rng.choice(lines), font=f, fill=ink)
            y += f.size + rng.randint(10, 40)
        if k % 3 == 1:
            im = im.filter(ImageFilter.GaussianBlur(0.8))
        v = np.asarray(im).astype(np.float32)
        if k % 3 == 2:
            v = np.clip(v + noise.normal(0, 6, v.shape), 0, 255)
        out.append((v[:, :, ::-1].transpose(2, 0, 1) / 255.0 - MEAN) / STD)
    return np.stack(out).astype(np.float32)


def iou(a, b):
    a, b = a > 0.3, b > 0.3
    return float((a & b).sum() / max((a | b).sum(), 1))


def sqnr(f, q):
    return float(10 * np.log10((f ** 2).sum() / max(((f - q) ** 2).sum(), 1e-30)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('specs', nargs='+')
    ap.add_argument('--base', default=os.path.join(ROOT, 'configs', 'int8.json'))
    ap.add_argument('--workdir')
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix='det_sweep_')
    os.makedirs(work, exist_ok=True)
    model = os.path.join(MODELS, 'ppocrv4-det.onnx')
    x = np.load(t('ppocrdet_ocr_rendered.npy'))
    sets = {'rendered': x, 'background': variants(x, False), 'background+noise': variants(x, True),
            'other texts': other_texts()}
    files = {k: os.path.join(work, f'{k}.npy') for k in sets}
    for k, v in sets.items():
        np.save(files[k], v)

    def run(m, tag):
        return {k: qtest.ort_run(m, {'x': f}, os.path.join(work, f'{tag}_{k}'))[0][OUT] for k, f in files.items()}

    ref = run(model, 'float')
    base = json.load(open(a.base))
    for spec in a.specs:
        on = [] if spec == 'none' else spec.split(',')
        cfg = dict(base, weight_algorithms={KEYS[k]: True for k in on})
        cfg_path = os.path.join(work, f'{spec}.json')
        json.dump(cfg, open(cfg_path, 'w'))
        q = os.path.join(work, f'{spec}.int8.onnx')
        cmd = [qtest.qtool(), 'quantize', model, '-o', q, '--threads', '2', '--config', cfg_path]
        cmd += qtest.data_args([{'x': t('ppocrdet_ocr_en-01.npy')}, {'x': t('ppocrdet_ocr_cn-02.npy')}],
                               os.path.join(work, 'calib'))
        qtest.sh(cmd)
        got = run(q, spec)
        line = f'{spec:14s} rendered IoU {iou(ref["rendered"][0], got["rendered"][0]):.4f}'
        for k in ('background', 'background+noise', 'other texts'):
            r = [iou(ref[k][i], got[k][i]) for i in range(len(ref[k]))]
            line += f' | {k}: mean {np.mean(r):.4f} min {min(r):.4f} max {max(r):.4f} SQNR {sqnr(ref[k], got[k]):.1f} dB'
        print(line, flush=True)


if __name__ == '__main__':
    main()
