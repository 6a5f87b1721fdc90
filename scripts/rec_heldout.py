#!/usr/bin/python3
"""ppocrv4-rec, int8 against float on a wide held-out set of rendered text lines (issue 12: data qtool was not tuned on).

usage: QTOOL_EXE=build/bin/qtool /usr/bin/python3 scripts/rec_heldout.py [--config QCONFIG.json] [--lines N]
           [--calib accept|new|both] [--calib-lines M] [--seed S] [--save DIR] [--json FILE] [-- QUANTIZE_ARGS...]

The acceptance check (tests/quantize/acceptance.py `rec`) scores three lines. This one draws N lines (default 160,
seed S, deterministic) in five kinds, N/5 each:
  sentence  English words with spaces, mixed capitalisation and punctuation
  numeric   dates, times, prices, phone and order numbers, units, percentages
  mixed     mixed-case codes and names (SKU aX7-Qb92, iOS 17.2, McDonald's)
  chinese   2-10 common characters of the dictionary (GB2312 level 1), some with digits, ℃/％ or CJK punctuation;
            needs a CJK font (fonts-wqy-microhei or fonts-noto-cjk); without one these lines are drawn as numeric
  long      30-46 characters, so the crop is squashed to the 320-pixel width as PaddleOCR does
in DejaVu fonts (Sans, Serif, Mono, Bold, Oblique, Condensed, ExtraLight) at 13-48 px, dark on light, light on dark
or low-contrast colours, a third of them blurred (Gaussian, radius 0.4-1.2 px) and a third with Gaussian noise
(sigma 3-9 grey levels). Each line is preprocessed as the shared crops are (data README): BGR, height 48 keeping the
aspect ratio (width <= 320, bilinear with half-pixel centres), (x/255 - 0.5)/0.5, right-padded with 0 to [3, 48, 320].

Calibration: `accept` = the acceptance split (the detected crops of ocr_en-01 and ocr_cn-02, `qtool quantize --data`
as acceptance.py runs it); `new` = M further lines drawn here from another seed (default 24), none of them scored.
Both models run in ONNX Runtime 1.30 (all optimizations). Float's reads are the reference; per calibration and per
kind it prints:
  lines = float    fraction of lines int8 decodes (greedy CTC) exactly as float does
  CER vs float     character edit distance of int8's read to float's, over float's characters
  spaces           spaces in float's reads, and how many int8 lost (or added)
  frame top-1      per CTC time step inside the text (column 8t < the crop's width): argmax(int8) = argmax(float)
  KL               mean KL(float || int8) per such step (nats); continuous, so less noisy than line counts
and float's own character error against the rendered text (how legible the set is; int8 is scored against float).
--save DIR writes the scored set (heldout_x.npy, [N,3,48,320]), the drawn calibration lines (calib_new_x.npy) and the
texts, for `qtool inspect Q --against F --data x=DIR/heldout_x.npy`. --json FILE writes every figure as one object
(with the largest and smallest float top-1 - top-2 log-probability gap among the steps int8 reads differently, and
every line int8 reads differently). Figures and what they showed: docs/accuracy.md, "ppocrv4-rec on 160 lines".
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'quantize'))
import acceptance  # noqa: E402  (ocr_keys, ctc_decode, resize, FONT_DIR: the acceptance test's own decoding)
import qtest  # noqa: E402
from qtest import MODELS, t  # noqa: E402

KINDS = ['sentence', 'numeric', 'mixed', 'chinese', 'long']
FONTS = ['DejaVuSans.ttf', 'DejaVuSerif.ttf', 'DejaVuSansMono.ttf', 'DejaVuSans-Bold.ttf', 'DejaVuSerif-Italic.ttf',
         'DejaVuSansCondensed.ttf', 'DejaVuSans-Oblique.ttf', 'DejaVuSerif-Bold.ttf', 'DejaVuSans-ExtraLight.ttf',
         'DejaVuSansMono-Bold.ttf', 'DejaVuSerifCondensed.ttf']
CJK_FONTS = ['/usr/share/fonts/truetype/wqy/wqy-microhei.ttc', '/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc',
             '/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc']
SIZES = [13, 16, 20, 24, 30, 38, 48]
WORDS = ('the of and to in is was for on are with as at be this have from or had by not but what all were when we '
         'there can an your which their said if do will each about how up out them then she many some so these would '
         'other into has more her two like him see time could no make than first been its who now people my made over '
         'did down only way find use may water long little very after words called just where most know get through '
         'back much before go good new write our used me man too any day same right look think also around another '
         'came come work three must because does part even place well such here take why help put different away '
         'again off went old number great tell men say small every found still between name should home big give air '
         'line set own under read last never us left end along while might next sound below saw something thought '
         'both few those always show large often together asked house world going want school important until form '
         'food keep children feet land side without boy once animal life enough took four head above kind began '
         'almost live page got earth need far hand high year mother light country father let night picture being '
         'study second soon story since white ever paper hard near sentence better best across during today however '
         'sure knew try told young sun thing whole hear example heard several change answer room sea against top '
         'turned learn point city play toward five himself usually money seen car morning quality model battery').split()
PUNCT_END = ['.', '!', '?', ':', ';', ',', '...', '']
MIXED = ['SKU {A}{d}{a}-{A}{a}{d}{d}', 'iOS {d}.{d}', 'McDonald\'s', 'eBay #{d}{d}{d}', 'PowerPoint {d}{d}',
         'JavaScript ES{d}', 'macOS Sonoma', 'YouTube', 'OpenCV {d}.{d}.{d}', 'Ref: {A}{A}{a}{d}{d}{A}',
         'pH {d}.{d}', 'USB-C {d}{d}W', 'GitHub {A}{a}{a}', 'IKEA Billy', 'Wi-Fi 6E', 'LaTeX', 'iPad Pro',
         'NaCl {d}{d}mg', 'ID {a}{A}{a}{A}-{d}{d}', 'DeepL', 'O\'Brien', 'MacBook Air', 'NVIDIA RTX {d}{d}{d}{d}',
         'Code {A}{a}{d}{A}{a}{d}', 'kWh {d}{d}{d}', 'x{d}Y{d}z{d}', 'TikTok', 'mRNA', 'QuantizeLinear', 'e-Mail']
NUMERIC = ['{Y}-{M}-{D}', '{D}/{M}/{Y}', '{D}.{M}.{y}', '{h}:{m}', '{h}:{m} - {h}:{m}', '${n},{d}{d}{d}.{d}{d}',
           '€ {n}.{d}{d}', '{n}.{d} kg', 'Tel +{d}{d} {d}{d} {d}{d}{d}{d}{d}{d}{d}', 'Order #{d}{d}{d}{d}{d}',
           '{n}% off', '{n} x {n} mm', 'No. {d}{d}{d}{d}', '{d}.{d}{d}{d}{d}{d}', '{n}/{n}', '({d}{d}{d}) {d}{d}{d}-{d}{d}{d}{d}',
           'Total: {n}.{d}{d}', '{n} + {n} = {n}', '-{n}.{d} C', 'v{d}.{d}{d}.{d}', '{n},{d}{d}{d} pcs',
           'Room {n}{A}, floor {n}', 'ISBN {d}{d}{d}-{d}-{d}{d}-{d}{d}{d}{d}{d}{d}-{d}', '[{n}] {n}:{n}']
CJK_PUNCT = ['，', '。', '：', '、', '（', '）', '！', '？', '《', '》']


def fill(template, r):
    out, i = [], 0
    while i < len(template):
        if template[i] == '{':
            j = template.index('}', i)
            k = template[i + 1:j]
            out.append({'A': lambda: r.choice('ABCDEFGHJKLMNPQRSTUVWXYZ'), 'a': lambda: r.choice('abcdefghjkmnpqrstuvwxyz'),
                        'd': lambda: str(r.randint(0, 9)), 'n': lambda: str(r.randint(1, 999)),
                        'Y': lambda: str(r.randint(1990, 2031)), 'y': lambda: f'{r.randint(0, 99):02d}',
                        'M': lambda: f'{r.randint(1, 12):02d}', 'D': lambda: f'{r.randint(1, 28):02d}',
                        'h': lambda: f'{r.randint(0, 23):02d}', 'm': lambda: f'{r.randint(0, 59):02d}'}[k]())
            i = j + 1
        else:
            out.append(template[i])
            i += 1
    return ''.join(out)


def case(words, r):
    style = r.choice(['sentence', 'title', 'upper', 'lower', 'sentence'])
    if style == 'title':
        return [w.capitalize() for w in words]
    if style == 'upper':
        return [w.upper() for w in words]
    if style == 'lower':
        return words
    return [words[0].capitalize()] + words[1:]


def sentence(r, lo, hi):
    words = case([r.choice(WORDS) for _ in range(r.randint(lo, hi))], r)
    if len(words) > 2 and r.random() < 0.3:  # a comma, quotes or brackets inside
        k = r.randint(0, len(words) - 2)
        words[k] += r.choice([',', ',', ';', ' -'])
    if r.random() < 0.15:
        k = r.randint(0, len(words) - 1)
        words[k] = r.choice(['"{}"', '({})', "'{}'"]).format(words[k])
    return ' '.join(words) + r.choice(PUNCT_END)


def chinese(r, common):
    s = ''.join(r.choice(common) for _ in range(r.randint(2, 8)))
    x = r.random()
    if x < 0.2:
        s += str(r.randint(1, 200)) + r.choice(['℃', '％', '', '元', '号'])
    elif x < 0.4:
        k = r.randint(1, len(s) - 1)
        s = s[:k] + r.choice(CJK_PUNCT[:4]) + s[k:] + ''.join(r.choice(common) for _ in range(r.randint(1, 3)))
    elif x < 0.5:
        s = r.choice(['第', '共']) + str(r.randint(1, 99)) + s
    return s


def text_for(kind, r, common):
    if kind == 'sentence':
        return sentence(r, 2, 5)
    if kind == 'numeric' or (kind == 'chinese' and not common):
        return fill(r.choice(NUMERIC), r)
    if kind == 'mixed':
        s = fill(r.choice(MIXED), r)
        return s if r.random() < 0.5 else s + ' ' + r.choice(WORDS)
    if kind == 'chinese':
        return chinese(r, common)
    s = sentence(r, 5, 9)  # long
    while len(s) < 30:
        s = s.rstrip('.!?:;,') + ' ' + fill(r.choice(NUMERIC), r)
    if len(s) > 46:  # cut at a word boundary
        s = s[:s.rindex(' ', 0, 47)].rstrip(',;-')
    return s


def render(text, font_path, size, scheme, distortion, r, rng):
    """One text line as the crop PaddleOCR's recognizer gets: [3, 48, 320] float32."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
    font = ImageFont.truetype(font_path, size)
    x0, y0, x1, y1 = font.getbbox(text)
    px, py = max(1, round(size * r.uniform(0.1, 0.5))), max(1, round(size * r.uniform(0.08, 0.3)))
    if scheme == 'light':
        bg = r.choice([(255, 255, 255), (244, 240, 228), (232, 232, 232), (250, 246, 210), (220, 232, 245)])
        fg = r.choice([(0, 0, 0), (30, 30, 30), (20, 40, 120), (120, 20, 20), (60, 60, 60)])
    elif scheme == 'dark':
        bg = r.choice([(15, 15, 15), (15, 30, 70), (45, 45, 45), (0, 60, 40), (90, 10, 10)])
        fg = r.choice([(255, 255, 255), (240, 240, 200), (215, 215, 215), (255, 220, 0)])
    else:  # low contrast, either polarity
        g = r.randint(120, 215)
        d = r.randint(40, 70) * r.choice([-1, 1])
        bg, fg = (g,) * 3, (max(0, min(255, g + d)),) * 3
    img = Image.new('RGB', (x1 - x0 + 2 * px, y1 - y0 + 2 * py), bg)
    ImageDraw.Draw(img).text((px - x0, py - y0), text, font=font, fill=fg)
    if distortion == 'blur':
        img = img.filter(ImageFilter.GaussianBlur(r.uniform(0.4, 1.2)))
    a = np.asarray(img, np.float32)
    if distortion == 'noise':
        a = np.clip(a + rng.normal(0, r.uniform(3, 9), a.shape), 0, 255)
    bgr = a[:, :, ::-1] / 255.0
    h, w = bgr.shape[:2]
    nw = min(320, int(math.ceil(48 * w / h)))
    out = np.zeros((3, 48, 320), np.float32)
    out[:, :, :nw] = (acceptance.resize(bgr, 48, nw).transpose(2, 0, 1) - 0.5) / 0.5
    return out, nw


