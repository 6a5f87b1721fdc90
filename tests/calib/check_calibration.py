#!/usr/bin/python3
"""Runs `qtool calibrate` on a model and checks the calibration file it writes.

  check_calibration.py QTOOL MODEL OUT.json [--reference DIR] [--samples N] -- CALIBRATE ARGS...

Checks: exit code 0; the file's schema; model_sha256 = the model's SHA-256; every float activation of the
model (graph inputs and outputs of every non-Constant node whose type ONNX shape inference knows to be float)
has an entry; per entry, exactly the range methods asked (--methods; settings.methods says them), histogram total
= count (when a method needs the histogram, and no histogram otherwise), min/max = the histogram's data range and every range within
[min, max]; with --reference, each graph output's min/max equals that of ONNX Runtime's output (.npy files).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import onnx

FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
ALL_METHODS = ["minmax", "percentile", "entropy", "mse", "torch_histogram"]
DEFAULT_METHODS = ["minmax", "percentile", "entropy", "mse"]
HISTOGRAM_METHODS = {"percentile", "entropy", "mse"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def float_activations(model):
    """Names of float values the interpreter produces: non-initializer inputs and non-Constant node outputs."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception as e:  # newer opsets than Debian's onnx knows
        print("note: shape inference failed (%s); using declared types only" % e)
        inferred = model
    g = inferred.graph
    types = {}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type:
            types[v.name] = v.type.tensor_type.elem_type
    inits = {i.name for i in g.initializer}
    expected, unknown = set(), []
    for i in g.input:
        if i.name not in inits and types.get(i.name) in FLOAT_TYPES:
            expected.add(i.name)
    for n in g.node:
        if n.op_type == "Constant":
            continue
        for o in n.output:
            if not o:
                continue
            if o not in types:
                unknown.append(o)
            elif types[o] in FLOAT_TYPES:
                expected.add(o)
    return expected, unknown


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        fail("usage: check_calibration.py QTOOL MODEL OUT [--reference DIR] [--samples N] -- ARGS")
    split = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("qtool")
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--reference")
    ap.add_argument("--samples", type=int)
    a = ap.parse_args(argv[:split])
    cmd = [a.qtool, "calibrate", a.model, "-o", a.out, "--json"] + argv[split + 1:]
    print(" ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        fail("qtool calibrate exited with %d" % p.returncode)
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    print("summary:", summary)

    with open(a.out) as f:
        text = f.read()
    def sorted_object(pairs):
        keys = [k for k, _ in pairs]
        if keys != sorted(keys):
            fail("keys not sorted: %s" % keys[:6])
        return dict(pairs)

    doc = json.loads(text, object_pairs_hook=sorted_object)
    if doc["format"] != "qtool-calibration" or doc["version"] != 1:
        fail("format/version")
    with open(a.model, "rb") as f:
        if doc["model_sha256"] != hashlib.sha256(f.read()).hexdigest():
            fail("model_sha256 differs from the model's SHA-256")
    if doc["model"] != os.path.basename(a.model):
        fail("model name")
    if a.samples is not None and doc["samples"] != a.samples:
        fail("samples %d, expected %d" % (doc["samples"], a.samples))
    tensors = doc["tensors"]
    args = argv[split + 1:]
    asked = args[args.index("--methods") + 1] if "--methods" in args else None
    want = (ALL_METHODS if asked == "all" else
            [m for m in ALL_METHODS if m == "minmax" or m in asked.split(",")] if asked else DEFAULT_METHODS)
    if doc["settings"]["methods"] != want:
        fail("settings.methods %s, expected %s" % (doc["settings"]["methods"], want))
    if summary["methods"] != want:
        fail("--json methods %s, expected %s" % (summary["methods"], want))
    with_histogram = bool(HISTOGRAM_METHODS & set(want))

    model = onnx.load(a.model, load_external_data=False)
    expected, unknown = float_activations(model)
    missing = sorted(expected - set(tensors))
    if missing:
        fail("%d float activations missing, e.g. %s" % (len(missing), missing[:5]))
    produced = {i.name for i in model.graph.input} | {o for n in model.graph.node for o in n.output}
    extra = sorted(set(tensors) - produced)
    if extra:
        fail("entries for values the model does not produce: %s" % extra[:5])
    print("coverage: %d expected float activations all present (%d entries, %d outputs of unknown type)"
          % (len(expected), len(tensors), len(unknown)))

    for name, t in tensors.items():
        where = "tensors[%r]" % name
        if t["count"] == 0:
            continue
        if sorted(t["ranges"]) != sorted(want):
            fail("%s: ranges %s, expected %s" % (where, sorted(t["ranges"]), want))
        if t["ranges"]["minmax"] != [t["min"], t["max"]]:
            fail("%s: minmax range != [min, max]" % where)
        if "histogram" in t and not with_histogram:
            fail("%s: a histogram, though no recorded method needs one" % where)
        if not with_histogram:
            continue
        h = t["histogram"]
        counts = h["counts"]
        if sum(counts) != t["count"]:
            fail("%s: histogram total %d != count %d" % (where, sum(counts), t["count"]))
        width = (h["max"] - h["min"]) / len(counts)
        lo, hi = float(np.float32(t["min"])), float(np.float32(t["max"]))  # %.9g round-trips as float32
        if not (h["min"] <= lo < h["min"] + width and h["max"] - width <= hi <= h["max"]):
            fail("%s: min/max %r %r not in the first/last histogram bin [%r, %r]" % (where, t["min"], t["max"], h["min"], h["max"]))
        if counts[0] == 0 or counts[-1] == 0:
            fail("%s: histogram not trimmed to occupied bins" % where)
        for m, (lo, hi) in t["ranges"].items():
            # PyTorch relaxes its histogram's max by less than (max - min) / upsample_rate (128) per batch.
            slack = (t["max"] - t["min"]) * summary["runs"] / 128.0 if m == "torch_histogram" else 0.0
            if not (t["min"] - slack <= lo <= hi <= t["max"] + slack):
                fail("%s.ranges.%s: [%r, %r] not inside [min, max] = [%r, %r]" % (where, m, lo, hi, t["min"], t["max"]))

    if a.reference:  # "--reference=" (empty) means none
        checked = 0
        for out in model.graph.output:
            path = os.path.join(a.reference, out.name + ".npy")
            if not os.path.exists(path):
                continue
            ref = np.load(path).astype(np.float64)
            t = tensors[out.name]
            tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
            for key, want in (("min", ref.min()), ("max", ref.max())):
                if abs(t[key] - want) > tol:
                    fail("output %s: %s %r, ONNX Runtime %r" % (out.name, key, t[key], want))
            if t["count"] != ref.size:
                fail("output %s: count %d, ONNX Runtime output has %d values" % (out.name, t["count"], ref.size))
            checked += 1
        if checked == 0:
            fail("no reference output found in " + a.reference)
        print("reference: min/max/count of %d outputs equal ONNX Runtime's" % checked)
    print("OK")


if __name__ == "__main__":
    main()
