#!/usr/bin/env bash
# Compares qtool's fp32 forward time with ONNX Runtime 1.30 on the shared benchmark models.
#
# usage: scripts/bench_runtime.sh [--threads 1,2] [--load none|busy|both] [--repeat N] [--rounds R]
#                                 [--build DIR] [--models a,b,c] [--omp-wait active|passive]
#
# For each model and thread count, ORT (scripts/ort/ort_run.mjs) and qtool run alternately for R rounds
# with the same thread count and the environment as the caller has it; each run reports the median of N
# timed forwards after one warm-up; the table shows the median over rounds, the ratio qtool/ORT and
# qtool's peak RSS (/usr/bin/time -v). --load busy runs the same table while a busy loop spins on every
# core (nproc) for both programs; --load both (the default) prints the unloaded table, then the loaded one.
# The defaults print issue 13's table: five models, 1 and 2 threads, unloaded and loaded.
# qtool is timed, in order of preference, with `qtool run --repeat N --threads T --json` (mode "run",
# outputs of the first round checked against ../shared/data/reference_outputs) when the binary has it, with tests/bench/bench_session (mode "session": whole model through
# runtime::Session, outputs checked against ../shared/data/reference_outputs) when it was built, or with
# tests/bench/bench_kernels (mode "kernels": only the compute kernels, node by node on the model's real
# shapes; elementwise/shape ops are not counted, so that ratio is a lower bound).
# --omp-wait sets OMP_WAIT_POLICY for qtool; unset, qtool picks PASSIVE itself (core/omp_wait.h).
# Build first: cmake --build build --target bench_session bench_kernels qtool
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
threads_list=1,2 load=both repeat=20 rounds=3 omp_wait="" build="$root/build"
models="mobilenetv2,ppocrv4-det,ppocrv4-rec,digits-vit,llama2c-aidreams-260k"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads_list="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --omp-wait) omp_wait="$2"; shift 2 ;;
    *) echo "bench_runtime: unknown argument $1" >&2; exit 1 ;;
  esac
done
PY=/usr/bin/python3
shared="${QTOOL_SHARED_DIR:-$root/../shared}"
qtool="$build/bin/qtool"
bench="$build/tests/bench/bench_kernels"
session="$build/tests/bench/bench_session"
case "$load" in none|busy|both) ;; *) echo "bench_runtime: --load must be none, busy or both, got '$load'" >&2; exit 1 ;; esac
declare -A model_file=([mobilenetv2]=mobilenetv2-1.0-224-fp32.onnx [ppocrv4-det]=ppocrv4-det.onnx [ppocrv4-rec]=ppocrv4-rec.onnx
                       [digits-vit]=digits-vit.onnx [llama2c-aidreams-260k]=llama2c-aidreams-260k.onnx)
declare -A model_input=([mobilenetv2]="input=mobilenetv2_chelsea.npy" [ppocrv4-det]="x=ppocrdet_ocr_en-01.npy"
                        [ppocrv4-rec]="x=ppocrrec_rendered_line0.npy" [digits-vit]="pixel_values=digits_test64.npy"
                        [llama2c-aidreams-260k]="input_ids=llama2c_eval32_first2.npy")
declare -A model_ref=([mobilenetv2]=mobilenetv2-1.0-224-fp32__chelsea [ppocrv4-det]=ppocrv4-det__ocr_en-01
                      [ppocrv4-rec]=ppocrv4-rec__rendered_line0 [digits-vit]=digits-vit__test64
                      [llama2c-aidreams-260k]=llama2c-aidreams-260k__eval32_first2)

mode=kernels
if [[ -x "$session" ]]; then mode=session; fi
if [[ -x "$qtool" ]] && "$qtool" --help 2>/dev/null | grep -qE "^ +run( |$)"; then mode=run; fi
if [[ $mode == kernels && ! -x "$bench" ]]; then
  cmake --build "$build" -j2 --target bench_kernels >/dev/null
fi
tmp="$(mktemp -d)"
busy=()
stop_busy() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; busy=(); }
trap 'stop_busy; rm -rf "$tmp"' EXIT

