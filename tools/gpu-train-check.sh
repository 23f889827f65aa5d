#!/usr/bin/env bash
# Trains the emitted CUDA programs on a GPU and compares them with PyTorch
# (tools/gpu_train_check.py says what runs and the bounds).
#
# On a machine with colossal-compile (no GPU needed), build the programs and
# bundle the shared libraries a CUDA machine may lack (MPI, OpenBLAS):
#   tools/gpu-train-check.sh build DIR [--gpt2-124m MODEL.onnx]
# then, on the GPU machine (CUDA runtime and cuBLAS, python3 with numpy),
# from the repository root:
#   tools/gpu-train-check.sh run DIR [OUTPUT_DIR]
# OUTPUT_DIR (default $OUT, else DIR/results) receives cuda-training.json,
# every run's step log and the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:?build or run} dir=${2:?program directory}
if [ "$mode" = build ]; then
  exec python3 tools/gpu_train_check.py build "$dir" "${@:3}"
fi
out=${3:-${OUT:-$dir/results}}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt" ||
  { echo "gpu-train-check: nvidia-smi sees no GPU"; exit 2; }
# The CUDA runtime and cuBLAS from the toolkit, else from Python's wheels.
cuda_libs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  "$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)"/nvidia/*/lib 2>/dev/null | paste -sd:)
export LD_LIBRARY_PATH="$(cd "$dir" && pwd)/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(ldd "$dir"/*/model_train | grep "not found" | sort -u)
[ -z "$missing" ] || echo "gpu-train-check: unresolved libraries: $missing"
python3 tools/gpu_train_check.py run "$dir" "$out" 2>&1 | tee "$out/summary.txt"
exit "${PIPESTATUS[0]}"
