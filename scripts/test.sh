#!/usr/bin/env bash
# The whole test suite: installs dependencies if missing, builds (build/, CPU only) and runs every test with CTest;
# then, where the CUDA toolkit is installed, builds the CUDA variant (build-cuda/) and runs its device tests (the
# emulated CUDA kernels; the GPU tests skip without a GPU; QTOOL_SKIP_CUDA=1 skips it); then builds with
# ASan+UBSan (build-asan/) and runs every test again (QTOOL_ASAN=0 skips that pass).
# usage: scripts/test.sh [extra ctest args, e.g. -R inspect]   (with arguments: the Release pass only)
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

# The same suite again on an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/; QTOOL_ASAN=0
# skips it). The sanitizers are compiled into qtool's own programs only: Python, node and ONNX Runtime run as
# in the Release pass and ignore the options below. Any report fails the test that hit it: ASan and UBSan stop
# at the first error (-fno-sanitize-recover, halt_on_error), LeakSanitizer checks at exit. The open accuracy
# checks only report (as above) and the gate is the rest. Timings: docs/fuzzing.md ("ASan+UBSan suite").
[[ "${QTOOL_ASAN:-1}" == 0 ]] && exit 0
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DQTOOL_SANITIZE=address,undefined -DQTOOL_CUDA=OFF "${launcher[@]}"
cmake --build build-asan -j"$jobs"
cd build-asan
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# Run in the Release pass only: tests labelled `complexity` time how work grows with graph size (the sanitizer
# slows every operation alike), `release_figures` compares printed figures with the Release build's, and
# `real_models` quantizes real npm models with their guard searches (tests/quantize/tests.cmake, tests/docs/tests.cmake).
ctest --output-on-failure -j"$jobs" -L accuracy || echo "test.sh (ASan): open accuracy checks above still miss their bars (issue 12)"
ctest --output-on-failure -j"$jobs" -LE "accuracy|complexity|release_figures|real_models"
