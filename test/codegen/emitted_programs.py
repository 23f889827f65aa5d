#!/usr/bin/env python3
"""Emitted single-rank programs train exactly like PyTorch.

For every fixture: colossal-compile -o DIR builds DIR/model_train; its step
log over ten steps of SGD, AdamW, LAMB and LARS on the fixture's batch must
equal PyTorch's losses (reference.json) to 1e-5 relative at every step, and
its first-step gradients PyTorch's; so do class-weighted likelihood losses
(the nll fixture) and grouped-query attention (llama_gqa). Then: microbatches accumulate to the
full batch's trajectory; a run resumed from a checkpoint ends bit for bit
where an uninterrupted one does; full recomputation and optimizer offload
change no bit of the losses; bf16 and fp16 stay within 10 unit roundoffs of
the float32 trajectory, with fp16's dynamic loss scaling; bad input is a
clear error and a nonzero exit; constants too large for the source are read
from beside the program and train as a plain-Python evaluation of the graph.
emitted_parallel_programs.py covers several ranks.

  emitted_programs.py COMPILER FIXTURES WORKDIR MPIRUN
"""
import json
import os
import shutil
import subprocess
import math
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_checks import (  # noqa: E402
    check, check_refusals, compile_model, train, losses, worst_relative, worst_weight_error,
    check_model_states, check_step_peak, batch_data, check_gradients, check_replicas, check_offload, check_recompute,
    finish, COMPILER, FIXTURES, WORK,
    MODELS, shard, optimizer_flags, safetensors, OFFLOAD_HEADER, RECOMPUTE_HEADER)

# 1. Trajectories against PyTorch: the six models, the nll fixture
# (class-weighted NLL over a log-softmax with ignored labels under mean, sum
# and none) and a LLaMA with grouped-query attention (4 query heads over 2
# key/value heads, repeated as LLaMA 3 exports them).
fp32_errors = {}
print(f"{'model':8} {'optimizer':9} {'worst relative loss error over 10 steps':>40}")
for model in MODELS + ["nll", "llama_gqa"]:
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
        states = json.load(open(f"{out}/manifest.json"))["predicted_model_state_bytes_per_rank_by_optimizer"][name]
        check_model_states(log, states, f"{model} {name} x1")
        if name == "lamb":
            check_step_peak(log, out, model)
        fp32_errors[model, name] = error
        check(error <= 1e-5, f"{model} {name}: losses differ from PyTorch's by {error:.2e} relative")

# 1b. First-step gradients against PyTorch's (the fixtures' grads/*.npy):
# within 1e-5 per tensor (relative L2); tensors whose gradient is rounding
# noise in both (zero in exact arithmetic: BERT's and GPT-2's key biases
# cannot change the softmax) within 1e-6 of the largest tensor's norm.
for model in MODELS + ["nll", "llama_gqa"]:
    check_gradients(f"{WORK}/{model}", model, None, 0, model)

# 2. Two microbatches of one sample accumulate to the batch of two.
reference = json.load(open(f"{FIXTURES}/gpt2/reference.json"))
out = f"{WORK}/gpt2-microbatches"
built = compile_model("gpt2", out, "--microbatches", "2")
check(built.returncode == 0, f"gpt2 --microbatches 2: {built.stderr[-2000:]}")
check_gradients(out, "gpt2", None, 0, "gpt2-microbatches")
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

print(RECOMPUTE_HEADER)
for model in ["gpt2", "bert", "llama", "vit"]:
    for granularity in ["full", "selective"]:
        check_recompute(model, "x1", f"{FIXTURES}/{model}/feed", [], f"{WORK}/{model}", "{model}-{name}.log", 2,
                        granularity)
print(OFFLOAD_HEADER)
check_offload("gpt2", 1)

