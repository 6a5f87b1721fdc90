#!/bin/bash
# Quantize / dequantize throughput of lib/numerics (elements per second) on a 64 M-element tensor, 1 and 2 threads.
# usage: scripts/bench_quant.sh [BUILD_DIR] [extra bench_quant args, e.g. --elements 16777216 --repeat 5]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j2 --target bench_quant > /dev/null
exe=$(find "$build" -name bench_quant -type f -perm -u+x | head -1)
"$exe" "$@"
