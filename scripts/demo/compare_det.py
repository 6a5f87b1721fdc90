#!/usr/bin/python3
"""Compares two PP-OCR detector probability maps (.npy [N,1,H,W]), e.g. float vs int8 outputs from
ONNX Runtime: prints max and mean |delta p| and the IoU of the text masks at the detector's threshold.

usage: compare_det.py FLOAT.npy QUANT.npy [--threshold 0.3] [--min-iou 0.9]
Exits 1 when the mask IoU is below --min-iou.
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("float_npy")
    ap.add_argument("quant_npy")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--min-iou", type=float, default=0.9)
    a = ap.parse_args()
    f, q = np.load(a.float_npy), np.load(a.quant_npy)
    if f.shape != q.shape:
        sys.exit(f"compare_det: shapes differ: {f.shape} vs {q.shape}")
    d = np.abs(f - q)
    mf, mq = f > a.threshold, q > a.threshold
    union = np.logical_or(mf, mq).sum()
    iou = np.logical_and(mf, mq).sum() / union if union else 1.0
    print(f"  text-probability map: max |dp| {d.max():.4f}, mean |dp| {d.mean():.5f}; "
          f"text-mask IoU at {a.threshold}: {iou:.4f} ({mf.mean()*100:.1f}% vs {mq.mean()*100:.1f}% text pixels)")
    return 0 if iou >= a.min_iou else 1


if __name__ == "__main__":
    sys.exit(main())
