#!/usr/bin/env python3
"""qtool calibrate --merge and TensorRT calibration caches, on a shared model with its real samples.

  merge_interchange.py QTOOL SHARED_DIR SCRATCH_DIR

Merge: the samples are split at k (uneven halves); the merged table of the halves must be byte-equal to the table of
one run over all samples, for the default methods (histogram methods included), minmax only, and a symmetric int8
target. torch_histogram tables and tables of different models are refused with exit 2 and one line naming why.
TensorRT cache: every line's scale, decoded independently here (float32 bits, big-endian hex), is the amax of the
table's entropy range / 127; `qtool quantize --calib CACHE` reads it back and quantizes.
"""
import json, struct, subprocess, sys
from pathlib import Path
import numpy as np

qtool, shared, scratch = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
scratch.mkdir(parents=True, exist_ok=True)
model = shared / "models/digits-vit.onnx"
data = np.load(shared / "data/tensors/digits_calib_images.npy")
k = 50
np.save(scratch / "first.npy", data[:k])
np.save(scratch / "rest.npy", data[k:])
failures = []


def run(*args, expect=0):
    p = subprocess.run([qtool, *map(str, args)], capture_output=True, text=True)
    if p.returncode != expect:
        failures.append(f"{' '.join(map(str, args))}: exit {p.returncode}, wanted {expect}: {p.stderr.strip()}")
    return p


def calibrate(data_file, out, *extra):
    run("calibrate", model, "--data", f"pixel_values={data_file}", "-o", out, "--threads", "2", *extra)


sym = scratch / "sym.json"
sym.write_text(json.dumps({"format": "qtool-qconfig", "version": 1,
                           "global": {"activation": {"dtype": "int8", "symmetric": True}}}))
for label, extra in [("default", []), ("minmax", ["--methods", "minmax"]), ("symmetric", ["--config", sym])]:
    calibrate(shared / "data/tensors/digits_calib_images.npy", scratch / f"all_{label}.json", *extra)
    calibrate(scratch / "first.npy", scratch / f"first_{label}.json", *extra)
    calibrate(scratch / "rest.npy", scratch / f"rest_{label}.json", *extra)
    run("calibrate", "--merge", scratch / f"first_{label}.json", scratch / f"rest_{label}.json",
        "-o", scratch / f"merged_{label}.json")
    a, b = (scratch / f"all_{label}.json").read_bytes(), (scratch / f"merged_{label}.json").read_bytes()
    if a != b:
        failures.append(f"{label}: merged table of {k} + {len(data) - k} samples differs from the table of all")
    else:
        print(f"ok: {label}: merged table byte-equal to one run over all {len(data)} samples")
if b'"target_symmetric": true' not in (scratch / "all_symmetric.json").read_bytes():
    failures.append("symmetric: the table does not record target_symmetric")

# Refusals: exit 2, one line naming the cause.
calibrate(scratch / "first.npy", scratch / "torch_a.json", "--methods", "minmax,torch_histogram")
p = run("calibrate", "--merge", scratch / "torch_a.json", scratch / "torch_a.json", "-o", scratch / "x.json", expect=2)
if "torch_histogram" not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
    failures.append(f"torch_histogram merge: wanted one line naming torch_histogram, got {p.stderr!r}")
run("calibrate", shared / "models/superres-espcn-3x.onnx", "--random", "1", "-o", scratch / "other.json")
p = run("calibrate", "--merge", scratch / "first_default.json", scratch / "other.json", "-o", scratch / "x.json",
        expect=2)
if "different models" not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
    failures.append(f"merge of two models: wanted one line saying 'different models', got {p.stderr!r}")
p = run("calibrate", "--merge", scratch / "first_default.json", scratch / "first_minmax.json", "-o",
        scratch / "x.json", expect=2)
if "same --methods" not in p.stderr:
    failures.append(f"merge of different methods: wanted a line naming --methods, got {p.stderr!r}")

# TensorRT cache: written next to the table, decoded here, read back by quantize.
cache = scratch / "digits.cache"
calibrate(shared / "data/tensors/digits_calib_images.npy", scratch / "with_cache.json", "--trt-cache", cache)
table = json.loads((scratch / "with_cache.json").read_text())
lines = cache.read_text().splitlines()
if lines[0] != "TRT-8601-EntropyCalibration2":
    failures.append(f"cache header is {lines[0]!r}")
scales = {}
for line in lines[1:]:
    name, hexbits = line.rsplit(": ", 1)
    scales[name] = struct.unpack(">f", bytes.fromhex(hexbits.zfill(8)))[0]
expected = {n: t["ranges"]["entropy"] for n, t in table["tensors"].items() if "ranges" in t}
if set(scales) != set(expected):
    failures.append(f"cache lists {len(scales)} tensors, the table has {len(expected)} with ranges")
for name, (lo, hi) in expected.items():
    want = np.float32(max(abs(np.float32(lo)), abs(np.float32(hi)))) / np.float32(127)
    if name in scales and np.float32(scales[name]) != want:
        failures.append(f"cache scale of {name}: {scales[name]!r}, wanted {want!r}")
print(f"ok: cache lists {len(scales)} tensors, scale = entropy amax / 127")
p = run("quantize", model, "--calib", cache, "-o", scratch / "from_cache.onnx")
if "activation Q/DQ pairs" not in p.stdout:
    failures.append(f"quantize --calib CACHE did not quantize: {p.stdout} {p.stderr}")
bad = scratch / "bad.cache"
bad.write_text("TRT-8601-EntropyCalibration2\nconv1: 3c0zzz\n")
p = run("quantize", model, "--calib", bad, "-o", scratch / "x.onnx", expect=2)
if "line 2" not in p.stderr:
    failures.append(f"bad cache: wanted an error naming line 2, got {p.stderr!r}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
