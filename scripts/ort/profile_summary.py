#!/usr/bin/python3
"""Sums an ONNX Runtime profile (ort_run.mjs --profile) per op type. Each node's time is its median over the
session runs (the first --skip runs, the warm-up, left out): on a shared machine a preempted run inflates a
mean, a median of 20+ runs does not. Prints ms per op type, share, node count; --nodes N adds the N slowest
nodes; --json writes {node: [op_type, median ms]} for comparing two profiles (scripts/ort/profile_compare.py).
usage: profile_summary.py PROFILE.json [--skip 1] [--nodes N] [--json OUT]"""
import argparse
import json
from collections import defaultdict


def node_medians(path, skip=1):
    """{node name: (op type, median ms over the runs)} and the median run time in ms."""
    events = json.load(open(path))
    runs = sorted((e for e in events if e.get('cat') == 'Session' and e['name'] == 'model_run'),
                  key=lambda e: e['ts'])[skip:]
    starts = [r['ts'] for r in runs]
    per = defaultdict(lambda: [0.0] * len(runs))
    ops = {}
    for e in events:
        if e.get('cat') != 'Node' or not e['name'].endswith('_kernel_time') or not runs or e['ts'] < starts[0]:
            continue
        k = max(i for i, s in enumerate(starts) if s <= e['ts'])
        node = e['name'][:-len('_kernel_time')]
        per[node][k] += e['dur'] / 1000
        ops[node] = e['args']['op_name']
    med = lambda v: sorted(v)[len(v) // 2]
    return {n: (ops[n], med(v)) for n, v in per.items()}, med([r['dur'] / 1000 for r in runs])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('profile')
    ap.add_argument('--skip', type=int, default=1, help='leading session runs left out (warm-up)')
    ap.add_argument('--nodes', type=int, default=0)
    ap.add_argument('--json')
    a = ap.parse_args()
    nodes, run_ms = node_medians(a.profile, a.skip)
    by_op, count = defaultdict(float), defaultdict(int)
    for op, ms in nodes.values():
        by_op[op] += ms
        count[op] += 1
    total = sum(by_op.values())
    print(f'median run {run_ms:.2f} ms; sum of per-node medians {total:.2f} ms')
    for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1]):
        print(f'  {op:28s} {ms:8.3f} ms {100 * ms / total:5.1f}%  {count[op]:4d} nodes')
    for node, (op, ms) in sorted(nodes.items(), key=lambda kv: -kv[1][1])[:a.nodes]:
        print(f'    {ms:7.3f} ms  {op:22s} {node[:100]}')
    if a.json:
        json.dump(nodes, open(a.json, 'w'))


if __name__ == '__main__':
    main()
