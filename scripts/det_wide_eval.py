#!/usr/bin/python3
"""ppocrv4-det's int8 text mask on a wide held-out set: many generated text images, not the one acceptance image.

usage: det_wide_eval.py [SPEC ...] [--workdir DIR] [--per-kind N] [--seed S] [--json OUT] [--per-image]
                        [--calib-extra N]
SPEC: "default" (qtool's built-in config), a QConfig .json (quantized as tests/quantize/acceptance.py does:
calibrated on ocr_en-01 + ocr_cn-02 only, the guard on those two; --calib-extra N adds N generated images, drawn
with seed + 1000 and never scored) or an already quantized .onnx (scored as it is).
Default: "default".

The set (seeded: --seed, default 26; the same seed draws the same images on any machine with DejaVu fonts and
Pillow) has --per-kind images (default 6) of each kind, drawn at the input sizes PaddleOCR feeds det (long side
at most 960, sides multiples of 32: 480x640, 640x480, 640x640, 736x960, 960x736, 320x800):
  plain     flat background (light or dark), dark or light text
  gradient  linear two-colour gradient, mild noise
  texture   smooth random texture (paper, fabric, wall), noise
  document  a page of paragraphs in small fonts (13-22 px), JPEG quality 60-90
  photo     a shared photo (astronaut, bus, chelsea, coffee, motorcycle_left, rocket, superres_hr_crop672:
            none is det's calibration or acceptance input), cropped and resized, text drawn on it in a colour
            that contrasts with what lies under it, some with an outline
  sign      the same photos with text on plates (filled rectangles, some translucent)
  camera    any of the above, then blurred (sigma 0.6-1.5), noise (2-8 grey levels) and JPEG (quality 35-75)
Text: DejaVu Sans / Serif / Mono / Condensed in regular, bold, italic; 14-72 px (document 13-22); words, numbers,
prices, dates, Greek and Cyrillic words; a third of the lines turned by up to 12 degrees.
Preprocessing: det's (../shared/data/README.md): BGR, x/255, ImageNet mean/std, NCHW.

For each SPEC prints the acceptance image's IoU (ocr_rendered, p > 0.3, as acceptance.py), then over the set:
mean and min IoU, mean IoU per kind, the output SQNR, and where the mask loss sits: 1 - IoU = |float XOR int8| /
|float OR int8| split into
  border    XOR pixels within 3 px of the float mask's edge (inside or outside), of regions both masks have:
            a text region that grew or shrank (3 px: less than one cell of the 1/4-resolution map the head
            upsamples by 4)
  missed    whole float regions (8-connected) with no int8 pixel
  added     whole int8 regions with no float pixel
  other     the rest (holes, splits and merges, shifts of more than 3 px)
each as the mean over images of its share of the union; and the int8 - float logit log(p / (1 - p)) by float
logit band (median, 10th, 90th percentile; pixels with |float logit| >= 15 left out: float32 sigmoid saturates), to
show where on the sigmoid the error sits (the threshold 0.3 is logit -0.85). det's map is steep: most pixels sit
beyond |logit| 15 and the text edge crosses from -15 to +15 within a pixel or two, so a band's spread is an edge
moving by a pixel, and its median says which way the edges move.
Runs ONNX Runtime 1.30 through scripts/ort/ort_run.mjs (one process per input size and model).
Environment: QTOOL_EXE (default build/bin/qtool), QTOOL_SHARED_DIR.
"""
import argparse
import json
import math
import os
import random
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'quantize'))
import qtest  # noqa: E402
from qtest import MODELS, SHARED, t  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
SHAPES = [(480, 640), (640, 480), (640, 640), (736, 960), (960, 736), (320, 800)]  # (H, W)
KINDS = ['plain', 'gradient', 'texture', 'document', 'photo', 'sign', 'camera']
PHOTOS = ['astronaut.png', 'bus.jpg', 'chelsea.png', 'coffee.png', 'motorcycle_left.png', 'rocket.jpg',
          'superres_hr_crop672.png']