# Median (ms) from a JSON line: the first "median" found, else "compute_ms".
json_ms() { "$PY" -c '
import json, sys
def find(o):
    if isinstance(o, dict):
        for k in ("median", "median_ms", "compute_ms"):
            if k in o and isinstance(o[k], (int, float)): return o[k]
        for v in o.values():
            r = find(v)
            if r is not None: return r
    return None
for line in reversed(sys.stdin.read().strip().splitlines()):
    try: r = find(json.loads(line))
    except ValueError: continue
    if r is not None: print(r); break
'; }
median() { "$PY" -c 'import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

IFS=, read -ra list <<< "$models"
IFS=, read -ra tlist <<< "$threads_list"
table() {  # $1 = none|busy
printf '%-22s %7s %6s %10s %10s %7s %10s  %s\n' model threads load ort_ms qtool_ms ratio peak_MiB mode
for m in "${list[@]}"; do
for threads in "${tlist[@]}"; do
  file="$shared/models/${model_file[$m]}"
  in_name="${model_input[$m]%%=*}"; in_file="$shared/data/tensors/${model_input[$m]#*=}"
  if [[ $mode == kernels ]]; then
    nodes="$build/bench/$m.nodes.json"
    mkdir -p "$build/bench"
    [[ -f "$nodes" ]] || "$PY" "$root/scripts/bench/compute_nodes.py" "$file" "$in_name=$in_file" --out "$nodes"
  fi
  ort=() ours=() rss=()
  for ((r = 0; r < rounds; r++)); do
    ort+=("$(node "$root/scripts/ort/ort_run.mjs" "$file" --input "$in_name=$in_file" --threads "$threads" \
             --repeat "$repeat" | json_ms)")
    if [[ $mode == run ]]; then
      cmd=("$qtool" run "$file" --input "$in_name=$in_file" --threads "$threads" --repeat "$repeat" --json)
      [[ $r == 0 ]] && cmd+=(--output-dir "$tmp/outputs")
    elif [[ $mode == session ]]; then
      cmd=("$session" "$file" --input "$in_name=$in_file" --threads "$threads" --repeat "$repeat"
           --check "$shared/data/reference_outputs/${model_ref[$m]}")
    else
      cmd=("$bench" "$nodes" --threads "$threads" --repeat "$repeat")
    fi
    [[ -n "$omp_wait" ]] && cmd=(env "OMP_WAIT_POLICY=$omp_wait" "${cmd[@]}")
    /usr/bin/time -v -o "$tmp/time.txt" "${cmd[@]}" > "$tmp/out.txt"
    ours+=("$(json_ms < "$tmp/out.txt")")
    if [[ $mode == run && $r == 0 ]]; then  # outputs must agree with ONNX Runtime's
      "$PY" -c 'import glob, os, sys, numpy as np
ref = sys.argv[1]
for f in glob.glob(os.path.join(sys.argv[2], "*.npy")):
    want = os.path.join(ref, os.path.basename(f))
    if os.path.exists(want):
        d = float(np.max(np.abs(np.load(f).astype(np.float64) - np.load(want))))
        if not d <= 1e-3: sys.exit("bench_runtime: %s output %s differs from ONNX Runtime by %g" % (sys.argv[3], f, d))
' "$shared/data/reference_outputs/${model_ref[$m]}" "$tmp/outputs" "$m"
      rm -rf "$tmp/outputs"
    fi
    if [[ $mode == session && $r == 0 ]]; then  # outputs must agree with ONNX Runtime's
      "$PY" -c 'import json, sys; d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]).get("max_abs_diff", {})
bad = {k: v for k, v in d.items() if not v <= 1e-3}
sys.exit("bench_runtime: %s differs from ONNX Runtime: %s" % (sys.argv[2], bad) if bad else 0)' "$tmp/out.txt" "$m"
    fi
    rss+=("$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$tmp/time.txt")")
  done
  o=$(median "${ort[@]}"); q=$(median "${ours[@]}"); k=$(median "${rss[@]}")
  "$PY" -c "import sys; o, q, k = map(float, sys.argv[1:4]); print('%-22s %7s %6s %10.2f %10.2f %7.2f %10.1f  %s' % (sys.argv[4], sys.argv[5], sys.argv[7], o, q, q / o, k / 1024, sys.argv[6]))" \
    "$o" "$q" "$k" "$m" "$threads" "$mode" "$1"
done
done
}
echo "# $(date -u +%FT%TZ) $(nproc) cores, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, medians of $rounds alternating rounds of $repeat forwards"
if [[ $load != busy ]]; then table none; fi
if [[ $load != none ]]; then
  for ((c = 0; c < $(nproc); c++)); do (while :; do :; done) & busy+=($!); done
  table busy
  stop_busy
fi
