#!/usr/bin/env bash
# Sets up a fresh machine, builds colossal-compile and runs it on the bundled
# tiny GPT-2 (a PyTorch training export): the model summary, then the raised
# program with attention, layer_norm, gelu and cross_entropy recognised.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)" --target colossal-compile

model=test/fixtures/gpt2/gpt2_opset17.onnx
echo
echo "\$ colossal-compile $model --batch 2 --seq 8 --emit=raised"
./build/tools/colossal-compile/colossal-compile "$model" --batch 2 --seq 8 --emit=raised