FONT_DIR = '/usr/share/fonts/truetype/dejavu'
FONTS = ['DejaVuSans.ttf', 'DejaVuSans-Bold.ttf', 'DejaVuSans-Oblique.ttf', 'DejaVuSerif.ttf', 'DejaVuSerif-Bold.ttf',
         'DejaVuSerif-Italic.ttf', 'DejaVuSansMono.ttf', 'DejaVuSansMono-Bold.ttf', 'DejaVuSansCondensed.ttf',
         'DejaVuSansCondensed-Bold.ttf', 'DejaVuSans-ExtraLight.ttf']
WORDS = ('total price open closed exit entrance parking invoice receipt date time station platform north south '
         'coffee tea bread milk sale discount street avenue office hours monday friday warning caution danger '
         'keep door push pull quantization detector model layer output input batch number account customer '
         'river bridge market hotel restaurant menu daily special welcome thank you please only staff private '
         'Straße Café naïve Москва улица Αθήνα οδός').split()
BORDER = 3  # px
THRESH = 0.3
OUT = 'sigmoid_0.tmp_0'
LOGIT_BANDS = [-math.inf, -6, -3, -1.5, 0, 3, 6, math.inf]


# ---------------------------------------------------------------- the set

def phrase(rng):
    k = rng.random()
    if k < 0.15:
        return f'{rng.randint(1, 999)}.{rng.randint(0, 99):02d} EUR'
    if k < 0.25:
        return f'{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1990, 2030)}'
    if k < 0.32:
        return f'+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}'
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 5))]
    if rng.random() < 0.3:
        words = [w.upper() for w in words]
    elif rng.random() < 0.4:
        words[0] = words[0].capitalize()
    return ' '.join(words)


