#!/usr/bin/python3
"""Summarises alternating A/B rounds (scripts/bench_ab.sh, scripts/bench_resize.sh): FILE holds one line per run,
`CASE LABEL MS`; prints per (case, label), in first-seen order, the median and minimum over the rounds, then the
rounds themselves.
usage: ab_summary.py FILE [--width N] [--digits D]   (case column width, decimals of the rounds)"""
import argparse
import collections
import statistics

ap = argparse.ArgumentParser()
ap.add_argument('file')
ap.add_argument('--width', type=int, default=22)
ap.add_argument('--digits', type=int, default=1)
args = ap.parse_args()
runs, order = collections.defaultdict(list), []
for line in open(args.file):
    case, label, ms = line.split()
    runs[(case, label)].append(float(ms))
    if (case, label) not in order:
        order.append((case, label))
for k in order:
    v = runs[k]
    print('%-*s %-10s median %9.2f  min %9.2f ms  (%s)' % (args.width, k[0], k[1], statistics.median(v), min(v),
          ' '.join('%.*f' % (args.digits, x) for x in v)))
