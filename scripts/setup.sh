#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the fixture generator need.
# Safe to run twice; needs root (or sudo) and the Debian package mirror.
set -euo pipefail

packages=(
  # build
  cmake ninja-build g++ git
  # MLIR / LLVM 22 (shared libMLIR.so, FileCheck, lit, mlir-tblgen)
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  # clang for the sanitizer builds and the libFuzzer target
  clang-22 libclang-rt-22-dev
  # ONNX protobuf model format
  libprotobuf-dev protobuf-compiler libonnx-dev
  # tests
  libgtest-dev libgmock-dev libonnx-testdata
  # fixture generator (run with /usr/bin/python3, never at the product's run time)
  python3-torch python3-onnx python3-numpy
  # runtime: MPI and a CPU BLAS
  libopenmpi-dev openmpi-bin libopenblas-dev
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
