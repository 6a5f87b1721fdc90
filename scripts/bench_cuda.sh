#!/usr/bin/env bash
# Calibration samples/s with --device cuda against --device cpu (prints figures; not a test), on the two Conv models
# whose calibration time is mostly Conv: mobilenetv2 (its 6 calibration images) and ppocrv4-det (16 random samples
# of [1,3,640,640]), --methods all, ROUNDS rounds each (default 3), the best round reported. Then, per model, where
# the nodes ran under --device cuda, counted by op from the -v lines ("runs on the GPU (...)", "...; runs on the
# CPU"), so a figure is read with the Conv placement beside it.
# Needs a qtool built with CUDA (scripts/build_cuda.sh) and a GPU: without a device it says so and exits 0.
# usage: bash scripts/bench_cuda.sh [BUILD_DIR] (default build-cuda); THREADS=N for the CPU side (default nproc);
#        DEVICES="cpu cuda" (default; DEVICES=cpu checks the script itself on a machine without a GPU)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build-cuda}"
QTOOL="$BUILD/bin/qtool"
SHARED="${QTOOL_SHARED_DIR:-$ROOT/../shared}"
THREADS="${THREADS:-$(nproc)}"
ROUNDS="${ROUNDS:-3}"
DEVICES="${DEVICES:-cpu cuda}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [[ ! -x $QTOOL ]]; then
  echo "bench_cuda: no qtool at $QTOOL (build it with scripts/build_cuda.sh)"
  exit 0
fi
if [[ " $DEVICES " == *" cuda "* ]] && ! probe=$("$QTOOL" run "$ROOT/models/tiny_conv.onnx" --device cuda 2>&1 >/dev/null); then
  echo "bench_cuda: ${probe#error: } -- nothing to measure (exit 0)"
  exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# best samples/s of ROUNDS rounds: bench NAME DEVICE ARGS...
bench() {
  local name=$1 device=$2
  shift 2
  local best=0 s
  for ((r = 0; r < ROUNDS; ++r)); do
    if ! "$QTOOL" calibrate "$@" --methods all --threads "$THREADS" --device "$device" -o "$scratch/t.json" --json \
      >"$scratch/out.json" 2>"$scratch/err.txt"; then
      echo "bench_cuda: $name --device $device failed: $(tail -1 "$scratch/err.txt")"
      exit 1
    fi
    s=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_second"])' "$scratch/out.json")
    best=$(/usr/bin/python3 -c "print(max($best, $s))")
  done
  printf '%-14s %-6s %10.2f samples/s\n' "$name" "$device" "$best"
}

# op counts of the nodes that ran on the GPU and on the CPU in one calibration: placement NAME DEVICE ARGS...
placement() {
  local name=$1 device=$2
  shift 2
  "$QTOOL" calibrate "$@" --methods minmax --threads "$THREADS" --device "$device" -o "$scratch/p.json" -v \
    2>"$scratch/v.txt" >/dev/null
  /usr/bin/python3 - "$name" "$scratch/v.txt" <<'EOF'
import collections, re, sys
gpu, cpu = collections.Counter(), collections.Counter()
for line in open(sys.argv[2], errors='replace'):
    line = line.rstrip()
    if m := re.match(r'debug: (\S+) .*: runs on the GPU \(', line):
        gpu[m.group(1)] += 1
    elif m := re.match(r'debug: (\S+) .*; runs on the CPU$', line):
        cpu[m.group(1)] += 1
fmt = lambda c: ', '.join(f'{k} {v}' for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) or 'none'
print(f'{sys.argv[1]:<14} nodes on the GPU: {fmt(gpu)}\n{"":<14} nodes on the CPU: {fmt(cpu)}')
EOF
}

mobilenet=("$SHARED/models/mobilenetv2-1.0-224-fp32.onnx" --data "input=$SHARED/data/tensors/mobilenetv2_calib6.npy")
det=("$SHARED/models/ppocrv4-det.onnx" --random 16 --shape x=1,3,640,640)
gpu=$(nvidia-smi -L 2>/dev/null | head -1 || true)
echo "== calibration samples/s, --methods all, best of $ROUNDS, CPU threads $THREADS ($(date -u +%F), ${gpu:-no GPU listed})"
for device in $DEVICES; do
  bench mobilenetv2 "$device" "${mobilenet[@]}"
  bench ppocrv4-det "$device" "${det[@]}"
done
if [[ " $DEVICES " == *" cuda "* ]]; then
  echo "== where the nodes ran under --device cuda (-v)"
  placement mobilenetv2 cuda "${mobilenet[@]}"
  placement ppocrv4-det cuda "${det[@]}"
fi