def background(kind, rng, nrng, h, w):
    from PIL import Image
    if kind in ('photo', 'sign'):
        im = Image.open(os.path.join(SHARED, 'data', 'images', rng.choice(PHOTOS))).convert('RGB')
        # Crop a window of the target's aspect ratio (at least half the photo's short side), resize to (w, h).
        iw, ih = im.size
        scale = rng.uniform(0.5, 1.0)
        cw = int(min(iw, ih * w / h) * scale)
        ch = int(cw * h / w)
        x0, y0 = rng.randint(0, iw - cw), rng.randint(0, ih - ch)
        return np.asarray(im.crop((x0, y0, x0 + cw, y0 + ch)).resize((w, h), Image.BILINEAR)).astype(np.float32)
    dark = rng.random() < 0.25 and kind != 'document'
    base = np.array([rng.uniform(0, 70) if dark else rng.uniform(160, 255) for _ in range(3)], np.float32)
    if kind == 'plain' or kind == 'document':
        return np.broadcast_to(base, (h, w, 3)).copy()
    if kind == 'gradient':
        other = np.array([rng.uniform(0, 90) if dark else rng.uniform(130, 255) for _ in range(3)], np.float32)
        ang = rng.uniform(0, 2 * math.pi)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        u = (xx * math.cos(ang) + yy * math.sin(ang))
        u = (u - u.min()) / max(float(u.max() - u.min()), 1.0)
        v = base + (other - base) * u[..., None]
        return v + nrng.normal(0, 2, v.shape).astype(np.float32)
    # texture: low-frequency noise at two scales, upsampled bilinearly, plus fine grain
    v = np.broadcast_to(base, (h, w, 3)).copy()
    for cell, amp in ((rng.choice([64, 96, 160]), rng.uniform(10, 35)), (rng.choice([8, 12, 16]), rng.uniform(4, 12))):
        g = nrng.normal(0, 1, (h // cell + 2, w // cell + 2)).astype(np.float32)
        big = np.asarray(Image.fromarray(g).resize((w + 2 * cell, h + 2 * cell), Image.BILINEAR))[:h, :w]
        v += amp * big[..., None]
    return v + nrng.normal(0, 3, v.shape).astype(np.float32)


def ink_for(region, rng):
    """A text colour that contrasts with the mean of what lies under it."""
    lum = float(region.mean()) if region.size else 128.0
    if lum > 128:
        return tuple(rng.randint(0, 80) for _ in range(3))
    return tuple(rng.randint(190, 255) for _ in range(3))


def draw_text(canvas, text, font, ink, pos, angle, stroke=0, stroke_ink=None, plate=None):
    """Draws text (and its plate) on an RGBA layer, turns it by angle, composites it onto canvas (PIL RGB) at pos."""
    from PIL import Image, ImageDraw
    box = font.getbbox(text, stroke_width=stroke)
    tw, th = box[2] - box[0], box[3] - box[1]
    pad = max(4, th // 3)
    layer = Image.new('RGBA', (tw + 2 * pad, th + 2 * pad), (0, 0, 0, 0))
    d = ImageDraw.Draw(layer)
    if plate:
        d.rectangle((0, 0, layer.size[0] - 1, layer.size[1] - 1), fill=plate)
    d.text((pad - box[0], pad - box[1]), text, font=font, fill=ink + (255,), stroke_width=stroke,
           stroke_fill=(stroke_ink + (255,)) if stroke_ink else None)
    if angle:
        layer = layer.rotate(angle, resample=Image.BICUBIC, expand=True)
    canvas.alpha_composite(layer, pos) if canvas.mode == 'RGBA' else canvas.paste(layer, pos, layer)
    return (pos[0], pos[1], pos[0] + layer.size[0], pos[1] + layer.size[1])


def overlaps(b, boxes, gap=6):
    return any(b[0] < o[2] + gap and o[0] < b[2] + gap and b[1] < o[3] + gap and o[1] < b[3] + gap for o in boxes)


def text_image(kind, rng, nrng, h, w):
    """One image [h, w, 3] float32 RGB 0-255 of this kind."""
    from PIL import Image, ImageFilter, ImageFont
    import io
    base_kind = rng.choice(['plain', 'gradient', 'texture', 'photo', 'sign']) if kind == 'camera' else kind
    bg = np.clip(background(base_kind, rng, nrng, h, w), 0, 255)
    im = Image.fromarray(bg.astype(np.uint8))
    boxes = []
    if base_kind == 'document':
        ink = ink_for(bg, rng)
        y, x0 = rng.randint(8, 30), rng.randint(8, 40)
        while y < h - 30:
            f = ImageFont.truetype(os.path.join(FONT_DIR, rng.choice(FONTS[:9])), rng.randint(13, 22))
            line = ''
            while f.getlength(line) < rng.uniform(0.4, 0.95) * (w - 2 * x0):
                line += phrase(rng) + ' '
            draw_text(im, line.strip(), f, ink, (x0, y), 0)
            y += int(f.size * rng.uniform(1.3, 2.4)) + (rng.randint(10, 40) if rng.random() < 0.2 else 0)
    else:
        for _ in range(rng.randint(3, 9)):
            f = ImageFont.truetype(os.path.join(FONT_DIR, rng.choice(FONTS)), rng.choice([14, 18, 22, 28, 36, 48, 60, 72]))
            text = phrase(rng)
            angle = rng.uniform(-12, 12) if rng.random() < 0.33 else 0
            for _try in range(20):
                tw = int(f.getlength(text)) + 2 * f.size
                th = 2 * f.size + int(abs(math.sin(math.radians(angle))) * tw)
                if tw >= w - 4 or th >= h - 4:
                    text = text.split(' ')[0]
                    continue
                pos = (rng.randint(0, w - tw), rng.randint(0, h - th))
                if not overlaps((pos[0], pos[1], pos[0] + tw, pos[1] + th), boxes):
                    break
            else:
                continue
            region = bg[pos[1]:pos[1] + th, pos[0]:pos[0] + tw]
            plate, stroke, stroke_ink = None, 0, None
            if base_kind == 'sign':
                col = tuple(rng.randint(0, 255) for _ in range(3))
                plate = col + (rng.choice([255, 255, 200, 160]),)
                region = np.broadcast_to(np.array(col, np.float32), (1, 1, 3))
            elif base_kind == 'photo' and rng.random() < 0.4:
                stroke = max(1, f.size // 14)
                stroke_ink = ink_for(np.full((1, 1, 3), 255.0 - float(region.mean()) if region.size else 0), rng)
            boxes.append(draw_text(im, text, f, ink_for(region, rng), pos, angle, stroke, stroke_ink, plate))
    if kind == 'camera':
        im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.6, 1.5)))
        v = np.clip(np.asarray(im).astype(np.float32) + nrng.normal(0, rng.uniform(2, 8), (h, w, 3)), 0, 255)
        im = Image.fromarray(v.astype(np.uint8))
    if kind in ('camera', 'document'):
        buf = io.BytesIO()
        im.save(buf, 'JPEG', quality=rng.randint(35, 75) if kind == 'camera' else rng.randint(60, 90))
        im = Image.open(io.BytesIO(buf.getvalue())).convert('RGB')
    return np.asarray(im).astype(np.float32)


def det_input(rgb):
    """[h, w, 3] RGB 0-255 -> [3, h, w] det input (BGR, x/255, ImageNet mean/std)."""
    return ((rgb[:, :, ::-1] / 255.0 - MEAN) / STD).transpose(2, 0, 1).astype(np.float32)


def make_set(per_kind, seed):
    """[(kind, shape index, input [3,h,w])] in a fixed order."""
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    out = []
    for k, kind in enumerate(KINDS):
        for i in range(per_kind):
            s = (k + i) % len(SHAPES)
            h, w = SHAPES[s]
            out.append((kind, s, det_input(text_image(kind, rng, nrng, h, w))))
    return out


# ---------------------------------------------------------------- scoring

def components(mask):
    """8-connected components of a 2-D bool mask by runs: (labels int32 with 0 = background, count)."""
    h, w = mask.shape
    parent = []

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    rows = []
    for y in range(h):
        d = np.diff(np.concatenate(([0], mask[y].view(np.int8), [0])))
        starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        ids = list(range(len(parent), len(parent) + len(starts)))
        parent.extend(ids)
        if y and rows[-1][0].size and starts.size:
            ps, pe, pid = rows[-1]
            j = 0
            for s, e, i in zip(starts, ends, ids):
                while j < len(ps) and pe[j] < s:  # previous run ends before this one starts (8-connected: pe >= s)
                    j += 1
                k = j
                while k < len(ps) and ps[k] <= e:
                    a, b = find(i), find(pid[k])
                    if a != b:
                        parent[max(a, b)] = min(a, b)
                    k += 1
        rows.append((starts, ends, ids))
    labels = np.zeros((h, w), np.int32)
    roots = {}
    for y, (starts, ends, ids) in enumerate(rows):
        for s, e, i in zip(starts, ends, ids):
            labels[y, s:e] = roots.setdefault(find(i), len(roots) + 1)
    return labels, len(roots)


def dilate(mask, r):
    out = mask.copy()
    for d in range(1, r + 1):
        out[d:] |= mask[:-d]
        out[:-d] |= mask[d:]
    row = out.copy()
    for d in range(1, r + 1):
        out[:, d:] |= row[:, :-d]
        out[:, :-d] |= row[:, d:]
    return out


def loss_split(mf, mq):
    """Shares of |mf OR mq| lost to border / missed / added / other pixels (see the docstring)."""
    union = int((mf | mq).sum())
    if union == 0:
        return {'border': 0.0, 'missed': 0.0, 'added': 0.0, 'other': 0.0}
    lf, nf = components(mf)
    lq, nq = components(mq)
    f_hit = np.bincount(lf[mf & mq], minlength=nf + 1) > 0
    q_hit = np.bincount(lq[mf & mq], minlength=nq + 1) > 0
    missed = mf & ~f_hit[lf]
    added = mq & ~q_hit[lq]
    xor = (mf ^ mq) & ~missed & ~added
    band = dilate(mf, BORDER) & dilate(~mf, BORDER)  # within BORDER px of an edge, either side
    border = xor & band
    return {'border': border.sum() / union, 'missed': missed.sum() / union, 'added': added.sum() / union,
            'other': (xor & ~band).sum() / union}


def iou(mf, mq):
    return float((mf & mq).sum() / max(1, (mf | mq).sum()))


def logit(p):
    p = np.clip(p.astype(np.float64), 1e-12, 1 - 1e-7)
    return np.log(p / (1 - p))


# ---------------------------------------------------------------- running

def ort_outputs(model, groups, work, tag):
    """{shape index: output [n,1,h,w]} for groups {shape index: input file}."""
    return {s: qtest.ort_run(model, {'x': f}, os.path.join(work, f'{tag}_{s}'))[0][OUT] for s, f in groups.items()}


def quantize(spec, work, tag, extra=()):
    if spec.endswith('.onnx'):
        return spec
    out = os.path.join(work, f'{tag}.int8.onnx')
    cmd = [qtest.qtool(), 'quantize', os.path.join(MODELS, 'ppocrv4-det.onnx'), '-o', out, '--threads', '2']
    cmd += qtest.data_args([{'x': t('ppocrdet_ocr_en-01.npy')}, {'x': t('ppocrdet_ocr_cn-02.npy')}] +
                           [{'x': f} for f in extra], os.path.join(work, 'calib'))
    if spec != 'default':
        cmd += ['--config', spec]
    qtest.sh(cmd)
    return out


def score(items, ref, got, acc_f, acc_q, per_image):
    res = {'acceptance_iou': round(iou(acc_f > THRESH, acc_q > THRESH), 4)}
    ious, split, by_kind = [], {k: [] for k in ('border', 'missed', 'added', 'other')}, {}
    sig = err = 0.0
    lf_all, dl_all = [], []
    seen = {}
    for kind, s, _ in items:
        j = seen.get(s, 0)
        seen[s] = j + 1
        pf, pq = ref[s][j, 0], got[s][j, 0]
        mf, mq = pf > THRESH, pq > THRESH
        v = iou(mf, mq)
        ious.append(v)
        by_kind.setdefault(kind, []).append(v)
        for k, x in loss_split(mf, mq).items():
            split[k].append(x)
        sig += float((pf.astype(np.float64) ** 2).sum())
        err += float(((pf.astype(np.float64) - pq) ** 2).sum())
        lf = logit(pf)
        lf_all.append(lf.ravel())
        dl_all.append((logit(pq) - lf).ravel())
        if per_image:
            print(f'  {len(ious) - 1:3d} {kind:9s} {SHAPES[s][0]}x{SHAPES[s][1]} IoU {v:.4f} float mask '
                  f'{int(mf.sum())} px int8 {int(mq.sum())} px', flush=True)
    lf_all, dl_all = np.concatenate(lf_all), np.concatenate(dl_all)
    keep = np.abs(lf_all) < 15  # float32 sigmoid saturates beyond: no logit to compare
    bands = []
    for lo, hi in zip(LOGIT_BANDS[:-1], LOGIT_BANDS[1:]):
        sel = keep & (lf_all >= lo) & (lf_all < hi)
        d = dl_all[sel] if sel.any() else np.zeros(1)
        bands.append([lo, hi, int(sel.sum()), round(float(np.median(d)), 3), round(float(np.percentile(d, 10)), 3),
                      round(float(np.percentile(d, 90)), 3)])
    res.update({'images': len(ious), 'mean_iou': round(float(np.mean(ious)), 4), 'min_iou': round(min(ious), 4),
                'below_0.95': int(sum(v < 0.95 for v in ious)),
                'per_kind': {k: round(float(np.mean(v)), 4) for k, v in by_kind.items()},
                'loss': {k: round(float(np.mean(v)), 4) for k, v in split.items()},
                'sqnr_db': round(10 * math.log10(sig / max(err, 1e-30)), 2),
                'logit_error_by_band': bands, 'ious': [round(v, 4) for v in ious]})
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('specs', nargs='*', default=['default'])
    ap.add_argument('--workdir')
    ap.add_argument('--per-kind', type=int, default=6)
    ap.add_argument('--seed', type=int, default=26)
    ap.add_argument('--json', help='write the results (a list, one object per SPEC) here')
    ap.add_argument('--per-image', action='store_true', help='print each image\'s IoU')
    ap.add_argument('--save-images', help='write each image of the set as PNG into this folder (to look at)')
    ap.add_argument('--calib-extra', type=int, default=0,
                    help='calibrate on this many more generated images (seed + 1000, kinds in turn; none is scored)')
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix='det_wide_')
    os.makedirs(work, exist_ok=True)
    items = make_set(a.per_kind, a.seed)
    if a.save_images:
        from PIL import Image
        os.makedirs(a.save_images, exist_ok=True)
        for n, (kind, s, x) in enumerate(items):
            rgb = ((x.transpose(1, 2, 0) * STD + MEAN) * 255.0)[:, :, ::-1]
            Image.fromarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8)).save(
                os.path.join(a.save_images, f'{n:03d}_{kind}.png'))
    groups = {}
    for s in sorted({s for _, s, _ in items}):
        groups[s] = os.path.join(work, f'set_{s}.npy')
        np.save(groups[s], np.stack([x for _, si, x in items if si == s]))
    acc = {'x': t('ppocrdet_ocr_rendered.npy')}
    model = os.path.join(MODELS, 'ppocrv4-det.onnx')
    ref = ort_outputs(model, groups, work, 'float')
    acc_f = qtest.ort_run(model, acc, os.path.join(work, 'float_acc'))[0][OUT][0, 0]
    extra = []
    if a.calib_extra > 0:
        drawn = make_set(-(-a.calib_extra // len(KINDS)), a.seed + 1000)
        per = len(drawn) // len(KINDS)
        for n in range(a.calib_extra):  # kinds in turn
            path = os.path.join(work, f'calib_extra_{n}.npy')
            np.save(path, drawn[(n % len(KINDS)) * per + n // len(KINDS)][2][None])
            extra.append(path)
    results = []
    for n, spec in enumerate(a.specs):
        q = quantize(spec, work, f'q{n}', extra)
        got = ort_outputs(q, groups, work, f'q{n}')
        acc_q = qtest.ort_run(q, acc, os.path.join(work, f'q{n}_acc'))[0][OUT][0, 0]
        r = score(items, ref, got, acc_f, acc_q, a.per_image)
        r['spec'] = spec
        results.append(r)
        lo = r['loss']
        print(f'{spec}: acceptance IoU {r["acceptance_iou"]:.4f} | {r["images"]} images: mean IoU {r["mean_iou"]:.4f} '
              f'min {r["min_iou"]:.4f}, {r["below_0.95"]} below 0.95, SQNR {r["sqnr_db"]:.2f} dB | loss: border '
              f'{lo["border"]:.4f} missed {lo["missed"]:.4f} added {lo["added"]:.4f} other {lo["other"]:.4f}', flush=True)
        print('  per kind: ' + ', '.join(f'{k} {v:.4f}' for k, v in r['per_kind'].items()))
        print('  int8 - float logit by float logit band [lo, hi): pixels, median, 10th and 90th percentile: ' +
              '; '.join(f'[{b[0]:g},{b[1]:g}) {b[2]} {b[3]:+.2f} {b[4]:+.2f} {b[5]:+.2f}' for b in r['logit_error_by_band']))
    if a.json:
        json.dump(results, open(a.json, 'w'), indent=1)


if __name__ == '__main__':
    main()
