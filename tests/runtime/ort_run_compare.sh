#!/bin/bash
# `qtool run` against ONNX Runtime 1.30 (scripts/ort/ort_run.mjs) on the repository's tiny models:
# If with an outer-scope initializer and a Constant inside a branch (both branches), Loop with a
# Constant in its body, an already-quantized QDQ model, and a conv net. Every output must agree within
# max |qtool - ort| <= 1e-4 * max |ort| + 1e-5.
# usage: ort_run_compare.sh SOURCE_DIR WORK_DIR QTOOL
set -euo pipefail
src=$1 work=$2 qtool=$3
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
w = sys.argv[1]
np.save(f"{w}/x16.npy", np.random.RandomState(0).randn(3, 16).astype(np.float32))
np.save(f"{w}/x16neg.npy", -np.abs(np.random.RandomState(1).randn(3, 16)).astype(np.float32))
np.save(f"{w}/x8.npy", np.random.RandomState(2).randn(3, 8).astype(np.float32))
np.save(f"{w}/steps.npy", np.array(5, dtype=np.int64))
np.save(f"{w}/img16.npy", np.random.RandomState(3).rand(2, 3, 16, 16).astype(np.float32))
np.save(f"{w}/img32.npy", np.random.RandomState(4).rand(2, 3, 32, 32).astype(np.float32))
PY
compare() {  # name model args...   (ORT_OPT: ort_run.mjs --opt-level for this call)
  local name=$1 model=$2
  shift 2
  "$qtool" run "$src/models/$model" "$@" --output-dir "$work/q_$name" > /dev/null
  node "$src/scripts/ort/ort_run.mjs" "$src/models/$model" "$@" --output-dir "$work/o_$name" \
    ${ORT_OPT:+--opt-level "$ORT_OPT"} > /dev/null
  /usr/bin/python3 - "$work/o_$name" "$work/q_$name" "$name" <<'PY'
import sys, glob, os, numpy as np
ort_dir, q_dir, name = sys.argv[1:4]
files = sorted(glob.glob(f"{ort_dir}/*.npy"))
assert files, f"{name}: ONNX Runtime wrote no outputs"
for f in files:
    ref = np.load(f).astype(np.float64)
    got = np.load(os.path.join(q_dir, os.path.basename(f))).astype(np.float64)
    assert got.shape == ref.shape, f"{name} {f}: shape {got.shape} vs {ref.shape}"
    err = float(np.abs(got - ref).max()) if ref.size else 0.0
    tol = 1e-4 * float(np.abs(ref).max() if ref.size else 0.0) + 1e-5
    print(f"{name} {os.path.basename(f)}: max abs error {err:.3g} (tolerance {tol:.3g})")
    assert err <= tol, f"{name}: {os.path.basename(f)} differs from ONNX Runtime"
PY
}
compare if_then tiny_if.onnx --input "x=$work/x16.npy"
compare if_else tiny_if.onnx --input "x=$work/x16neg.npy"
compare loop tiny_loop.onnx --input "x=$work/x8.npy" --input "steps=$work/steps.npy"
# The QDQ model against ORT without graph optimizations, i.e. DequantizeLinear -> float op as ONNX defines it: fused,
# ORT's u8s8 kernels add neighbouring products in int16 and saturate on x86 CPUs with AVX2 but no VNNI (this
# model's weights then differ by 0.0074; docs/accuracy.md), which is a property of ORT's kernels, not of the model.
ORT_OPT=disabled compare qdq tiny_qdq.onnx --input "input=$work/img16.npy"
compare conv tiny_conv.onnx --input "input=$work/img32.npy"
echo "all outputs match ONNX Runtime"