def cjk_font():
    for f in CJK_FONTS:
        if os.path.exists(f):
            return f
    return None


def draw_set(n, seed, keys):
    """n lines, kinds in turn; returns (x [n,3,48,320], widths, texts, kinds, description per line)."""
    r, rng = random.Random(seed), np.random.default_rng(seed)
    cjk = cjk_font()
    common = []
    if cjk:
        for k in keys:
            try:
                b = k.encode('gb2312')
            except UnicodeEncodeError:
                continue
            if len(k) == 1 and len(b) == 2 and 0xB0 <= b[0] <= 0xD7:  # GB2312 level 1: the 3,755 common characters
                common.append(k)
    xs, widths, texts, kinds, desc = [], [], [], [], []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        text = text_for(kind, r, common)
        font = cjk if kind == 'chinese' and common else os.path.join(acceptance.FONT_DIR, r.choice(FONTS))
        size = r.choice(SIZES)
        scheme = r.choices(['light', 'dark', 'low'], [2, 1, 1])[0]
        distortion = r.choice(['none', 'blur', 'noise'])
        x, w = render(text, font, size, scheme, distortion, r, rng)
        xs.append(x)
        widths.append(w)
        texts.append(text)
        kinds.append(kind if kind != 'chinese' or common else 'numeric')
        desc.append(f'{os.path.basename(font)} {size}px {scheme} {distortion}')
    return np.stack(xs), widths, texts, kinds, desc


