#!/bin/bash
# Benchmark qtool's int8 QDQ models in ONNX Runtime 1.30: int8/fp32 latency (same threads, median) and the
# share of Conv/MatMul/Gemm turned into integer kernels, per shared model; plus qtool vs vendor int8 mobilenetv2.
# usage: scripts/bench_quantize.sh [--threads N] [--repeat N] [--models a,b]   (build qtool first)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec /usr/bin/python3 "$here/bench_quantize.py" "$@"
