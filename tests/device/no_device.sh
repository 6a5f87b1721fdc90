#!/usr/bin/env bash
# --device cuda on a machine without a usable CUDA device: run, calibrate and quantize each exit 2 with one line
# "no CUDA device: ...; use --device cpu"; a malformed --device is a usage error (exit 1). Skipped (77) where a GPU
# is present (tests/device/gpu/gpu_check.cc covers that machine).
# usage: no_device.sh QTOOL SOURCE_DIR SCRATCH
set -uo pipefail
qtool=$1 src=$2 scratch=$3
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is present: skipped"
  exit 77
fi
rm -rf "$scratch" && mkdir -p "$scratch"
model=$src/models/tiny_conv.onnx
fail=0
expect() {  # expect CODE PATTERN -- ARGS...
  local code=$1 pattern=$2
  shift 3
  local err
  err=$("$qtool" "$@" 2>&1 >/dev/null)
  local rc=$?
  if [[ $rc -ne $code || $(printf '%s\n' "$err" | wc -l) -ne 1 || ! $err =~ $pattern ]]; then
    echo "FAIL: qtool $* -> exit $rc, stderr: $err (expected exit $code, one line matching $pattern)"
    fail=1
  fi
}
nodev='^error: no CUDA device: .+; use --device cpu$'
expect 2 "$nodev" -- run "$model" --device cuda
expect 2 "$nodev" -- run "$model" --device cuda:1
expect 2 "$nodev" -- calibrate "$model" --random 2 --shape input=1,3,32,32 -o "$scratch/c.json" --device cuda
expect 2 "$nodev" -- quantize "$model" --random 2 --shape input=1,3,32,32 -o "$scratch/q.onnx" --device cuda
expect 1 "expected cpu, cuda or cuda:N" -- run "$model" --device gpu
[[ ! -e $scratch/c.json && ! -e $scratch/q.onnx ]] || { echo "FAIL: an output was written"; fail=1; }
# --device cpu changes nothing.
"$qtool" calibrate "$model" --random 2 --shape input=1,3,32,32 -o "$scratch/cpu.json" --device cpu >/dev/null ||
  { echo "FAIL: --device cpu"; fail=1; }
"$qtool" calibrate "$model" --random 2 --shape input=1,3,32,32 -o "$scratch/default.json" >/dev/null &&
  cmp -s "$scratch/cpu.json" "$scratch/default.json" || { echo "FAIL: --device cpu changed the table"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok: --device cuda without a device"
exit $fail
