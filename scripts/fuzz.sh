#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/, clang, ASan+UBSan; fuzz/) and runs each for a fixed time, then
# prints one line per target: seconds run, executions, crashes. A crash leaves its input in
# build-fuzz/fuzz/crashes/<target>/ (turn it into a test: see docs/fuzzing.md).
# usage: scripts/fuzz.sh [SECONDS per target, default 600] [TARGET ...]   (default: all six)
#   QTOOL_FUZZ_JOBS=N   targets run N at a time (default 2); each runs under `nice -n 10`.
#   QTOOL_FUZZ_BUILD=0  use the targets already in build-fuzz/ (no configure, no build).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(model qconfig calib_table npy npz pb)
jobs=${QTOOL_FUZZ_JOBS:-2}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ missing: run scripts/install-deps.sh" >&2; exit 2; }

if [[ "${QTOOL_FUZZ_BUILD:-1}" != 0 ]]; then
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DQTOOL_FUZZ=ON \
  -DQTOOL_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target qtool $(printf 'fuzz_%s ' "${targets[@]}")
fi

out=build-fuzz/fuzz
# Seeds: calibration tables written by qtool itself (every method with 16-bin histograms, and min/max only:
# small, so the parser runs hundreds of times a second), then every corpus (fuzz/make_seeds.py).
qtool=build-fuzz/bin/qtool
[[ -x "$qtool" ]] || qtool=build/bin/qtool
tables=("$out/seed_table_all.json" "$out/seed_table_minmax.json")
[[ -f "${tables[0]}" ]] || "$qtool" calibrate models/tiny_conv.onnx --random 2 --threads 1 --histogram-bins 16 \
  --methods all -o "${tables[0]}" >/dev/null
[[ -f "${tables[1]}" ]] || "$qtool" calibrate models/tiny_conv.onnx --random 2 --threads 1 --methods minmax \
  -o "${tables[1]}" >/dev/null
[[ -d "$out/seeds" ]] || /usr/bin/python3 fuzz/make_seeds.py "$out/seeds" --calib-table "${tables[0]}" \
  --calib-table "${tables[1]}"

# halt_on_error: the first report ends the run with the input saved; leaks are bugs too (detect_leaks).
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1

run_one() {
  local t=$1 corpus="$out/corpus/$1" crashes="$out/crashes/$1/" log="$out/$1.log"
  mkdir -p "$corpus" "$crashes"
  # -rss_limit_mb: the readers must refuse huge declared sizes before allocating, so 2 GB is plenty.
  nice -n 10 "$out/fuzz_$t" "$corpus" "$out/seeds/$t" -max_total_time="$seconds" -timeout=25 \
    -rss_limit_mb=2560 -artifact_prefix="$crashes" -print_final_stats=1 >"$log" 2>&1 || true
  local execs crashes_n
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  crashes_n=$(find "$crashes" -type f | wc -l)
  printf '%-12s %6ss %12s execs %3s crashes  (%s)\n' "$t" "$seconds" "${execs:-?}" "$crashes_n" "$log"
}

running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [[ $running -ge $jobs ]]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
