#!/usr/bin/env bash
# The CUDA target builds: colossal-compile --target cuda emits each fixture's
# step on device tensors and nvcc builds DIR/model_train against the CUDA
# runtime. Without a GPU (CI) the program must refuse to start with a clear
# error, not crash. Two builds use 16-bit precisions (values rounded to bf16
# or fp16 on the device; fp16 with loss scaling), one is data parallel over
# two GPUs with ZeRO-2 (the trainer's collectives), one with ZeRO-3 (weights
# gathered as the step reads them), one over four with ZeRO-1; one offloads
# the optimizer, one recomputes every layer, and one draws dropout masks from
# the step's randomness (GPT-2 with dropout inside its fused attention, its
# heads over two GPUs); five split the model over two GPUs (tensor
# parallelism, Megatron sequence parallelism, all-to-all and ring attention)
# and one over a tensor and a sequence axis of two each; one is a 2 x 2 tensor
# grid (2D, SUMMA's products staged through host memory);
# one reads its large constants from beside the program; two are pipelines
# (1F1B over two GPUs, and the interleaved schedule with two chunks each).
# The device run is tools/gpu-check.sh's job.
#
#   cuda_programs_build.sh COLOSSAL_COMPILE FIXTURES WORKDIR
set -uo pipefail
compiler=$1 fixtures=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
status=0
for build in mlp:fp32 gpt2:fp32 bert:fp32 llama:fp32 gpt2:bf16 llama:fp16 gpt2:fp32:zero2 gpt2:fp32:zero3 \
             llama:fp32:zero1 bert:fp32:offload gpt2:fp32:recompute special/dropout_gpt2:fp32:tp2 \
             gpt2:fp32:tp2 bert:fp32:tp2 gpt2:fp32:megatron llama:fp32:ulysses gpt2:fp32:ring llama_4heads:fp32:tpsp \
             gpt2_4heads:fp32:grid2d gpt2:fp32:tesseract llama:fp32:cube \
             special/large_constants:fp32 gpt2:fp32:pp2 gpt2_4layers:fp32:interleaved; do
  IFS=: read -r model precision strategy <<< "$build"
  dir=$work/${model//\//-}-$precision${strategy:+-$strategy}
  # The MLP's file fixes its batch at 4, large_constants' (constants read
  # from beside the program) at 32.
  case $model in mlp) batch=4 ;; special/large_constants) batch=32 ;; *) batch=2 ;; esac
  extra=(--precision "$precision" --batch "$batch")
  # Data parallel with ZeRO over two GPUs (four for stage 1): the batch is global.
  case $strategy in
    zero1) extra+=(--gpus 4 --strategy zero=1 --batch 4) ;;
    zero*) extra+=(--gpus 2 --strategy "zero=${strategy#zero}" --batch 4) ;;
    offload) extra+=(--gpus 2 --strategy zero=2,offload=optimizer --batch 4) ;;
    recompute) extra+=(--strategy recompute=full) ;;
    # Tensor and sequence parallelism over two GPUs (DeviceCollectives.h).
    tp2) extra+=(--gpus 2 --strategy tp=2) ;;
    megatron) extra+=(--gpus 2 --strategy tp=2,sp_mode=megatron) ;;
    ulysses) extra+=(--gpus 2 --strategy sp=2,sp_mode=all-to-all) ;;
    ring) extra+=(--gpus 2 --strategy sp=2,sp_mode=ring) ;;
    tpsp) extra+=(--gpus 4 --strategy tp=2,sp=2,sp_mode=all-to-all) ;;
    grid2d) extra+=(--gpus 4 --strategy tp=4,tp_mode=2d) ;;
    tesseract) extra+=(--gpus 8 --strategy tp=8,tp_mode=2.5d,tp_depth=2 --batch 4) ;;
    cube) extra+=(--gpus 8 --strategy tp=8,tp_mode=3d --batch 4) ;;
    # Pipelines: stage functions on device tensors; the trainer runs them in
    # the schedule's order and sends between stages.
    pp2) extra+=(--gpus 2 --strategy pp=2,microbatches=2) ;;
    interleaved) extra+=(--gpus 2 --strategy pp=2,schedule=interleaved,virtual_stages=2,microbatches=2) ;;
  esac
  [ -f "$fixtures/$model/trainable.txt" ] && extra+=(--trainable "$fixtures/$model/trainable.txt")
  model_file=$fixtures/$model/${model}_opset17.onnx
  [ -f "$model_file" ] || model_file=$fixtures/$model.onnx
  if ! "$compiler" "$model_file" --seq 8 --target cuda -o "$dir" \
      --quiet "${extra[@]}" 2> "$dir.err"; then
    echo "FAIL: $build: colossal-compile --target cuda failed"; tail -20 "$dir.err"; status=1; continue
  fi
  grep -q "using namespace colossal::rt::device;" "$dir/train_step.cpp" ||
    { echo "FAIL: $build: the source does not use device tensors"; status=1; }
  if nvidia-smi -L > /dev/null 2>&1; then
    echo "$build: built (a GPU is present; run tools/gpu-check.sh to train on it)"
    continue
  fi
  "$dir/model_train" --steps 1 --quiet > "$dir.out" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && grep -q "error:" "$dir.out"; then
    echo "$build: built; without a GPU it refuses to start: $(head -1 "$dir.out")"
    # --help needs no GPU.
    "$dir/model_train" --help > "$dir.help" 2>&1 && grep -q -- "--steps" "$dir.help" ||
      { echo "FAIL: $build: --help without a GPU: $(head -3 "$dir.help")"; status=1; }
  else
    echo "FAIL: $build: without a GPU, expected exit 1 with an error, got $rc: $(cat "$dir.out")"; status=1
  fi
done
exit $status
