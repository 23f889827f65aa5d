#!/usr/bin/env python3
"""Programs that draw their own weights (--init): shape-only models build and train.

A shape-only GPT (colossal-model writes no weights) compiles with
`--init normal:0.02` on one rank, on two data-parallel ranks and on two
tensor-parallel ranks (a vocabulary of 101 rows the split pads): no weights
file is written, and each program draws its trainable parameters from the
run's seed, keyed by name and element. Checked: the weights the three plans
start from, exported before any step, are the same bytes; matrices and
embeddings are N(0, 0.02^2) by their moments, norm scales 1, biases 0; another
seed draws other weights; the first loss is ln(vocabulary), as small weights
give; two steps on two ranks follow one rank's; `--import` replaces
drawing (the drawn weights imported start the same run, another seed's
another). Without --init the
compiler refuses a shape-only model, naming the flag.

  init_programs.py COMPILER FIXTURES WORKDIR MPIRUN COLOSSAL_MODEL
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_checks import check, train, losses, worst_relative, finish, COMPILER, WORK  # noqa: E402
from fixture_runs import safetensors  # noqa: E402

COLOSSAL_MODEL = sys.argv[5]
VOCAB, STD = 101, 0.02
model = f"{WORK}/gpt.onnx"
made = subprocess.run([COLOSSAL_MODEL, "gpt", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "16",
                       "--vocab", str(VOCAB), "-o", model], capture_output=True, text=True)
check(made.returncode == 0, f"colossal-model failed: {made.stderr}")


def compile_shape_only(out, *extra):
    args = [COMPILER, model, "-o", out, "--quiet", "--batch", "4", "--seq", "16", *extra]
    return subprocess.run(args, capture_output=True, text=True)


# Without --init: a clear refusal that names the way out.
refused = compile_shape_only(f"{WORK}/no-init")
check(refused.returncode != 0 and "--init" in refused.stderr,
      f"a shape-only model without --init: expected a refusal naming --init, got {refused.returncode}: "
      f"{refused.stderr[-500:]}")

plans = {"1 rank": ([], 0), "dp=2": (["--gpus", "2", "--strategy", "dp=2"], 2),
         "tp=2": (["--gpus", "2", "--strategy", "tp=2"], 2)}
built = {}
for tag, (flags, ranks) in plans.items():
    out = f"{WORK}/{tag.replace(' ', '-').replace('=', '')}"
    run = compile_shape_only(out, "--init", f"normal:{STD}", *flags)
    check(run.returncode == 0, f"{tag}: colossal-compile --init failed: {run.stderr[-2000:]}")
    if run.returncode:
        continue
    check(not os.path.exists(f"{out}/weights.safetensors"), f"{tag}: a weights file was written")
    manifest = json.load(open(f"{out}/manifest.json"))
    check(manifest.get("init") == {"kind": "normal", "std": STD}, f"{tag}: manifest init {manifest.get('init')}")
    built[tag] = (out, ranks)

# The weights each plan starts from, exported before any step.
exported = {}
for tag, (out, ranks) in built.items():
    run = train(out, "--steps", "0", "--export", f"{out}-start", ranks=ranks)
    check(run.returncode == 0, f"{tag}: --steps 0 --export failed: {run.stderr[-1500:]}")
    if run.returncode == 0:
        exported[tag] = open(f"{out}-start/model.safetensors", "rb").read()
for tag, data in exported.items():
    same = data == exported.get("1 rank")
    print(f"{tag:8} starting weights {'identical to' if same else 'DIFFERENT from'} one rank's")
    check(same, f"{tag}: the drawn weights differ from one rank's")

if "1 rank" in built:
    out = built["1 rank"][0]
    tensors = safetensors(f"{out}-start/model.safetensors")
    kinds = {"normal": 0, "ones": 0, "zeros": 0}
    for name, values in tensors.items():
        n = len(values)
        if name.endswith("bias"):
            kinds["zeros"] += 1
            check(all(v == 0.0 for v in values), f"{name}: a bias starts nonzero")
        elif "norm" in name:
            kinds["ones"] += 1
            check(all(v == 1.0 for v in values), f"{name}: a norm scale starts other than 1")
        else:
            kinds["normal"] += 1
            mean = sum(values) / n
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
            # Sampling error: the mean within 5 standard errors, the standard
            # deviation within 5 of its own (STD / sqrt(2n)) and 3%.
            check(abs(mean) <= 5 * STD / math.sqrt(n), f"{name}: mean {mean:.3g} of {n} draws")
            check(abs(std - STD) <= max(5 * STD / math.sqrt(2 * n), 0.03 * STD),
                  f"{name}: standard deviation {std:.4g}, drawn from {STD}")
    print(f"drawn: {kinds['normal']} matrices N(0, {STD}^2), {kinds['ones']} norm scales 1, {kinds['zeros']} biases 0")
    check(kinds["normal"] >= 6 and kinds["ones"] >= 4 and kinds["zeros"] >= 8, f"roles found: {kinds}")

    other = train(out, "--steps", "0", "--seed", "1", "--export", f"{out}-seed1")
    check(other.returncode == 0 and open(f"{out}-seed1/model.safetensors", "rb").read() != exported.get("1 rank"),
          "another seed drew the same weights")

# Two steps: the first loss is ln(V) to within the small weights' effect; two
# ranks follow one.
logs = {}
for tag, (out, ranks) in built.items():
    run = train(out, "--steps", "2", "--log", f"{out}.log", ranks=ranks)
    check(run.returncode == 0, f"{tag}: training failed: {run.stderr[-1500:]}")
    if run.returncode == 0:
        logs[tag] = losses(f"{out}.log")
if "1 rank" in logs:
    first = logs["1 rank"][0]
    print(f"first loss {first:.5f}, ln({VOCAB}) = {math.log(VOCAB):.5f}")
    check(abs(first - math.log(VOCAB)) < 0.05, f"first loss {first} is not near ln({VOCAB})")
    for tag, got in logs.items():
        error = worst_relative(got, logs["1 rank"])
        print(f"{tag:8} losses {got} vs one rank: {error:.2e}")
        check(error <= 1e-5, f"{tag}: losses differ from one rank's by {error:.2e}")
    # Weights named on the command line replace drawing: the drawn weights
    # imported start the same run bit for bit, seed 1's another.
    out = built["1 rank"][0]
    same = train(out, "--steps", "2", "--import", f"{out}-start/model.safetensors", "--log", f"{out}-import0.log")
    other = train(out, "--steps", "2", "--import", f"{out}-seed1/model.safetensors", "--log", f"{out}-import1.log")
    check(same.returncode == 0 and other.returncode == 0,
          f"--import of drawn weights failed: {same.stderr[-1500:]} {other.stderr[-1500:]}")
    if same.returncode == 0 and other.returncode == 0:
        again, elsewhere = losses(f"{out}-import0.log"), losses(f"{out}-import1.log")
        print(f"--import: seed 0's drawn weights {again} (drawn: {logs['1 rank']}); seed 1's {elsewhere}")
        check(again == logs["1 rank"], "--import of the drawn weights does not start the same run")
        check(elsewhere[0] != logs["1 rank"][0], "--import of other weights did not replace the drawn ones")
finish()
