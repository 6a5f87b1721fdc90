#!/usr/bin/env bash
# Calibration samples/s with --device cuda against --device cpu (prints figures; not a test), on mobilenetv2
# (its 6 calibration images) and ppocrv4-det (16 random samples of [1,3,640,640]), --methods all, 3 rounds each,
# the best round reported. Needs a qtool built with CUDA (scripts/build_cuda.sh) and a GPU: without a device it
# says so and exits 0.
# usage: bash scripts/bench_cuda.sh [BUILD_DIR] (default build-cuda); THREADS=N for the CPU side (default nproc)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build-cuda}"
QTOOL="$BUILD/bin/qtool"
SHARED="$ROOT/../shared"
THREADS="${THREADS:-$(nproc)}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [[ ! -x $QTOOL ]]; then
  echo "bench_cuda: no qtool at $QTOOL (build it with scripts/build_cuda.sh)"
  exit 0
fi
if ! probe=$("$QTOOL" run "$ROOT/models/tiny_conv.onnx" --device cuda 2>&1 >/dev/null); then
  echo "bench_cuda: ${probe#error: } -- nothing to measure (exit 0)"
  exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# best samples/s of 3 rounds: bench NAME DEVICE ARGS...
bench() {
  local name=$1 device=$2
  shift 2
  local best=0
  for _ in 1 2 3; do
    s=$("$QTOOL" calibrate "$@" --methods all --threads "$THREADS" --device "$device" -o "$scratch/t.json" --json 2>/dev/null |
      /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["samples_per_second"])')
    best=$(/usr/bin/python3 -c "print(max($best, $s))")
  done
  printf '%-14s %-6s %10.2f samples/s\n' "$name" "$device" "$best"
}

echo "== calibration samples/s, --methods all, CPU threads $THREADS ($(date -u +%F), $(nvidia-smi -L 2>/dev/null | head -1))"
for device in cpu cuda; do
  bench mobilenetv2 $device "$SHARED/models/mobilenetv2-1.0-224-fp32.onnx" \
    --data "input=$SHARED/data/tensors/mobilenetv2_calib6.npy"
  bench ppocrv4-det $device "$SHARED/models/ppocrv4-det.onnx" --random 16 --shape x=1,3,640,640
done
