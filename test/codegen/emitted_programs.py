#!/usr/bin/env python3
"""Emitted host programs train exactly like PyTorch.

For every fixture: colossal-compile -o DIR builds DIR/model_train; its step
log over ten steps of SGD, AdamW, LAMB and LARS on the fixture's batch must
equal PyTorch's losses (reference.json) to 1e-5 relative at every step. Then:
microbatches accumulate to the full batch's trajectory; a run resumed from a
checkpoint ends bit for bit where an uninterrupted one does; bad input is a
clear error and a nonzero exit.

  emitted_programs.py COMPILER FIXTURES WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

COMPILER, FIXTURES, WORK = sys.argv[1:4]
MODELS = ["mlp", "cnn", "gpt2", "bert", "llama", "vit"]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def compile_model(model, out, *extra):
    args = [COMPILER, f"{FIXTURES}/{model}/{model}_opset17.onnx", "-o", out, "--quiet", "--batch", "2", "--seq", "8"]
    trainable = f"{FIXTURES}/{model}/trainable.txt"
    if os.path.exists(trainable):
        args += ["--trainable", trainable]
    return subprocess.run(args + list(extra), capture_output=True, text=True)


def train(program, *args):
    return subprocess.run([f"{program}/model_train", "--quiet", *args], capture_output=True, text=True)


def optimizer_flags(name, hyper):
    flags = ["--optimizer", name, "--lr", str(hyper["lr"]), "--weight-decay", str(hyper["weight_decay"])]
    for key in ("eps", "momentum", "eta"):
        if key in hyper:
            flags += ["--" + key, str(hyper[key])]
    if "betas" in hyper:
        flags += ["--beta1", str(hyper["betas"][0]), "--beta2", str(hyper["betas"][1])]
    if hyper.get("nesterov"):
        flags.append("--nesterov")
    return flags


def losses(log):
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


def worst_relative(got, want):
    return max(abs(g - w) / abs(w) for g, w in zip(got, want)) if len(got) == len(want) else float("inf")


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# 1. Trajectories against PyTorch.
print(f"{'model':8} {'optimizer':9} {'worst relative loss error over 10 steps':>40}")
for model in MODELS:
    out = f"{WORK}/{model}"
    built = compile_model(model, out)
    check(built.returncode == 0, f"{model}: colossal-compile failed: {built.stderr[-2000:]}")
    if built.returncode:
        continue
    reference = json.load(open(f"{FIXTURES}/{model}/reference.json"))
    for name, hyper in reference["hyper_parameters"].items():
        log = f"{WORK}/{model}-{name}.log"
        run = train(out, "--feed", f"{FIXTURES}/{model}/feed", "--log", log, *optimizer_flags(name, hyper))
        check(run.returncode == 0, f"{model} {name}: model_train failed: {run.stderr[-2000:]}")
        if run.returncode:
            continue
        error = worst_relative(losses(log), reference["losses"][name])
        print(f"{model:8} {name:9} {error:40.2e}")
        check(error <= 1e-5, f"{model} {name}: losses differ from PyTorch's by {error:.2e} relative")

# 2. Two microbatches of one sample accumulate to the batch of two.
reference = json.load(open(f"{FIXTURES}/gpt2/reference.json"))
out = f"{WORK}/gpt2-microbatches"
built = compile_model("gpt2", out, "--microbatches", "2")
check(built.returncode == 0, f"gpt2 --microbatches 2: {built.stderr[-2000:]}")
run = train(out, "--feed", f"{FIXTURES}/gpt2/feed", "--log", f"{out}.log",
            *optimizer_flags("adamw", reference["hyper_parameters"]["adamw"]))
check(run.returncode == 0, f"gpt2 microbatches: {run.stderr[-2000:]}")
if run.returncode == 0:
    error = worst_relative(losses(f"{out}.log"), reference["losses"]["adamw"])
    print(f"gpt2, 2 microbatches of 1, adamw: worst relative error {error:.2e}")
    check(error <= 1e-5, f"gpt2 microbatches: losses differ from the full batch's by {error:.2e}")

# 3. Resume: 10 steps == 5 steps, save, resume, 5 steps, bit for bit.
gpt2 = f"{WORK}/gpt2"
feed = ["--feed", f"{FIXTURES}/gpt2/feed"]
whole = train(gpt2, *feed, "--steps", "10", "--save", f"{WORK}/ck-whole", "--log", f"{WORK}/whole.log")
first = train(gpt2, *feed, "--steps", "5", "--save", f"{WORK}/ck-half")
second = train(gpt2, *feed, "--steps", "10", "--resume", f"{WORK}/ck-half", "--save", f"{WORK}/ck-resumed",
               "--log", f"{WORK}/resumed.log")
check(whole.returncode == first.returncode == second.returncode == 0,
      f"resume runs failed: {whole.stderr}{first.stderr}{second.stderr}")
shard = "rank-00000-of-00001.safetensors"
same = open(f"{WORK}/ck-whole/{shard}", "rb").read() == open(f"{WORK}/ck-resumed/{shard}", "rb").read()
print(f"resume: weights and optimizer state after 10 steps and after 5 + resume + 5 are "
      f"{'identical' if same else 'DIFFERENT'}")
check(same, "the resumed run's checkpoint differs from the uninterrupted run's")
whole_losses, resumed_losses = losses(f"{WORK}/whole.log"), losses(f"{WORK}/resumed.log")
check(whole_losses[5:] == resumed_losses, f"resumed losses {resumed_losses} differ from {whole_losses[5:]}")

# 4. Bad input: a clear error naming it, and a nonzero exit.
bad = f"{WORK}/bad-feed"
os.makedirs(bad)
shutil.copy(f"{FIXTURES}/gpt2/feed/labels.npy", f"{bad}/labels.npy")
shutil.copy(f"{FIXTURES}/mlp/feed/x.npy", f"{bad}/input_ids.npy")
corrupt = f"{WORK}/ck-corrupt"
shutil.copytree(f"{WORK}/ck-half", corrupt)
with open(f"{corrupt}/{shard}", "r+b") as f:
    f.seek(200)
    f.write(b"\xff\xff\xff\xff")
open(f"{WORK}/a-file", "w").write("x")
cases = [
    ("feed of the wrong dtype", train(gpt2, "--feed", bad), "input_ids.npy: holds f32; graph input 'input_ids'"),
    ("missing feed file", train(gpt2, "--feed", f"{WORK}"), "no file for graph input 'input_ids'"),
    ("corrupt checkpoint", train(gpt2, *feed, "--resume", corrupt), "does not match index.json"),
    ("checkpoint of another optimizer", train(gpt2, *feed, "--resume", f"{WORK}/ck-half", "--optimizer", "sgd"),
     "was trained with lamb"),
    ("unknown flag", train(gpt2, "--stpes", "3"), "--stpes: unknown flag"),
    ("-o naming a file", compile_model("mlp", f"{WORK}/a-file"), "exists and is not a directory"),
    ("more than one rank", compile_model("mlp", f"{WORK}/x", "--gpus", "2"), "single-rank programs only"),
    ("16-bit host program", compile_model("mlp", f"{WORK}/x", "--precision", "bf16"), "trains in fp32"),
]
shutil.copy(f"{FIXTURES}/mlp/feed/labels.npy", f"{bad}/input_ids.npy")
cases.append(("feed of the wrong shape", train(gpt2, "--feed", bad), "has shape [4]; graph input 'input_ids' takes [2, 8]"))
for what, result, message in cases:
    ok = result.returncode != 0 and message in result.stderr
    print(f"bad input, {what}: {'refused' if ok else 'NOT REFUSED AS EXPECTED'}: {result.stderr.strip()[:160]}")
    check(ok, f"{what}: expected a failure saying '{message}', got {result.returncode}: {result.stderr}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
