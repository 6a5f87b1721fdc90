#!/usr/bin/env bash
# The whole test suite: installs dependencies if missing, builds (build/, CPU only), runs every test with CTest;
# then, where the CUDA toolkit is installed, builds the CUDA variant (build-cuda/) and runs its device tests (the
# emulated CUDA kernels; the GPU tests skip without a GPU). QTOOL_SKIP_CUDA=1 skips that second build.
# usage: scripts/test.sh [extra ctest args, e.g. -R inspect]  (with args: build/ only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQTOOL_CUDA=OFF
cmake --build build -j"$jobs"
cd build
# Test binaries and qtool choose OMP_WAIT_POLICY=PASSIVE themselves when it is unset (core/omp_wait.h);
# exporting it here only saves each of them one re-exec.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
if [[ $# -gt 0 ]]; then
  ctest --output-on-failure -j"$jobs" "$@"
  exit
fi
# Acceptance checks that still miss their bar with the default config carry the label `accuracy`
# (tests/quantize/tests.cmake, _qz_accept_open): they run and report first, without failing the suite, so the
# open gap stays visible; every other test is the gate and runs last.
ctest --output-on-failure -j"$jobs" -L accuracy || echo "test.sh: open accuracy checks above still miss their bars (issue 12)"
ctest --output-on-failure -j"$jobs" -LE accuracy
cd ..
[[ "${QTOOL_SKIP_CUDA:-0}" == 1 ]] || bash scripts/build_cuda.sh
