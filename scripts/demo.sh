#!/usr/bin/env bash
# Sets up a fresh machine, builds colossal-compile, compiles the bundled tiny
# GPT-2 (a PyTorch training export) into a training program and trains it:
# the model summary, the build of out/model_train, then twenty LAMB steps on
# the bundled batch with one JSON line per step.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)" --target colossal-compile

model=test/fixtures/gpt2/gpt2_opset17.onnx
out=build/demo/gpt2
rm -rf "$out"
echo
echo "\$ colossal-compile $model --batch 2 --seq 8 --optimizer lamb --lr 0.01 -o $out"
./build/tools/colossal-compile/colossal-compile "$model" --batch 2 --seq 8 --optimizer lamb --lr 0.01 -o "$out"
echo
echo "\$ $out/model_train --feed test/fixtures/gpt2/feed --steps 20 --log $out/steps.jsonl"
"$out/model_train" --feed test/fixtures/gpt2/feed --steps 20 --log "$out/steps.jsonl"
cat "$out/steps.jsonl"
echo
echo "Generated source: $out/train_step.cpp; settings: $out/manifest.json; $out/model_train --help lists the flags."