def edits(a, b):
    """Levenshtein distance between two strings."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def run_probs(model, x, work, tag, chunk=40):
    """ONNX Runtime on x in chunks (the [N, 40, 6625] output is 1 MB per line); yields each chunk's probabilities."""
    for s in range(0, len(x), chunk):
        path = os.path.join(work, f'{tag}_x.npy')
        np.save(path, x[s:s + chunk])
        outs, _ = qtest.ort_run(model, {'x': path}, os.path.join(work, tag))
        yield next(iter(outs.values()))


def score(fmodel, qmodel, x, widths, work, keys):
    """Per line: float read, int8 read, and per-frame arrays (agreement, KL, float margin) inside the text."""
    rows = []
    for pf, pq in zip(run_probs(fmodel, x, work, 'f'), run_probs(qmodel, x, work, 'q')):
        tf, tq = acceptance.ctc_decode(pf, keys), acceptance.ctc_decode(pq, keys)
        lf = np.log(np.maximum(pf, 1e-30))
        lq = np.log(np.maximum(pq, 1e-30))
        kl = (pf * (lf - lq)).sum(-1)
        top2 = np.sort(lf, -1)[:, :, -2:]
        margin = top2[:, :, 1] - top2[:, :, 0]
        for k in range(len(pf)):
            frames = min(pf.shape[1], math.ceil(widths[len(rows)] / 8))
            rows.append({'float': tf[k], 'int8': tq[k], 'agree': pf[k, :frames].argmax(-1) == pq[k, :frames].argmax(-1),
                         'kl': kl[k, :frames], 'margin': margin[k, :frames]})
    return rows


