#!/usr/bin/env bash
# Trains the emitted CUDA programs on a GPU and compares them with PyTorch.
#
# On a machine with colossal-compile (no GPU needed), build the programs:
#   tools/gpu-train-check.sh build DIR
# then, on the GPU machine (CUDA and cuBLAS libraries, an MPI and OpenBLAS
# runtime, python3), from the repository root:
#   tools/gpu-train-check.sh run DIR [OUTPUT_DIR]
# Each fixture (mlp, gpt2, bert, llama) trains ten steps with SGD, AdamW,
# LAMB and LARS on its bundled batch; the losses must equal PyTorch's
# (reference.json) to 1e-5 relative. GPT-2 in bf16 and LLaMA in fp16 (16-bit
# numerics, docs/training-step.md) must stay within ten unit roundoffs.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:?build or run} dir=${2:?program directory}
fixtures=test/fixtures
if [ "$mode" = build ]; then
  compiler=${COLOSSAL_COMPILE:-build/tools/colossal-compile/colossal-compile}
  for build in mlp:fp32 gpt2:fp32 bert:fp32 llama:fp32 gpt2:bf16 llama:fp16; do
    model=${build%%:*} precision=${build##*:}
    name=$model
    [ "$precision" = fp32 ] || name=$model-$precision
    extra=(--precision "$precision")
    [ -f "$fixtures/$model/trainable.txt" ] && extra+=(--trainable "$fixtures/$model/trainable.txt")
    "$compiler" "$fixtures/$model/${model}_opset17.onnx" --batch 2 --seq 8 --target cuda -o "$dir/$name" --quiet \
      "${extra[@]}" || exit 1
  done
  exit 0
fi
out=${3:-${OUT:-$dir/results}}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt" || exit 2
python3 - "$dir" "$fixtures" "$out" <<'PY'
import json, subprocess, sys
sys.path.insert(0, "test/codegen")
from fixture_runs import optimizer_flags
programs, fixtures, out = sys.argv[1:4]
worst, lines, ok = 0.0, [], True
BOUND = {"fp32": 1e-5, "bf16": 10 * 2.0 ** -9, "fp16": 10 * 2.0 ** -12}
for model, precision in [("mlp", "fp32"), ("gpt2", "fp32"), ("bert", "fp32"), ("llama", "fp32"), ("gpt2", "bf16"),
                         ("llama", "fp16")]:
    program = model if precision == "fp32" else f"{model}-{precision}"
    reference = json.load(open(f"{fixtures}/{model}/reference.json"))
    for name, h in reference["hyper_parameters"].items():
        log = f"{out}/{program}-{name}.jsonl"
        args = [f"{programs}/{program}/model_train", "--feed", f"{fixtures}/{model}/feed", "--quiet", "--log", log,
                *optimizer_flags(name, h)]
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode:
            lines.append(f"{program} {name}: FAILED {run.stderr[-500:]}")
            ok = False
            continue
        got = [json.loads(line)["loss"] for line in open(log)]
        want = reference["losses"][name]
        # Every step must be there, and no more: a run that logged fewer
        # steps than PyTorch's trajectory has fails.
        if len(got) != len(want):
            lines.append(f"{program} {name}: FAILED: logged {len(got)} steps, the reference has {len(want)}")
            ok = False
            continue
        error = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        if precision == "fp32":
            worst = max(worst, error)
        ok &= error <= BOUND[precision]
        lines.append(f"{program:10} {name:6} worst relative loss error over 10 steps: {error:.2e} "
                     f"(bound {BOUND[precision]:.1e})")
lines.append(f"worst fp32 {worst:.2e}: {'passed' if ok else 'FAILED'}")
print("\n".join(lines))
open(f"{out}/cuda-programs.txt", "w").write("\n".join(lines) + "\n")
sys.exit(0 if ok else 1)
PY
