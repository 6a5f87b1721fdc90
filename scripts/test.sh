#!/usr/bin/env bash
# The whole test suite: installs dependencies if missing, builds (build/), runs every test with CTest.
# usage: scripts/test.sh [extra ctest args, e.g. -R inspect]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
cd build
# Tests run two at a time on few cores: GNU OpenMP's default spin-waiting then burns whole scheduler
# slices per parallel region (measured: mobilenetv2 2.5 s instead of 40 ms). Sleep-waiting avoids that.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
ctest --output-on-failure -j"$jobs" "$@"
