#!/usr/bin/env bash
# Builds the CUDA runtime on a machine with a GPU and checks it:
#   1. every device kernel and optimizer against the host kernels (which the
#      CPU test suite checks against float64 references), dropout masks bit
#      for bit, and GEMM/attention time against the FLOP floor;
#   2. the communication conformance suite on the NCCL backend (one rank per
#      visible GPU, at most 8);
#   3. colossal-bench on the GPU, writing a measured cluster description.
# Needs cmake, ninja or make, g++, nvcc with cuBLAS and NCCL, an MPI and a
# CPU BLAS (scripts/setup.sh installs them on Debian); not MLIR.
#
#   tools/gpu-check.sh [OUTPUT_DIR]     (default: $OUT, else build-gpu/results)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-build-gpu/results}}
mkdir -p "$out"
jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=4

for tool in cmake nvcc mpirun; do
  command -v "$tool" >/dev/null || [ -x /usr/local/cuda/bin/$tool ] || { echo "gpu-check: $tool is missing"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt" ||
  { echo "gpu-check: nvidia-smi sees no GPU"; exit 2; }
gpus=$(nvidia-smi --list-gpus | wc -l)
ranks=$(( gpus < 8 ? gpus : 8 ))

generator=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
echo "== building the runtime with CUDA ($generator)"
start=$(date +%s)
cmake -S . -B build-gpu -G "$generator" -DCOLOSSAL_RUNTIME_ONLY=ON -DCOLOSSAL_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=native > "$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$jobs" --target cuda-kernel-check comm-conformance-nccl colossal-bench \
  > "$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -20; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

status=0
echo "== device kernels against the host kernels, and timings"
build-gpu/test/runtime/cuda-kernel-check --json "$out/kernels.json" | tee "$out/kernels.txt" || status=1

echo "== communication conformance on NCCL ($ranks rank(s))"
mesh="dp=$ranks"
[ "$ranks" -ge 4 ] && mesh="dp=$((ranks / 2)),tp=2"
timeout 300 mpirun --oversubscribe --bind-to none -np "$ranks" build-gpu/test/runtime/comm-conformance-nccl \
  --backend nccl --mesh "$mesh" 2>&1 | tail -20 | tee "$out/nccl-conformance.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== colossal-bench on the GPU"
timeout 300 mpirun --oversubscribe --bind-to none -np "$ranks" build-gpu/tools/colossal-bench/colossal-bench \
  --device cuda --mesh "dp=$ranks" --name gpu-check -o "$out/cluster.json" 2>&1 | tee "$out/bench.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "gpu-check: $([ $status -eq 0 ] && echo passed || echo FAILED); results in $out"
exit $status
