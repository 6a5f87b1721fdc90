#!/usr/bin/env bash
# A/B of qtool builds or environments on the shared benchmark models, alternating within each round.
#
# usage: scripts/bench_ab.sh [--models a,b] [--rounds R] [--repeat N] [--threads T] [--load none|busy]
#                           LABEL=SPEC [LABEL=SPEC ...]
#   SPEC is a qtool binary, `ort` (scripts/ort/ort_run.mjs), or ENV=VALUE[,ENV=VALUE]|BINARY to run the binary
#   with those variables set, e.g.  main=/work/main/build/bin/qtool  mine=build/bin/qtool
#   spin300=GOMP_SPINCOUNT=300|build/bin/qtool
# Every round runs each model with every SPEC in turn (`qtool run --repeat N --threads T --json`, the median of N
# forwards after a warm-up), so load that drifts hits all alike; prints per (model, LABEL) the median and the
# minimum over rounds, then the rounds. --load busy spins a busy loop on every core (nproc) meanwhile, as
# scripts/bench_runtime.sh --load busy does.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
models="mobilenetv2,ppocrv4-det,ppocrv4-rec,digits-vit,llama2c-aidreams-260k" rounds=5 repeat=10 threads=2 load=none
while [[ $# -gt 0 && $1 == --* ]]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    *) echo "bench_ab: unknown argument $1" >&2; exit 1 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "bench_ab: give at least one LABEL=SPEC" >&2; exit 1; }
shared="${QTOOL_SHARED_DIR:-$root/../shared}"
declare -A model_file=([mobilenetv2]=mobilenetv2-1.0-224-fp32.onnx [ppocrv4-det]=ppocrv4-det.onnx [ppocrv4-rec]=ppocrv4-rec.onnx
                       [digits-vit]=digits-vit.onnx [llama2c-aidreams-260k]=llama2c-aidreams-260k.onnx)
declare -A model_input=([mobilenetv2]="input=mobilenetv2_chelsea.npy" [ppocrv4-det]="x=ppocrdet_ocr_en-01.npy"
                        [ppocrv4-rec]="x=ppocrrec_rendered_line0.npy" [digits-vit]="pixel_values=digits_test64.npy"
                        [llama2c-aidreams-260k]="input_ids=llama2c_eval32_first2.npy")
case "$load" in none|busy) ;; *) echo "bench_ab: --load must be none or busy, got '$load'" >&2; exit 1 ;; esac
out="$(mktemp)" busy=()
trap 'for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; rm -f "$out"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uptime | sed 's/.*load average/load average/'), threads=$threads, load=$load, $rounds rounds of $repeat forwards"
if [[ $load == busy ]]; then
  for ((c = 0; c < $(nproc); c++)); do (while :; do :; done) & busy+=($!); done
fi
IFS=, read -ra list <<< "$models"
for m in "${list[@]}"; do
  [[ -n "${model_file[$m]:-}" ]] || { echo "bench_ab: unknown model $m" >&2; exit 1; }
  file="$shared/models/${model_file[$m]}" input="${model_input[$m]%%=*}=$shared/data/tensors/${model_input[$m]#*=}"
  for ((r = 0; r < rounds; r++)); do
    for spec in "$@"; do
      label="${spec%%=*}" rest="${spec#*=}" envs=()
      if [[ $rest == *"|"* ]]; then IFS=, read -ra envs <<< "${rest%|*}"; rest="${rest##*|}"; fi
      if [[ $rest == ort ]]; then
        ms=$(env "${envs[@]}" node "$root/scripts/ort/ort_run.mjs" "$file" --input "$input" --threads "$threads" \
               --repeat "$repeat" | grep -o '"latency_ms":{"median":[0-9.]*' | cut -d: -f3)
      else
        ms=$(env "${envs[@]}" "$rest" run "$file" --input "$input" --threads "$threads" --repeat "$repeat" --json |
               grep -o '"median_ms":[0-9.]*' | cut -d: -f2)
      fi
      echo "$m $label $ms" >> "$out"
    done
  done
done
/usr/bin/python3 "$root/scripts/bench/ab_summary.py" "$out"
