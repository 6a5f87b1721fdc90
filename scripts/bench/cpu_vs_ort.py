#!/usr/bin/python3
"""CPU time per forward, qtool against ONNX Runtime 1.30 (or two qtool binaries), on a loaded machine.

usage: scripts/bench/cpu_vs_ort.py MODEL NAME=FILE.npy [--qtool BIN] [--against BIN] [--threads 1] [--rounds 5]
                                   [--repeat 100]

On a shared machine the wall-clock medians of scripts/bench_runtime.sh move by 20-50 % between runs (other jobs
preempt the timed process); the CPU time the process itself used moves by a few percent. Each measurement is
`perf stat -e task-clock` of a whole process with N forwards minus the same process with none (qtool run --repeat 0;
ORT's ort_run.mjs --repeat 1, its least), divided by N: model loading and start-up cancel out. The two programs run
alternately for R rounds; prints both per-forward figures per round and the ratio of the medians. --against BIN
times a second qtool binary instead of ORT (before/after a change). At --threads > 1 CPU time counts every
thread's work, spinning included, so it is a cost, not a latency.
"""
import argparse
import os
import statistics
import subprocess

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("input")
ap.add_argument("--qtool", default=os.path.join(root, "build/bin/qtool"))
ap.add_argument("--against", help="a second qtool binary instead of ONNX Runtime")
ap.add_argument("--threads", default="1")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--repeat", type=int, default=100)
a = ap.parse_args()
env = dict(os.environ)
env.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def task_clock_ms(cmd):
    r = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock"] + cmd, capture_output=True, text=True, env=env)
    for line in r.stderr.splitlines():
        if "task-clock" in line:
            return float(line.split(",")[0])
    raise SystemExit("cpu_vs_ort: no task-clock from perf stat (is perf installed and allowed?): " + r.stderr[-300:])


def qtool(binary):
    run = lambda n: task_clock_ms([binary, "run", a.model, "-i", a.input, "-t", a.threads, "--repeat", str(n)])
    return (run(a.repeat) - run(0)) / a.repeat


def ort():
    run = lambda n: task_clock_ms(["node", os.path.join(root, "scripts/ort/ort_run.mjs"), a.model, "--input", a.input,
                                   "--threads", a.threads, "--repeat", str(n)])
    return (run(a.repeat + 1) - run(1)) / a.repeat


base, ours = [], []
for _ in range(a.rounds):
    base.append(qtool(a.against) if a.against else ort())
    ours.append(qtool(a.qtool))
name = "other" if a.against else "ort"
print("%s cpu ms/forward: %s %s, qtool %s; qtool/%s %.3f" % (
    os.path.basename(a.model), name, " ".join("%.2f" % x for x in base), " ".join("%.2f" % x for x in ours), name,
    statistics.median(ours) / statistics.median(base)))
