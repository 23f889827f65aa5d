#!/usr/bin/env bash
# The CUDA target builds: colossal-compile --target cuda emits each fixture's
# step on device tensors and nvcc builds DIR/model_train against the CUDA
# runtime. Without a GPU (CI) the program must refuse to start with a clear
# error, not crash. The device run is tools/gpu-check.sh's job.
#
#   cuda_programs_build.sh COLOSSAL_COMPILE FIXTURES WORKDIR
set -uo pipefail
compiler=$1 fixtures=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
status=0
for model in mlp gpt2 bert llama; do
  extra=()
  [ -f "$fixtures/$model/trainable.txt" ] && extra=(--trainable "$fixtures/$model/trainable.txt")
  if ! "$compiler" "$fixtures/$model/${model}_opset17.onnx" --batch 2 --seq 8 --target cuda -o "$work/$model" \
      --quiet "${extra[@]}" 2> "$work/$model.err"; then
    echo "FAIL: $model: colossal-compile --target cuda failed"; tail -20 "$work/$model.err"; status=1; continue
  fi
  grep -q "using namespace colossal::rt::device;" "$work/$model/train_step.cpp" ||
    { echo "FAIL: $model: the source does not use device tensors"; status=1; }
  if nvidia-smi -L > /dev/null 2>&1; then
    echo "$model: built (a GPU is present; run tools/gpu-check.sh to train on it)"
    continue
  fi
  "$work/$model/model_train" --steps 1 --quiet > "$work/$model.out" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && grep -q "error:" "$work/$model.out"; then
    echo "$model: built; without a GPU it refuses to start: $(head -1 "$work/$model.out")"
  else
    echo "FAIL: $model: without a GPU, expected exit 1 with an error, got $rc: $(cat "$work/$model.out")"; status=1
  fi
done
exit $status
