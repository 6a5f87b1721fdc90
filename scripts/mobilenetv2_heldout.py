#!/usr/bin/python3
"""mobilenetv2 scored on more held-out photos than acceptance.py's three, for choices its 3-photo mean hides.

usage: QTOOL_EXE=build/bin/qtool scripts/mobilenetv2_heldout.py CONFIG.json [qtool quantize options...]
Quantizes with `--data` = astronaut+bus+rocket (issue 12's calibration split), then runs float and quantized in
ONNX Runtime 1.30 (graph optimizations disabled, as FP8 activations need) on
  EV:  chelsea, coffee, motorcycle_left (acceptance.py's scored photos) and
  VAL: nine other photos rebuilt from ../shared/data/tensors (fastestdet voc000004 and dog, ultraface faces4, faces5,
       faces44, faces2, faces_sl, ocr en-01 and cn-02), with mobilenetv2's preprocessing (short side 256, centre
       crop 224, (x - 127) * 0.00784314). None is a calibration or an EV photo.
Prints per set: mean |dp(float top-1)|, top-1 kept, mean KL(float || quantized), and |dp| per photo.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'quantize'))
import qtest  # noqa: E402
from qtest import MODELS, SHARED, t  # noqa: E402


def prep(img):
    w, h = img.size
    s = 256 / min(w, h)
    img = img.convert('RGB').resize((max(224, round(w * s)), max(224, round(h * s))), Image.BILINEAR)
    w, h = img.size
    l, u = (w - 224) // 2, (h - 224) // 2
    return ((np.asarray(img.crop((l, u, l + 224, u + 224)), dtype=np.float32) - 127) * 0.00784314)[None]


def from_chw(x, bgr, unit):
    """A model's NCHW float image back to 8-bit RGB: unit '01' = x/255, '128' = (x-127)/128."""
    a = np.clip(x * 255 if unit == '01' else x * 128 + 127, 0, 255).transpose(1, 2, 0)
    return Image.fromarray((a[:, :, ::-1] if bgr else a).astype(np.uint8))


def npz(name):
    z = np.load(t(name))
    return z[z.files[0]]


def heldout():
    imgs = [from_chw(npz(f'fastestdet_eval_{n}.npz')[0], True, '01') for n in ('voc000004', 'dog')]
    imgs += [from_chw(npz(f'ultraface_eval_{n}.npz')[0], False, '128') for n in ('faces4', 'faces5', 'faces44')]
    imgs += [from_chw(x, False, '128') for x in npz('ultraface_calib3.npz')[1:]]  # faces2, faces_sl
    imgs += [Image.open(os.path.join(SHARED, 'data', 'images', n)) for n in ('ocr_en-01.jpg', 'ocr_cn-02.jpg')]
    return np.concatenate([prep(i) for i in imgs])


def main():
    cfg, extra = sys.argv[1], sys.argv[2:]
    model = os.path.join(MODELS, 'mobilenetv2-1.0-224-fp32.onnx')
    load = lambda names: np.concatenate([np.load(t(f'mobilenetv2_{n}.npy')) for n in names])  # noqa: E731
    with tempfile.TemporaryDirectory() as w:
        cal, q = os.path.join(w, 'cal.npy'), os.path.join(w, 'q.onnx')
        np.save(cal, load(('astronaut', 'bus', 'rocket')))
        r = subprocess.run([qtest.qtool(), 'quantize', model, '-o', q, '--json', '--threads', '2', '--data',
                            'input=' + cal, '--config', cfg] + extra, capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr.strip())
        g = json.loads(r.stdout.strip().splitlines()[-1]).get('accuracy_guard') or {}
        print('guard:', g.get('note'), [k.get('tensor') for k in g.get('kept_float', [])])
        for tag, x in (('EV', load(('chelsea', 'coffee', 'motorcycle_left'))), ('VAL', heldout())):
            np.save(os.path.join(w, 'x.npy'), x)
            of, _ = qtest.ort_run(model, {'input': os.path.join(w, 'x.npy')}, os.path.join(w, 'f'))
            oq, _ = qtest.ort_run(q, {'input': os.path.join(w, 'x.npy')}, os.path.join(w, 'q'), opt_level='disabled')
            pf, pq = of['probs'], oq['probs']
            k, rows = pf.argmax(1), np.arange(len(pf))
            dp = np.abs(pf[rows, k] - pq[rows, k])
            kl = (pf * (np.log(np.maximum(pf, 1e-12)) - np.log(np.maximum(pq, 1e-12)))).sum(1)
            print(f'{tag}: mean |dp| {dp.mean():.4f}, top-1 {(pq.argmax(1) == k).sum()}/{len(k)}, '
                  f'KL {kl.mean():.4f}, |dp| per photo {np.round(dp, 3).tolist()}')


if __name__ == '__main__':
    main()
