#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the release build (unit, lit,
# ONNX node conformance), the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer, and the importer fuzzer for a bounded time.
#
#   scripts/test.sh              everything
#   scripts/test.sh --quick      the release build and its tests only
#
# FUZZ_SECONDS (default 60) bounds the fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

bash scripts/setup.sh

echo "== release build"
cmake -S . -B build -G Ninja
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

[ "$quick" = 1 ] && exit 0

echo "== sanitizer build (ASan + UBSan, clang 22)"
CC=clang-22 CXX=clang++-22 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCOLOSSAL_SANITIZE=ON -DCOLOSSAL_FUZZ=ON
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan --output-on-failure -j "$jobs"

echo "== fuzzing the ONNX importer for ${FUZZ_SECONDS:-60} s"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp test/fixtures/*/*.onnx "$corpus"/
(cd "$corpus" && "$OLDPWD"/build-asan/tools/fuzz/onnx-import-fuzzer "$corpus" \
  -max_total_time="${FUZZ_SECONDS:-60}" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
  -print_final_stats=1 2>&1 | tail -n 4)
echo "fuzzing: no crash, leak or sanitizer report"