def summarise(rows, texts):
    n = len(rows)
    same = sum(r['float'] == r['int8'] for r in rows)
    chars = sum(len(r['float']) for r in rows)
    ed = sum(edits(r['float'], r['int8']) for r in rows)
    sp_f = sum(r['float'].count(' ') for r in rows)
    sp_q = sum(r['int8'].count(' ') for r in rows)
    sp_lost = sum(max(0, r['float'].count(' ') - r['int8'].count(' ')) for r in rows)
    agree = np.concatenate([r['agree'] for r in rows])
    kl = np.concatenate([r['kl'] for r in rows])
    flips = np.concatenate([r['margin'][~r['agree']] for r in rows])
    gt_ed = sum(edits(r['float'], g) for r, g in zip(rows, texts))
    return {'lines': n, 'lines_same': same, 'lines_same_frac': round(same / n, 4),
            'cer_vs_float': round(ed / max(1, chars), 5), 'edits': ed, 'float_chars': chars,
            'spaces_float': sp_f, 'spaces_int8': sp_q, 'spaces_lost': sp_lost,
            'frames': int(agree.size), 'frame_top1': round(float(agree.mean()), 5),
            'frame_kl_mean': float(f'{kl.mean():.4g}'), 'frame_kl_p99': float(f'{np.quantile(kl, 0.99):.4g}'),
            'flip_min_margin': round(float(flips.min()), 3) if flips.size else None,
            'flip_max_margin': round(float(flips.max()), 3) if flips.size else None,
            'float_cer_vs_text': round(gt_ed / max(1, sum(len(g) for g in texts)), 4)}