# 4. Mixed precision: matmuls, convolutions and attention compute in bf16 or
# fp16 (float32 rounded to the 16-bit type after each op), norms, softmax and
# the loss in float32, over float32 master weights. No PyTorch run rounds at
# the same places, so the reference is PyTorch's float32 trajectory, in units
# of the format's unit roundoff u (2^-9 for bf16, 2^-12 for fp16): every step
# within 10u. And the rounding is real: for every model and optimizer the
# fp16 program is farther from PyTorch than the fp32 one, and bf16 farther
# still. fp16's default loss scale (2^16) never overflows these models.
UNIT_ROUNDOFF = {"fp16": 2.0 ** -12, "bf16": 2.0 ** -9}
print(f"{'model':8} {'optimizer':9} {'fp32':>9} {'fp16':>9} {'bf16':>9}  worst relative loss error vs PyTorch (fp32)")
for model in MODELS:
    reference = json.load(open(f"{FIXTURES}/{model}/reference.json"))
    errors = {}
    for precision in UNIT_ROUNDOFF:
        out = f"{WORK}/{model}-{precision}"
        built = compile_model(model, out, "--precision", precision)
        check(built.returncode == 0, f"{model} --precision {precision}: {built.stderr[-2000:]}")
        if built.returncode:
            continue
        for name, hyper in reference["hyper_parameters"].items():
            log = f"{out}-{name}.log"
            run = train(out, "--feed", f"{FIXTURES}/{model}/feed", "--log", log, *optimizer_flags(name, hyper))
            check(run.returncode == 0, f"{model} {precision} {name}: {run.stderr[-2000:]}")
            if run.returncode:
                continue
            records = [json.loads(line) for line in open(log)]
            check(not any(r.get("skipped") for r in records), f"{model} {precision} {name}: a step was skipped")
            errors[precision, name] = worst_relative([r["loss"] for r in records], reference["losses"][name])
            bound = 10 * UNIT_ROUNDOFF[precision]
            check(errors[precision, name] <= bound,
                  f"{model} {precision} {name}: losses {errors[precision, name]:.2e} from PyTorch's, over 10u = {bound:.2e}")
    for name in reference["hyper_parameters"]:
        e32, e16, ebf = fp32_errors.get((model, name)), errors.get(("fp16", name)), errors.get(("bf16", name))
        if None in (e32, e16, ebf):
            continue
        print(f"{model:8} {name:9} {e32:9.2e} {e16:9.2e} {ebf:9.2e}")
        check(e32 < e16 < ebf, f"{model} {name}: errors fp32 {e32:.2e}, fp16 {e16:.2e}, bf16 {ebf:.2e} are not "
                               "ordered by the formats' precision (is the rounding in effect?)")

# Dynamic loss scaling. From 2^24 the scaled gradients overflow fp16: each
# such step is skipped (the weights stay: the loss repeats the first step's,
# bit for bit) and the scale halves until the gradients fit. The feed is one
# batch every step, so from then on, until the next skip, the run follows the
# default run (scale 2^16) shifted by the skipped steps: powers of two change
# no rounding but fp16's subnormals.
gpt2_fp16 = f"{WORK}/gpt2-fp16"
adamw = optimizer_flags("adamw", json.load(open(f"{FIXTURES}/gpt2/reference.json"))["hyper_parameters"]["adamw"])
run = train(gpt2_fp16, *feed, "--steps", "12", "--loss-scale", str(2 ** 24), "--log", f"{WORK}/scaled.log", *adamw)
check(run.returncode == 0, f"fp16 loss scaling: {run.stderr[-2000:]}")
if run.returncode == 0:
    records = [json.loads(line) for line in open(f"{WORK}/scaled.log")]
    k = next((i for i, r in enumerate(records) if not r["skipped"]), len(records))
    later = next((i for i in range(k, len(records)) if records[i]["skipped"]), len(records) - 1)
    default = losses(f"{gpt2_fp16}-adamw.log")
    check(0 < k < len(records), f"fp16: {k} of {len(records)} steps skipped from 2^24, expected some but not all")
    check(all(r["loss"] == records[0]["loss"] for r in records[:k + 1]), "fp16: a skipped step moved the weights")
    check([r["loss_scale"] for r in records[:k + 1]] == [2.0 ** (24 - i) for i in range(k + 1)],
          f"fp16: loss scales {[r['loss_scale'] for r in records]} do not halve from 2^24")
    shifted = worst_relative([r["loss"] for r in records[k:later + 1]], default[:later + 1 - k])
    print(f"fp16 loss scaling from 2^24: steps 1-{k} skipped, then scale {records[k]['loss_scale']:.0f}; steps "
          f"{k + 1}-{later + 1} follow the default run's first {later + 1 - k} within {shifted:.2e}")
    check(shifted <= 1e-5, f"fp16: after the skipped steps the run is {shifted:.2e} from the default run")

# The loss scale, its count of finite steps and the count of updates are
# in the checkpoint: skipping, backing off and growing resume bit for bit.
scaling = ["--loss-scale", str(2 ** 20), "--loss-scale-window", "2", *adamw]
whole = train(gpt2_fp16, *feed, "--steps", "10", *scaling, "--save", f"{WORK}/fp16-whole", "--log", f"{WORK}/fp16-whole.log")
first = train(gpt2_fp16, *feed, "--steps", "5", *scaling, "--save", f"{WORK}/fp16-half")
second = train(gpt2_fp16, *feed, "--steps", "10", *scaling, "--resume", f"{WORK}/fp16-half", "--save",
               f"{WORK}/fp16-resumed", "--log", f"{WORK}/fp16-resumed.log")
