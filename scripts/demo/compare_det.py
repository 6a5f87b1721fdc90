#!/usr/bin/python3
"""Compares two PP-OCR detector probability maps (.npy [N,1,H,W]), e.g. float vs int8 outputs from
ONNX Runtime, at the level a detector is used: the text boxes it yields. Boxes are the connected
components of the map above --threshold whose mean probability is at least --box-score (PP-OCR's
post-processing uses 0.3 and 0.6), as axis-aligned rectangles. Prints pixel-level differences too.

usage: compare_det.py FLOAT.npy QUANT.npy [--threshold 0.3] [--box-score 0.6] [--min-iou 0.6]
Exits 1 unless every box of each map has a partner in the other with IoU >= --min-iou.
"""
import argparse
import sys

import numpy as np


def boxes(prob, threshold, box_score, min_area=10):
    mask = prob > threshold
    seen = np.zeros_like(mask)
    h, w = mask.shape
    out = []
    for y0, x0 in zip(*np.nonzero(mask)):
        if seen[y0, x0]:
            continue
        stack, pix = [(y0, x0)], []
        seen[y0, x0] = True
        while stack:
            y, x = stack.pop()
            pix.append((y, x))
            for yy, xx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                if 0 <= yy < h and 0 <= xx < w and mask[yy, xx] and not seen[yy, xx]:
                    seen[yy, xx] = True
                    stack.append((yy, xx))
        ys, xs = np.array(pix).T
        if len(pix) >= min_area and prob[ys, xs].mean() >= box_score:
            out.append((ys.min(), xs.min(), ys.max() + 1, xs.max() + 1))
    return out


def iou(a, b):
    ih = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iw = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ih * iw
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])
    return inter / (area(a) + area(b) - inter)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("float_npy")
    ap.add_argument("quant_npy")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--box-score", type=float, default=0.6)
    ap.add_argument("--min-iou", type=float, default=0.6)
    a = ap.parse_args()
    f, q = np.load(a.float_npy), np.load(a.quant_npy)
    if f.shape != q.shape:
        sys.exit(f"compare_det: shapes differ: {f.shape} vs {q.shape}")
    d = np.abs(f - q)
    agree = ((f > a.threshold) == (q > a.threshold)).mean()
    print(f"  probability map: mean |dp| {d.mean():.4f}; pixels on the same side of {a.threshold}: {agree * 100:.1f}%")
    ok = True
    for i in range(f.shape[0]):
        bf, bq = boxes(f[i, 0], a.threshold, a.box_score), boxes(q[i, 0], a.threshold, a.box_score)
        best_f = [max((iou(x, y) for y in bq), default=0.0) for x in bf]
        best_q = [max((iou(y, x) for x in bf), default=0.0) for y in bq]
        matched = all(v >= a.min_iou for v in best_f + best_q)
        ok &= matched
        print(f"  image {i}: {len(bf)} text boxes float, {len(bq)} int8, "
              f"box IoU min {min(best_f + best_q, default=1.0):.2f}: {'same boxes' if matched else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
