#!/usr/bin/env bash
# The CUDA variant (docs/cuda.md): configures build-cuda/ with QTOOL_CUDA=ON, builds qtool and the device tests,
# and runs them: the CUDA kernels' per-thread code through the emulated launch grid, --device without a GPU, and
# the GPU checks, which skip (CTest "Skipped") when no device is present. Exits 0 with a note when the CUDA toolkit
# (nvcc, cuBLAS, cuDNN) is not installed: the CPU build never needs it.
# usage: scripts/build_cuda.sh
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [[ ! -x $nvcc ]] && ! command -v nvcc >/dev/null; then
  echo "build_cuda: no CUDA toolkit (nvcc) here; the CUDA variant is not built"
  exit 0
fi
jobs=$(nproc 2>/dev/null || echo 2)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DQTOOL_CUDA=ON "${launcher[@]}"
cmake --build build-cuda -j"$jobs" --target qtool test_calib test_device test_kernels gpu_check
echo "build_cuda: built in $(( $(date +%s) - start )) s"
cd build-cuda
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
ctest --output-on-failure -j"$jobs" -R 'emulated|^device:|cuDNN'