check(whole.returncode == first.returncode == second.returncode == 0,
      f"fp16 resume runs failed: {whole.stderr}{first.stderr}{second.stderr}")
if whole.returncode == first.returncode == second.returncode == 0:
    same = open(f"{WORK}/fp16-whole/{shard}", "rb").read() == open(f"{WORK}/fp16-resumed/{shard}", "rb").read()
    scales = lambda log: [(json.loads(line)["loss_scale"], json.loads(line)["skipped"]) for line in open(log)]
    whole_scales = scales(f"{WORK}/fp16-whole.log")
    print(f"fp16 resume (scale, skipped) per step {whole_scales}: weights after 10 and after 5 + resume + 5 "
          f"{'identical' if same else 'DIFFERENT'}")
    check(same and whole_scales[5:] == scales(f"{WORK}/fp16-resumed.log"), "fp16: the resumed run differs")
    check(any(s for _, s in whole_scales) and len(set(sc for sc, _ in whole_scales)) > 2,
          f"fp16: the resume case neither skipped nor grew the scale: {whole_scales}")

# Data parallel with ZeRO-2 on distinct rows: every rank sees the same
# completed gradient norm, so all skip the same steps (their copies of the
# weights end identical). The trajectory is one rank's up to fp16 rounding:
# each rank rounds its half batch's weight gradients to fp16 before the
# float32 reduction, one rank the whole batch's, so the bound is 10u. For the
# same reason a step whose gradients come within rounding of fp16's range can
# overflow on one side only: the runs are compared over the steps before
# their first different decision (both rerun that far for the weights).
for out, extra in [(f"{WORK}/gpt2-fp16-b4", []), (f"{WORK}/gpt2-fp16-zero2", ["--gpus", "2", "--strategy", "zero=2"])]:
    built = compile_model("gpt2", out, "--precision", "fp16", *extra, batch=4)
    check(built.returncode == 0, f"gpt2 fp16 {extra}: {built.stderr[-2000:]}")


def fp16_runs(steps):
    feed = batch_data("gpt2", 4)[0]
    one = train(f"{WORK}/gpt2-fp16-b4", "--feed", feed, "--loss-scale", str(2 ** 22), *adamw, "--steps", str(steps),
                "--log", f"{WORK}/fp16-1.log", "--save", f"{WORK}/fp16-1")
    many = train(f"{WORK}/gpt2-fp16-zero2", "--feed", feed, "--loss-scale", str(2 ** 22), *adamw, "--steps",
                 str(steps), "--log", f"{WORK}/fp16-n.log", "--save", f"{WORK}/fp16-n", ranks=2)
    check(one.returncode == 0 and many.returncode == 0, f"fp16 ZeRO-2: {one.stderr[-1500:]} {many.stderr[-1500:]}")
    return one.returncode == 0 and many.returncode == 0


if fp16_runs(10):
    skipped_one = [json.loads(line)["skipped"] for line in open(f"{WORK}/fp16-1.log")]
    skipped_many = [json.loads(line)["skipped"] for line in open(f"{WORK}/fp16-n.log")]
    agree = next((k for k, (a, b) in enumerate(zip(skipped_one, skipped_many)) if a != b), len(skipped_one))
    check(agree >= 6 and any(skipped_one[:agree]) and not all(skipped_one[:agree]),
          f"fp16 ZeRO-2: skipped {skipped_many}, one rank {skipped_one}: expected the same decisions over at least "
          "6 steps, some skipped but not all")
    if agree < len(skipped_one) and agree > 0:
        fp16_runs(agree)
    check_replicas(f"{WORK}/fp16-n", "fp16 ZeRO-2")
    loss_error = worst_relative(losses(f"{WORK}/fp16-n.log")[:agree], losses(f"{WORK}/fp16-1.log")[:agree])
    worst_weight, where = worst_weight_error(f"{WORK}/fp16-1/{shard}", f"{WORK}/fp16-n", 2, "gpt2", 4)
    print(f"fp16 ZeRO-2 on 2 ranks from scale 2^22: the same decisions over {agree} of 10 steps "
          f"({sum(skipped_many[:agree])} skipped); losses within {loss_error:.2e} of one rank's, weights within "
          f"{worst_weight:.2e} ({where}) after {agree} steps")
    bound = 10 * UNIT_ROUNDOFF["fp16"]
    check(loss_error <= bound and worst_weight <= bound,
          f"fp16 ZeRO-2: the trajectory differs from one rank's by more than 10u = {bound:.2e}")

