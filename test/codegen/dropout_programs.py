#!/usr/bin/env python3
"""Dropout in emitted programs: every mask is a function of the run's seed, the
dropout site, the step and the element's place in the global batch.

On test/fixtures/special/dropout_mlp.onnx (two training-mode dropouts,
p = 0.25), dropout_attention.onnx (causal self-attention exported in
training mode: dropout on the attention weights and on the block's output)
encoder_layers.onnx (PyTorch's nn.TransformerEncoder of three layers,
dropout 0.1 in four places per layer, a key padding mask) and dropout_gpt2.onnx
(GPT-2 of 4 heads, dropout 0.1 on the attention probabilities and the MLP
output), whose attention is raised with its dropout (the fused kernels draw
the masks the unfused ops would):
- two ranks and two microbatches draw the single rank's masks, so their
  losses and final weights equal the single-rank program's within 1e-5;
- with a zero learning rate and fixed data (the first two models), each
  step's loss differs (each step draws new masks), a resumed run repeats the
  uninterrupted one's, and another --seed gives other masks;
- the sites have distinct numbers in the emitted step;
- nn.TransformerDecoder (decoder_layers.onnx) on 2 ranks and on a pipeline
  of its three detected layers, a Hugging Face-style GPT-2 (hf_gpt2.onnx,
  dropout in ten places) on 2 ranks and at tp=2, and nn.TransformerEncoder at
  tp=2 (its feed-forward dropout on each rank's features) train to one
  rank's losses (and, where each file holds whole tensors, weights);
- GPT-2's heads split over a tensor axis (tp=2, alone and with Megatron's
  sequence parallelism) or a sequence axis's all-to-all draw their slice of
  one rank's masks, and ring attention (alone and beside a tensor axis) each
  query's and key block's place in them: the same losses.

  dropout_programs.py COMPILER FIXTURES WORKDIR MPIRUN
"""
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_runs import safetensors  # noqa: E402

COMPILER, FIXTURES, WORK, MPIRUN = sys.argv[1:5]
# Each model with its dropout sites and the shape of its float input (None:
# token inputs, trained on synthetic data only).
MODELS = {"dropout_mlp": (2, (6,)), "dropout_attention": (2, (8, 16)), "encoder_layers": (12, None),
          "dropout_gpt2": (4, None), "decoder_layers": (22, None), "hf_gpt2": (10, None)}
# Models checked on two ranks without microbatches.
TWO_RANKS_ONLY = {"decoder_layers", "hf_gpt2"}
# More plans, each with its ranks: a pipeline of the layers found
# (nn.TransformerDecoder's three, whose shared transpose of the encoder
# memory the first stage computes for all) and tensor axes (nn.Transformer's
# dropout between its feed-forward linears, each rank drawing its slice of
# the mask; Hugging Face's fused Conv1D projection on flattened tokens split
# by heads, its vocabulary under the shifted logits), with the tensors each
# splits (per layer the feed-forward's three or the fused QKV weight and
# bias, the attention output's weight and the MLP's three; the vocabulary).
MORE_PLANS = {"decoder_layers": [(3, "pp=3,microbatches=2")], "hf_gpt2": [(2, "tp=2")],
              "encoder_layers": [(2, "tp=2")]}
SPLIT_TENSORS = {"hf_gpt2": 19, "encoder_layers": 12}
MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--mca",
             "btl_vader_single_copy_mechanism", "none"]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def build(model, out, *flags):
    done = subprocess.run([COMPILER, f"{FIXTURES}/special/{model}.onnx", "-o", out, "--quiet", "--batch", "4",
                           "--seq", "8", *flags], capture_output=True, text=True)
    check(done.returncode == 0, f"compile {' '.join(flags)}: {done.stderr[-2000:]}")
    return done.returncode == 0


