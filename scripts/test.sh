#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the release build (unit, lit,
# ONNX node conformance), the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer, and the importer fuzzer for a bounded time.
#
#   scripts/test.sh              everything
#   scripts/test.sh --quick      the release build and its tests only
#
# FUZZ_RUNS, FUZZ_SEED and FUZZ_SECONDS (defaults 80000, 1, 60) shape the fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

bash scripts/setup.sh

echo "== release build"
cmake -S . -B build -G Ninja
cmake --build build -j "$jobs"
if grep -q "^COLOSSAL_CUDA:BOOL=ON" build/CMakeCache.txt; then
  echo "CUDA runtime compiled with $(/usr/local/cuda/bin/nvcc --version | tail -1) (sm_80, sm_90)"
else
  echo "note: nvcc not found; the CUDA runtime was not compiled"
fi
ctest --test-dir build --output-on-failure -j "$jobs"

[ "$quick" = 1 ] && exit 0

echo "== sanitizer build (ASan + UBSan, clang 22)"
CC=clang-22 CXX=clang++-22 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCOLOSSAL_SANITIZE=ON -DCOLOSSAL_FUZZ=ON -DCOLOSSAL_CUDA=OFF
cmake --build build-asan -j "$jobs"
# LLVM's allocator poisons the slabs it starts when built with ASan;
# Debian's libMLIR, built without it, never unpoisons what it hands out of
# a slab our code started. compiler/lib/CMakeLists.txt keeps the one place
# that did so (the dist attributes' storage) out of ASan; the option guards
# any other inline allocation from libMLIR's allocators.
ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"

# A fixed seed and run count bound CI's fuzzing; libFuzzer's path still
# depends on the binary, so a finding is printed and kept for replay (and
# becomes a regression test). FUZZ_SEED and FUZZ_RUNS explore further.
echo "== fuzzing the ONNX importer: ${FUZZ_RUNS:-80000} runs, seed ${FUZZ_SEED:-1}, at most ${FUZZ_SECONDS:-60} s"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp test/fixtures/*/*.onnx "$corpus"/
log="$corpus/fuzz.log"
if ! (cd "$corpus" && "$OLDPWD"/build-asan/tools/fuzz/onnx-import-fuzzer "$corpus" \
      -seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-80000}" -max_total_time="${FUZZ_SECONDS:-60}" \
      -rss_limit_mb=2048 -max_len=65536 -timeout=10 -print_final_stats=1 > "$log" 2>&1); then
  # Keep the input that failed (the corpus directory is removed on exit) and
  # print it as the seed it grew from plus the bytes that differ, so it can be
  # rebuilt and replayed (onnx-import-fuzzer FILE); the sanitizer's report is
  # printed last, where a truncated log still shows it. No pipe into head:
  # under pipefail a writer cut short would end the script with SIGPIPE.
  mkdir -p build-asan/fuzz-findings
  for finding in "$corpus"/crash-* "$corpus"/leak-* "$corpus"/timeout-* "$corpus"/oom-*; do
    [ -e "$finding" ] || continue
    cp "$finding" build-asan/fuzz-findings/
    echo "finding $(basename "$finding")"
    /usr/bin/python3 scripts/fuzz_finding_delta.py "$finding" test/fixtures/*/*.onnx || true
  done
  grep -E -A40 "ERROR|runtime error|out-of-memory" "$log" > "$corpus/report.txt" || tail -n 40 "$log" > "$corpus/report.txt"
  head -n 60 "$corpus/report.txt"
  echo "fuzzing: the importer crashed or a sanitizer reported (report above; copies in build-asan/fuzz-findings)"
  exit 1
fi
tail -n 4 "$log"
echo "fuzzing: no crash, leak or sanitizer report"
