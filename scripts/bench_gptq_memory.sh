#!/usr/bin/env bash
# GPTQ on a big model (issue 14): generates a Llama-shaped float model with external data (scripts/make_llama.py,
# random weights; dim 256, ffn 768, vocab 4000, so GPTQ's per-layer work stays small and the size comes from the
# layer count), then runs int4 weight-only GPTQ (configs/int4-weight-only.json) on one 64-token sample with each
# Hessian budget given (qtool quantize --gptq-memory MiB): wall time and peak RSS (/usr/bin/time), and checks that
# every budget writes the same bytes as the first.
#
# usage: scripts/bench_gptq_memory.sh [SIZE_MB (default 100)] [BUDGETS_MIB (default "512 16")] [WORK_DIR (default:
#        a temporary folder, removed)]
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-100}
budgets=${2:-512 16}
work=${3:-$(mktemp -d)}
[[ -n "${3:-}" ]] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
qtool=build/bin/qtool
[[ -x $qtool ]] || { echo "bench_gptq_memory: build first (cmake --build build)" >&2; exit 2; }
/usr/bin/python3 scripts/make_llama.py "$work/model.onnx" --size-mb "$size" --dim 256 --vocab 4000
/usr/bin/python3 -c "import numpy as np; np.save('$work/ids.npy', np.random.default_rng(2).integers(0, 4000, (1, 64)))"
first=
for b in $budgets; do
  mkdir -p "$work/$b"  # same file names in each folder: the model names its data file
  /usr/bin/time -f "%e %M" -o "$work/time.txt" $qtool quantize "$work/model.onnx" --config configs/int4-weight-only.json \
    --data "input_ids=$work/ids.npy" --gptq-memory "$b" -o "$work/$b/q.onnx" >/dev/null 2>"$work/log.txt"
  read -r secs kb <"$work/time.txt"
  same=
  if [[ -z $first ]]; then first=$b; else
    cmp -s "$work/$first/q.onnx.data" "$work/$b/q.onnx.data" && cmp -s "$work/$first/q.onnx" "$work/$b/q.onnx" \
      && same="  (same bytes as --gptq-memory $first)" || same="  (DIFFERS from --gptq-memory $first)"
  fi
  groups=$(grep -o 'in [0-9]* groups' "$work/log.txt" | grep -o '[0-9]*' || echo 1)
  printf 'gptq int4, --gptq-memory %5d MiB (%3d groups): %7.1f s   peak RSS %5d MiB%s\n' "$b" "$groups" "$secs" \
    $((kb / 1024)) "$same"
done
