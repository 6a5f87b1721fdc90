#!/usr/bin/env bash
# Installs everything qtool needs to build and test, from Debian bookworm packages.
# Usage: scripts/install-deps.sh            (as root; sudo is used when not root)
# Set QTOOL_SKIP_APT=1 to skip when the packages are known to be present.
# CUDA is optional and not installed here: CMake turns QTOOL_CUDA on when it finds nvcc, cuBLAS and cuDNN (the
# CUDA toolkit in /usr/local/cuda); scripts/build_cuda.sh builds that variant (docs/cuda.md).
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libcli11-dev libspdlog-dev nlohmann-json3-dev catch2
  libopenblas-dev zlib1g-dev libre2-dev
  libdnnl-dev ocl-icd-opencl-dev  # oneDNN (its CMake package needs the OpenCL headers): the Conv shape classes where it is faster (docs/interpreter.md); optional for the build
  python3-onnx python3-numpy python3-torch
  python3-pil fonts-dejavu-core
  libonnx-testdata
  nodejs npm
  chromium  # renders the HTML report in its test (tests/report)
  clang libclang-rt-dev libomp-dev  # scripts/fuzz.sh: libFuzzer, ASan/UBSan runtimes, OpenMP for clang
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from outside Debian's packages (e.g. a preinstalled Node 20): accept a working node.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

if [[ ${#missing[@]} -eq 0 || "${QTOOL_SKIP_APT:-0}" == 1 ]]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
