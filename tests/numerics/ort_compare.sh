#!/bin/bash
# Generates Q/DQ cases, runs them in ONNX Runtime 1.30 and compares qtool's results bit for bit.
# usage: ort_compare.sh SOURCE_DIR WORK_DIR qdq_ort_compare
set -euo pipefail
src=$1 work=$2 compare=$3
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 "$src/scripts/gen_qdq_cases.py" "$work"
# shellcheck disable=SC2046
node "$src/scripts/ort/ort_run.mjs" "$work/qdq_cases.onnx" $(cat "$work/ort_args.txt") --output-dir "$work/ort" \
  --opt-level disabled > "$work/ort_run.json"
"$compare" "$work"