def quantize(model, x, work, config, extra):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, 'calib_x.npy')
    np.save(path, x)
    out = os.path.join(work, 'rec.int8.onnx')
    cmd = [qtest.qtool(), 'quantize', model, '-o', out, '--json', '--threads', '2', '--data', f'x={path}']
    cmd += (['--config', config] if config else []) + list(extra)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f'qtool quantize exited {r.returncode}: {r.stderr.strip().splitlines()[-1:]}')
    g = json.loads(r.stdout.strip().splitlines()[-1]).get('accuracy_guard') or {}
    return out, {'seconds': round(time.time() - t0, 1), 'kept_float': [k.get('tensor') for k in g.get('kept_float', [])]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--config', help='QConfig JSON for qtool quantize (default: the built-in default)')
    ap.add_argument('--lines', type=int, default=160)
    ap.add_argument('--calib', choices=['accept', 'new', 'both'], default='both')
    ap.add_argument('--calib-lines', type=int, default=24)
    ap.add_argument('--seed', type=int, default=2611)
    ap.add_argument('--save', help='write the drawn sets here')
    ap.add_argument('--json', help='write every figure here')
    ap.add_argument('--workdir', help='keep the models and ORT outputs here (default: a temporary folder)')
    ap.add_argument('extra', nargs='*', help='after --: more qtool quantize arguments')
    a = ap.parse_args()
    keys = acceptance.ocr_keys()
    model = os.path.join(MODELS, 'ppocrv4-rec.onnx')
    x, widths, texts, kinds, desc = draw_set(a.lines, a.seed, keys)
    xc, _, ctexts, _, _ = draw_set(a.calib_lines, a.seed + 1, keys)
    overlap = set(texts) & set(ctexts)
    if overlap:  # the two sets must stay disjoint
        keep = [i for i, c in enumerate(ctexts) if c not in overlap]
        xc, ctexts = xc[keep], [ctexts[i] for i in keep]
    if a.save:
        os.makedirs(a.save, exist_ok=True)
        np.save(os.path.join(a.save, 'heldout_x.npy'), x)
        np.save(os.path.join(a.save, 'calib_new_x.npy'), xc)
        json.dump({'texts': texts, 'kinds': kinds, 'render': desc, 'widths': widths, 'calib_texts': ctexts},
                  open(os.path.join(a.save, 'texts.json'), 'w', encoding='utf-8'), ensure_ascii=False, indent=0)
    accept = np.concatenate([np.load(t(f'ppocrrec_ocr_{n}_detected_crops.npy')) for n in ('en-01', 'cn-02')])
    calibs = {'accept': accept, 'new': xc}
    names = ['accept', 'new'] if a.calib == 'both' else [a.calib]
    result = {'seed': a.seed, 'lines': a.lines, 'cjk_font': cjk_font(), 'config': a.config, 'extra': a.extra,
              'kinds': {k: kinds.count(k) for k in KINDS}, 'calibrations': {}}
    with tempfile.TemporaryDirectory(prefix='qtool-rec-') as tmp:
        work = a.workdir or tmp
        for name in names:
            q, info = quantize(model, calibs[name], os.path.join(work, name), a.config, a.extra)
            rows = score(model, q, x, widths, os.path.join(work, name), keys)
            res = {'calibration_lines': len(calibs[name]), 'quantize': info, 'all': summarise(rows, texts),
                   'by_kind': {k: summarise([r for r, kk in zip(rows, kinds) if kk == k],
                                            [g for g, kk in zip(texts, kinds) if kk == k])
                               for k in KINDS if k in kinds},
                   'differing': [{'i': i, 'kind': kinds[i], 'render': desc[i], 'text': texts[i], 'float': r['float'],
                                  'int8': r['int8']} for i, r in enumerate(rows) if r['float'] != r['int8']]}
            result['calibrations'][name] = res
            print(f'== calibration {name} ({len(calibs[name])} lines), quantize {info["seconds"]} s, '
                  f'kept float {len(info["kept_float"])}')
            print(f'{"kind":9} {"lines=float":>12} {"CER vs float":>12} {"spaces lost/float":>18} {"frame top-1":>11} '
                  f'{"KL mean":>9} {"KL p99":>9} {"float CER":>9}')
            for k, s in list(res['by_kind'].items()) + [('all', res['all'])]:
                print(f'{k:9} {s["lines_same"]:>5}/{s["lines"]:<3} ({s["lines_same_frac"]:.3f}) {s["cer_vs_float"]:>10.4f} '
                      f'{s["spaces_lost"]:>8}/{s["spaces_float"]:<9} {s["frame_top1"]:>11.4f} {s["frame_kl_mean"]:>9.3g} '
                      f'{s["frame_kl_p99"]:>9.3g} {s["float_cer_vs_text"]:>9.4f}')
            for d in res['differing']:
                print(f'  [{d["i"]:3}] {d["kind"]:8} {d["render"]:38} float {d["float"]!r} int8 {d["int8"]!r}')
    if a.json:
        with open(a.json, 'w', encoding='utf-8') as f:
            json.dump(result, f, ensure_ascii=False, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
