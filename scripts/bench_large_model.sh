#!/usr/bin/env bash
# Big-model benchmark (issue 14): generates a Llama-shaped float model with external data (scripts/make_llama.py,
# random weights), then measures, each with /usr/bin/time: `qtool convert` (external -> external: reading and
# writing the bytes, the floor for any pass over the model) and int4 weight-only `qtool quantize`
# (configs/examples/int4-weights.json): wall time and peak RSS. Checks the quantized model in ONNX Runtime 1.30
# (graph optimizations 'basic'; 'all' computes int4 MatMuls with int8 activations) against `qtool run`.
#
# usage: scripts/bench_large_model.sh [SIZE_MB (default 3072)] [WORK_DIR (default: a temporary folder, removed)]
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-3072}
work=${2:-$(mktemp -d)}
[[ -n "${2:-}" ]] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
qtool=build/bin/qtool
[[ -x $qtool ]] || { echo "bench_large_model: build first (cmake --build build)" >&2; exit 2; }
/usr/bin/python3 scripts/make_llama.py "$work/model.onnx" --size-mb "$size"
/usr/bin/python3 -c "import numpy as np; np.save('$work/ids.npy', np.array([[1, 5, 9, 200, 7, 3, 2, 1000]], dtype=np.int64))"
measure() {  # label, command...: prints "label: S s, peak RSS M MiB"
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >/dev/null
  read -r secs kb <"$work/time.txt"
  last_secs=$secs
  printf '%-28s %7.2f s   peak RSS %6d MiB\n' "$label" "$secs" $((kb / 1024))
}
bytes=$(stat -c %s "$work/model.onnx.data")
echo "model: $((bytes >> 20)) MiB of float weights in external data"
measure "convert (copy the bytes)" $qtool convert "$work/model.onnx" -o "$work/copy.onnx" --external-data always
convert_secs=$last_secs
rm -f "$work/copy.onnx" "$work/copy.onnx.data"
# Weight-only round to nearest needs no activation ranges: no table, no samples.
measure "quantize int4 weight-only" $qtool quantize "$work/model.onnx" --config configs/examples/int4-weights.json \
  -o "$work/q.onnx"
/usr/bin/python3 -c "print(f'quantize / convert time: {$last_secs / max($convert_secs, 0.01):.2f}')"
echo "quantized: $(( $(stat -c %s "$work/q.onnx.data") >> 20 )) MiB in external data"
node scripts/ort/ort_run.mjs "$work/q.onnx" --input "input_ids=$work/ids.npy" --output-dir "$work/ort" --opt-level basic >/dev/null
$qtool run "$work/q.onnx" --input "input_ids=$work/ids.npy" -o "$work/own" >/dev/null
/usr/bin/python3 -c "
import numpy as np
o, q = np.load('$work/ort/logits.npy'), np.load('$work/own/logits.npy')
print(f'ORT 1.30 vs qtool run on the quantized model: max |diff| {np.abs(o - q).max():.3g} (max |logit| {np.abs(o).max():.3g})')"
