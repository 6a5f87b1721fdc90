#!/usr/bin/env bash
# Calibration benchmarks (prints figures; not a test):
#   1. histogram update throughput in elements/s (bench_calib_observers), per backend and thread count;
#   2. observer overhead: wall time per sample of calibrate's observed runs against the plain forward pass of
#      `qtool run` with the same --threads, on ppocrv4-det (bench_calib_overhead; target <= 25 %), for --methods
#      minmax, the default set, and all; at THREADS (observers beside the interpreter when >= 2) and at 1 thread
#      (observers inline);
#   3. peak RSS of `qtool calibrate` on ppocrv4-det with 10 and with 100 samples (target ratio <= 1.1);
#   4. calibration throughput: samples/s of `qtool calibrate --json` (the observed runs only, model loading and
#      range computation excluded) with the default methods at THREADS threads, on ppocrv4-det [SHAPE] and
#      mobilenetv2, median of 3 runs of CALIB_SAMPLES (8) random samples. Only this part: ONLY=throughput.
# Usage: bash scripts/bench_calib.sh [BUILD_DIR] (default build); THREADS=N, SHAPE=1,3,H,W to override.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
THREADS="${THREADS:-$(nproc)}"
SHAPE="${SHAPE:-1,3,320,320}"
MODEL="$ROOT/../shared/models/ppocrv4-det.onnx"
PY=/usr/bin/python3
# OpenMP threads that spin while waiting make every figure depend on the machine's load (the shared 2-core
# development machine runs several jobs): wait passively unless told otherwise.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"

cmake --build "$BUILD" -j2 --target qtool bench_calib_observers bench_calib_overhead >/dev/null
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

throughput() {
  local samples="${CALIB_SAMPLES:-8}"
  echo "== calibration throughput, default methods, threads $THREADS, $samples random samples, median of 3"
  for spec in "ppocrv4-det.onnx --shape x=$SHAPE" "mobilenetv2-1.0-224-fp32.onnx"; do
    read -r file shape_args <<< "$spec"
    rates=()
    for _ in 1 2 3; do
      # shellcheck disable=SC2086
      rates+=("$("$BUILD/bin/qtool" -q calibrate "$ROOT/../shared/models/$file" --random "$samples" $shape_args \
        --threads "$THREADS" -o "$TMP/throughput.json" --json | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["samples_per_second"])')")
    done
    "$PY" -c 'import statistics, sys; r = [float(x) for x in sys.argv[2:]]; print("%s: %.2f samples/s (runs: %s)" % (sys.argv[1], statistics.median(r), ", ".join("%.2f" % x for x in r)))' "$file" "${rates[@]}"
  done
}
if [[ "${ONLY:-}" == throughput ]]; then throughput; exit 0; fi

echo "== histogram update throughput (16M normal values)"
"$BUILD/tests/bench/bench_calib_observers" --threads "$THREADS" --repeat 5

for threads in $(printf '%s\n' "$THREADS" 1 | uniq); do
  echo "== observer overhead on ppocrv4-det, input [$SHAPE], threads $threads, per set of recorded range methods"
  for methods in minmax minmax,percentile,entropy,mse all; do
    "$BUILD/tests/bench/bench_calib_overhead" "$MODEL" --shape "x=$SHAPE" --samples 5 --rounds 7 --threads "$threads" \
      --methods "$methods"
  done
done

echo "== peak RSS of qtool calibrate on ppocrv4-det, 10 vs 100 random samples"
rss() {  # peak RSS in KiB of one qtool calibrate run
  "$PY" - "$@" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
R10=$(rss "$BUILD/bin/qtool" -q calibrate "$MODEL" --random 10 --shape "x=$SHAPE" --threads "$THREADS" -o "$TMP/c10.json")
R100=$(rss "$BUILD/bin/qtool" -q calibrate "$MODEL" --random 100 --shape "x=$SHAPE" --threads "$THREADS" -o "$TMP/c100.json")
"$PY" -c "r10, r100 = $R10, $R100; print('{\"rss_kib_10\": %d, \"rss_kib_100\": %d, \"ratio\": %.3f, \"ok\": %s}' % (r10, r100, r100 / r10, str(r100 / r10 <= 1.1).lower()))"

throughput