def train(program, tag, *args, ranks=0):
    launcher = [MPIRUN, *MPI_FLAGS, "-np", str(ranks)] if ranks else []
    env = dict(os.environ)
    if ranks:
        env.update(OPENBLAS_NUM_THREADS="1", OMPI_MCA_mpi_yield_when_idle="1", COLOSSAL_COLLECTIVE_TIMEOUT="120",
                   ASAN_OPTIONS="detect_leaks=0")
    log = f"{WORK}/{tag}.log"
    done = subprocess.run(launcher + [f"{program}/model_train", "--quiet", "--log", log, *args],
                          capture_output=True, text=True, timeout=300, env=env)
    check(done.returncode == 0, f"{tag}: {done.stderr[-2000:]}")
    if done.returncode:
        return []
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


def worst_relative(got, want):
    if len(got) != len(want) or not got:
        return float("inf")
    return max(abs(g - w) / max(abs(w), 1e-30) for g, w in zip(got, want))


def worst_weight_error(reference_dir, run_dir):
    """The largest relative error of any weight in any rank's file of
    `run_dir` against the single-rank checkpoint; every weight must be in
    some file (a pipeline stage's file holds its stage's)."""
    want = {key: values for key, values in safetensors(f"{reference_dir}/rank-00000-of-00001.safetensors").items()
            if not key.startswith("optimizer.")}
    files = sorted(name for name in os.listdir(run_dir) if name.endswith(".safetensors"))
    worst, seen = 0.0, set()
    for name in files:
        got = safetensors(f"{run_dir}/{name}")
        for key in want.keys() & got.keys():
            if len(got[key]) != len(want[key]):
                return float("inf")
            seen.add(key)
            norm = sum(x * x for x in want[key]) ** 0.5
            worst = max(worst, sum((x - y) ** 2 for x, y in zip(got[key], want[key])) ** 0.5 / norm)
    return worst if want and seen == want.keys() else float("inf")


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
for model in MODELS:
    work = f"{WORK}/{model}"
    single, parallel, micro = f"{work}/single", f"{work}/dp2", f"{work}/micro2"
    ok = (build(model, single) and build(model, parallel, "--gpus", "2", "--strategy", "dp=2")
          and (model in TWO_RANKS_ONLY or build(model, micro, "--microbatches", "2")))
    if ok:
        # The step numbers its two dropout sites apart.
        source = open(f"{single}/train_step.cpp").read() if os.path.exists(f"{single}/train_step.cpp") else ""
        sites = sorted({line.split("random.dropoutKey(")[1].split(",")[0] for line in source.splitlines()
                        if "random.dropoutKey(" in line})
        print(f"{model}: dropout sites in the emitted step: {sites}")
        expected = [str(site) for site in range(1, MODELS[model][0] + 1)]
        check(sorted(sites, key=int) == expected,
              f"{model}: expected dropout sites {expected} in the emitted step, found {sites}")

        # The encoder's key bias gets no gradient (softmax ignores a constant
        # added to a row of scores), only rounding noise that differs with
        # the summation order; AdamW would scale that noise up to lr-sized
        # steps, so the encoder trains with SGD.
        sgd = ("encoder_layers", "dropout_gpt2", "decoder_layers", "hf_gpt2")
        optimizer = ["sgd", "--lr", "0.1"] if model in sgd else ["adamw", "--lr", "0.01"]
        flags = ["--steps", "6", "--optimizer", *optimizer]
        one = train(single, f"{model}-one", *flags, "--save", f"{work}/ck-one")
        two = train(parallel, f"{model}-dp2", *flags, "--save", f"{work}/ck-dp2", ranks=2)
        runs = [("2 ranks", two, "ck-dp2")]
        if model not in TWO_RANKS_ONLY:
            runs.append(("2 microbatches", train(micro, f"{model}-micro2", *flags, "--save", f"{work}/ck-micro2"),
                         "ck-micro2"))
        for ranks, strategy in MORE_PLANS.get(model, []):
            program = f"{work}/{strategy.replace(',', '-').replace('=', '')}"
            if build(model, program, "--gpus", str(ranks), "--strategy", strategy):
                # A tensor axis's files hold parts of tensors: its losses only,
                # and what it split.
                ck = None if "tp=" in strategy else f"ck-{strategy}"
                if not ck:
                    with open(f"{program}/manifest.json") as f:
                        split = json.load(f)["tensor_parallel"]
                    print(f"{model} {strategy}: {split['split_trainable_tensors']} tensors split, vocabulary "
                          f"{split['vocabulary_parallel']}")
                    check(split["split_trainable_tensors"] == SPLIT_TENSORS[model] and
                          split["vocabulary_parallel"]["lookups"] == 1,
                          f"{model} {strategy}: expected {SPLIT_TENSORS[model]} split tensors and a split "
                          f"vocabulary, got {split}")
                saving = ["--save", f"{work}/{ck}"] if ck else []
                got = train(program, f"{model}-{strategy}", *flags, *saving, ranks=ranks)
                runs.append((strategy, got, ck))
        for tag, got, ck in runs:
            loss_error = worst_relative(got, one)
            weight_error = worst_weight_error(f"{work}/ck-one", f"{work}/{ck}") if ck else 0.0
            weights = f"worst weight error {weight_error:.2e}" if ck else "weights split over the ranks"
            print(f"{model} {tag:15}: worst loss error vs 1 rank {loss_error:.2e}, {weights}")
            check(loss_error <= 1e-5, f"{model} {tag}: losses {got} differ from one rank's {one}")
            check(weight_error <= 1e-5, f"{model} {tag}: final weights differ from one rank's by {weight_error:.2e}")
        if model == "dropout_gpt2":
            source = open(f"{single}/train_step.cpp").read()
            check("softmax(" not in source and source.count(" attention(") == 2,
                  f"{model}: attention under dropout is not raised into the step's two attention calls")
            for ranks, strategy in [(2, "tp=2"), (2, "tp=2,sp_mode=megatron"), (2, "sp=2,sp_mode=all-to-all"),
                                    (2, "sp=2,sp_mode=ring"), (4, "tp=2,sp=2,sp_mode=ring")]:
                program = f"{work}/{strategy.replace(',', '-').replace('=', '')}"
                if not build(model, program, "--gpus", str(ranks), "--strategy", strategy):
                    continue
                got = train(program, f"{model}-{strategy}", *flags, ranks=ranks)
                loss_error = worst_relative(got, one)
                print(f"{model} {strategy:23}: worst loss error vs 1 rank {loss_error:.2e}")
                check(loss_error <= 1e-5, f"{model} {strategy}: losses {got} differ from one rank's {one}")

        # Fixed data (no new batch per step needs a feed: write one) and a zero
        # learning rate: only the masks change from step to step.
        if MODELS[model][1] is None:
            continue
        feed = f"{work}/feed"
        os.makedirs(feed)
        shape = (4,) + MODELS[model][1]
        count = 1
        for d in shape:
            count *= d
        values = [((i * 37) % 23) / 11.0 - 1.0 for i in range(count)]
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': %r, }" % (shape,)
        header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
        with open(f"{feed}/x.npy", "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") +
                    struct.pack(f"<{len(values)}f", *values))
        frozen = ["--feed", feed, "--optimizer", "sgd", "--lr", "0"]
        steps = train(single, f"{model}-frozen", *frozen, "--steps", "6")
        print(f"{model}: zero learning rate, fixed data, losses per step: {steps}")
        check(len(set(steps)) == len(steps) == 6, f"{model}: the masks repeat across steps: losses {steps}")
        first = train(single, f"{model}-first-half", *frozen, "--steps", "3", "--save", f"{work}/ck-half")
        resumed = train(single, f"{model}-resumed", *frozen, "--steps", "6", "--resume", f"{work}/ck-half")
        check(first + resumed == steps, f"{model}: 3 + resume + 3 steps drew other masks: {first + resumed} vs {steps}")
        reseeded = train(single, f"{model}-seed1", *frozen, "--steps", "6", "--seed", "1")
        check(all(a != b for a, b in zip(reseeded, steps)) and len(reseeded) == 6,
              f"{model}: --seed 1 drew seed 0's masks: {reseeded} vs {steps}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("dropout: all checks passed")
