#!/usr/bin/python3
"""Own Conv kernels against oneDNN, per shape class, on a model's real Conv nodes.

usage: scripts/bench/conv_classes.py NODES.json --own BUILD --dnnl BUILD [--threads T] [--rounds R] [--repeat N]

NODES.json comes from scripts/bench/compute_nodes.py. --own is a build configured with -DQTOOL_DNNL=OFF (every Conv
on conv.cc's kernels), --dnnl the default build (2-D Convs with constant weights on oneDNN); both need the target
bench_kernels. The two run alternately, R rounds; each round sums, per class, the per-node minimum of N runs that
bench_kernels prints (--per-node 1: kernels created once, activations not fused; the minimum, because on a shared,
loaded machine the medians of one node moved by 2x between rounds). Classes follow conv.cc's paths:
depthwise (one input channel per group), pointwise (1x1 kernel), general (the rest: im2col + sgemm).
Prints per class the median over rounds of each sum and the median of the per-round ratios oneDNN/own.
"""
import argparse
import ast
import collections
import re
import statistics
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument('nodes')
ap.add_argument('--own', required=True)
ap.add_argument('--dnnl', required=True)
ap.add_argument('--threads', default='1')
ap.add_argument('--rounds', type=int, default=5)
ap.add_argument('--repeat', default='10')
args = ap.parse_args()

# "   1.894 ms (min    1.498)  Conv   NAME [X shape] [W shape] ..."
line = re.compile(r'^\s*[\d.]+ ms \(min\s+([\d.]+)\)\s+Conv\s+\S+\s+(\[[^\]]*\])\s+(\[[^\]]*\])')


def shape_class(x, w):
    x, w = ast.literal_eval(x), ast.literal_eval(w)
    if w[1] == 1 and x[1] > 1 and w[0] % x[1] == 0:
        return 'depthwise'
    return 'pointwise' if all(k == 1 for k in w[2:]) else 'general'


def class_sums(build):
    out = subprocess.run([f'{build}/tests/bench/bench_kernels', args.nodes, '--threads', args.threads, '--repeat',
                          args.repeat, '--per-node', '1'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         check=True).stdout
    sums = collections.Counter()
    for l in out.splitlines():
        m = line.match(l)
        if m:
            sums[shape_class(m.group(2), m.group(3))] += float(m.group(1))
    return sums


own, dnnl = collections.defaultdict(list), collections.defaultdict(list)
for _ in range(args.rounds):
    for build, into in ((args.own, own), (args.dnnl, dnnl)):
        for k, v in class_sums(build).items():
            into[k].append(v)
print(f'# {args.nodes}, {args.threads} thread(s), {args.rounds} alternating rounds of {args.repeat} runs per node')
for k in sorted(own):
    ratios = [d / o for o, d in zip(own[k], dnnl[k])]
    print('%-10s own %9.2f ms  oneDNN %9.2f ms  oneDNN/own %.2f  (rounds: %s)' %
          (k, statistics.median(own[k]), statistics.median(dnnl[k]), statistics.median(ratios),
           ' '.join('%.2f' % r for r in ratios)))