# 5. Bad input: a clear error naming it, and a nonzero exit.
built = compile_model("gpt2", f"{WORK}/gpt2-dp2", "--gpus", "2", "--strategy", "dp=2")
check(built.returncode == 0, f"gpt2 --gpus 2: {built.stderr[-2000:]}")
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
    ("a 2-rank program started alone", train(f"{WORK}/gpt2-dp2", *feed), "compiled for 2 data-parallel ranks"),
    ("a 1-rank program under mpirun", train(gpt2, *feed, ranks=2), "compiled for 1 data-parallel rank"),
    # Data parallelism asked for explicitly (without a strategy the search
    # would split the model axis instead: dp=2 x tp=2 holds 6 samples).
    ("a batch that does not divide", compile_model("gpt2", f"{WORK}/x", "--gpus", "4", "--strategy", "dp=4", batch=6),
     "does not divide into 4 rank(s)"),
    ("an empty gradient bucket", train(gpt2, *feed, "--bucket-mb", "0"), "expects a positive number of MiB"),
    ("--loss-scale for a program without loss scaling", train(gpt2, *feed, "--loss-scale", "8"),
     "does not scale its loss (compile it with --precision fp16)"),
]
shutil.copy(f"{FIXTURES}/mlp/feed/labels.npy", f"{bad}/input_ids.npy")
cases.append(("feed of the wrong shape", train(gpt2, "--feed", bad), "has shape [4]; graph input 'input_ids' takes [2, 8]"))
check_refusals(cases)

# 6. Constants too large for the source (a 40 x 24 float matrix and a 32 x 24
# boolean mask) are read from constants.safetensors beside the program: the
# source holds no literal of them, the program trains as plain Python computes
# the graph (SGD, 3 steps), from another directory too, and without the
# file it stops naming it.
large = f"{WORK}/large-constants"
built = subprocess.run([COMPILER, f"{FIXTURES}/special/large_constants.onnx", "-o", large, "--quiet", "--batch", "32"],
                       capture_output=True, text=True)
check(built.returncode == 0, f"large_constants: colossal-compile failed: {built.stderr[-2000:]}")
if built.returncode == 0:
    source = open(f"{large}/train_step.cpp").read()
    check(max(len(line) for line in source.splitlines()) < 1000 and "programFloats" in source,
          "large_constants: the constants were written into the source")
    # The fixture's values (make_special_models.py), recomputed here.
    rows, features, width = 32, 40, 24
    w = [[0.2 * math.cos(0.29 * (i * width + j)) for j in range(width)] for i in range(features)]
    kernel = [[0.2 * math.sin(0.37 * (i * width + j) + 0.1) for j in range(width)] for i in range(features)]
    keep = [[(7 * r + 3 * j) % 10 < 7 for j in range(width)] for r in range(rows)]
    x = [[math.sin(1.3 * r + 0.7 * c) for c in range(features)] for r in range(rows)]
    os.makedirs(f"{WORK}/large-feed")
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, features)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(f"{WORK}/large-feed/x.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{rows * features}f", *[v for row in x for v in row]))
    x = [list(struct.unpack(f"<{features}f", struct.pack(f"<{features}f", *row))) for row in x]

    def matmul(a, b):
        return [[sum(a[r][i] * b[i][j] for i in range(len(b))) for j in range(len(b[0]))] for r in range(len(a))]

    k = matmul(x, kernel)
    want = []
    for _ in range(3):
        h = matmul(x, w)
        z = [[h[r][j] * k[r][j] if keep[r][j] else 0.0 for j in range(width)] for r in range(rows)]
        want.append(sum(v * v for row in z for v in row) / (rows * width))
        dh = [[2 * z[r][j] * k[r][j] / (rows * width) for j in range(width)] for r in range(rows)]
        w = [[w[i][j] - 0.1 * sum(x[r][i] * dh[r][j] for r in range(rows)) for j in range(width)]
             for i in range(features)]
    moved = f"{WORK}/large-constants-moved"
    shutil.copytree(large, moved)
    for program in (large, moved):
        log = f"{program}.log"
        run = train(program, "--feed", f"{WORK}/large-feed", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0",
                    "--weight-decay", "0", "--steps", "3", "--log", log)
        check(run.returncode == 0, f"large_constants: model_train failed: {run.stderr[-2000:]}")
        if run.returncode == 0:
            error = worst_relative(losses(log), want)
            print(f"large_constants ({os.path.basename(program)}): worst relative loss error vs plain Python {error:.2e}")
            check(error <= 1e-5, f"large_constants: losses differ from plain Python's by {error:.2e} relative")
    os.remove(f"{moved}/constants.safetensors")
    check_refusals([("a program without its constants file", train(moved, "--feed", f"{WORK}/large-feed"),
                     "constants.safetensors")])

finish()
