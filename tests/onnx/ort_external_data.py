#!/usr/bin/python3
"""Models re-saved by qtool with external data load and run in ONNX Runtime 1.30 with outputs identical
to the originals (same runtime, same inputs, one thread, bit-exact).

usage: ort_external_data.py QTOOL SHARED_DIR SOURCE_DIR SCRATCH_DIR

Every shared model (inputs as ../shared/data/README.md assigns them) and every bundled model is converted
with `qtool convert --external-data always` (tensors of 1 KiB and more external, 128 bytes for the tiny
bundled models; Constant values and subgraph tensors included); tiny_external.onnx is also converted back
to a single file. Smaller thresholds are not used: ONNX Runtime's shape inference cannot read small shape
tensors (Pad pads, Reshape shapes) from external data, which is why such tensors stay inline by default.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from shared_inputs import one_input_per_model  # noqa: E402

qtool, shared, source, scratch = sys.argv[1:5]
runner = os.path.join(source, "scripts", "ort", "ort_run.mjs")
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
rng = np.random.default_rng(0)


def scratch_npy(name, array):
    path = os.path.join(scratch, name)
    np.save(path, array)
    return path


SHARED = one_input_per_model(shared)
BUNDLED = {
    "tiny_conv.onnx": {"input": scratch_npy("conv_in.npy", rng.random((2, 3, 32, 32), dtype=np.float32))},
    "tiny_if.onnx": {"x": scratch_npy("if_in.npy", rng.standard_normal((2, 16)).astype(np.float32))},
    "tiny_loop.onnx": {"x": scratch_npy("loop_in.npy", rng.standard_normal((2, 8)).astype(np.float32)),
                       "steps": scratch_npy("loop_steps.npy", np.array(3, dtype=np.int64))},
    "tiny_qdq.onnx": {"input": scratch_npy("qdq_in.npy", rng.random((2, 3, 16, 16), dtype=np.float32))},
    "tiny_external.onnx": {"x": scratch_npy("ext_in.npy", rng.random((2, 64), dtype=np.float32))},
}

cases = [(os.path.join(shared, "models", m), i, 1024) for m, i in SHARED.items()]
cases += [(os.path.join(source, "models", m), i, 128) for m, i in BUNDLED.items()]
covered = {os.path.relpath(os.path.join(r, f), os.path.join(shared, "models"))
           for r, _, fs in os.walk(os.path.join(shared, "models")) for f in fs if f.endswith(".onnx")}
assert covered == set(SHARED), f"shared models without an input assignment: {covered - set(SHARED)}"


def ort(model, inputs, out_dir):
    args = ["node", runner, model, "--output-dir", out_dir, "--threads", "1"]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"ONNX Runtime failed on {model}: {p.stderr.strip()}")
    return {name: np.load(o["file"]) for name, o in json.loads(p.stdout)["outputs"].items()}


failures = []


def compare(label, want, got):
    if want.keys() != got.keys():
        failures.append(f"{label}: outputs {sorted(got)} != {sorted(want)}")
        return
    for name in want:
        same = want[name].dtype == got[name].dtype and np.array_equal(want[name], got[name])
        print(f"{'ok  ' if same else 'FAIL'} {label}: output {name} {list(want[name].shape)} "
              f"{'bit-identical' if same else 'differs'}")
        if not same:
            failures.append(f"{label}: output {name} differs")


for i, (model, inputs, min_bytes) in enumerate(cases):
    stem = f"m{i}"
    out = os.path.join(scratch, stem, "model.onnx")
    os.makedirs(os.path.dirname(out))
    subprocess.run([qtool, "-q", "convert", model, "-o", out, "--external-data", "always", "--external-min-bytes",
                    str(min_bytes)], check=True)
    data = out + ".data"
    if not os.path.exists(data) or os.path.getsize(data) == 0:
        failures.append(f"{model}: no external data written")
    want = ort(model, inputs, os.path.join(scratch, stem, "ref"))
    got = ort(out, inputs, os.path.join(scratch, stem, "ext"))
    compare(f"{os.path.basename(model)} (external data)", want, got)
    if model.endswith("tiny_external.onnx"):  # and back to one self-contained file
        single = os.path.join(scratch, stem, "single.onnx")
        subprocess.run([qtool, "-q", "convert", model, "-o", single, "--external-data", "never"], check=True)
        compare("tiny_external.onnx (inlined)", want, ort(single, inputs, os.path.join(scratch, stem, "single")))

if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"\nall {len(cases)} models run in ONNX Runtime from external data with bit-identical outputs")
