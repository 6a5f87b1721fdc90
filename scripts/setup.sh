#!/usr/bin/env bash
# Quick start, step 1: installs dependencies, builds qtool, and runs it on a bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs" --target qtool
echo
echo "== qtool inspect models/tiny_conv.onnx"
./build/bin/qtool inspect models/tiny_conv.onnx
