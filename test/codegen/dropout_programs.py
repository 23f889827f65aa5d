#!/usr/bin/env python3
"""Dropout in emitted programs: every mask is a function of the run's seed, the
dropout site, the step and the element's place in the global batch.

On test/fixtures/special/dropout_mlp.onnx (two training-mode dropouts,
p = 0.25):
- two ranks and two microbatches draw the single rank's masks, so their
  losses and final weights equal the single-rank program's within 1e-5;
- with a zero learning rate and fixed data, each step's loss differs (each
  step draws new masks), a resumed run repeats the uninterrupted one's, and
  another --seed gives other masks;
- the two sites have distinct numbers in the emitted step.

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
MODEL = f"{FIXTURES}/special/dropout_mlp.onnx"
MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--mca",
             "btl_vader_single_copy_mechanism", "none"]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def build(out, *flags):
    done = subprocess.run([COMPILER, MODEL, "-o", out, "--quiet", "--batch", "4", *flags], capture_output=True,
                          text=True)
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
    """The largest relative error of w1, w2, w3 in any rank's file of
    `run_dir` against the single-rank checkpoint."""
    want = safetensors(f"{reference_dir}/rank-00000-of-00001.safetensors")
    files = sorted(name for name in os.listdir(run_dir) if name.endswith(".safetensors"))
    worst = float("inf") if not files else 0.0
    for name in files:
        got = safetensors(f"{run_dir}/{name}")
        for key in ("w1", "w2", "w3"):
            if key not in got or len(got[key]) != len(want[key]):
                return float("inf")
            norm = sum(x * x for x in want[key]) ** 0.5
            worst = max(worst, sum((x - y) ** 2 for x, y in zip(got[key], want[key])) ** 0.5 / norm)
    return worst


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
single, parallel, micro = f"{WORK}/single", f"{WORK}/dp2", f"{WORK}/micro2"
ok = build(single) and build(parallel, "--gpus", "2") and build(micro, "--microbatches", "2")
if ok:
    # The step numbers its two dropout sites apart.
    source = open(f"{single}/train_step.cpp").read() if os.path.exists(f"{single}/train_step.cpp") else ""
    sites = sorted({line.split("random.dropoutKey(")[1].split(",")[0] for line in source.splitlines()
                    if "random.dropoutKey(" in line})
    print(f"dropout sites in the emitted step: {sites}")
    check(sites == ["1", "2"], f"expected dropout sites 1 and 2 in the emitted step, found {sites}")

    flags = ["--steps", "6", "--optimizer", "adamw", "--lr", "0.01"]
    one = train(single, "one", *flags, "--save", f"{WORK}/ck-one")
    two = train(parallel, "dp2", *flags, "--save", f"{WORK}/ck-dp2", ranks=2)
    acc = train(micro, "micro2", *flags, "--save", f"{WORK}/ck-micro2")
    for tag, got, ck in [("2 ranks", two, "ck-dp2"), ("2 microbatches", acc, "ck-micro2")]:
        loss_error = worst_relative(got, one)
        weight_error = worst_weight_error(f"{WORK}/ck-one", f"{WORK}/{ck}")
        print(f"{tag:15}: worst loss error vs 1 rank {loss_error:.2e}, worst weight error {weight_error:.2e}")
        check(loss_error <= 1e-5, f"{tag}: losses {got} differ from one rank's {one}")
        check(weight_error <= 1e-5, f"{tag}: final weights differ from one rank's by {weight_error:.2e}")

    # Fixed data (no new batch per step needs a feed: write one) and a zero
    # learning rate: only the masks change from step to step.
    feed = f"{WORK}/feed"
    os.makedirs(feed)
    values = [((i * 37) % 23) / 11.0 - 1.0 for i in range(4 * 6)]
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(f"{feed}/x.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") +
                struct.pack(f"<{len(values)}f", *values))
    frozen = ["--feed", feed, "--optimizer", "sgd", "--lr", "0"]
    steps = train(single, "frozen", *frozen, "--steps", "6")
    print(f"zero learning rate, fixed data, losses per step: {steps}")
    check(len(set(steps)) == len(steps) == 6, f"the masks repeat across steps: losses {steps}")
    first = train(single, "first-half", *frozen, "--steps", "3", "--save", f"{WORK}/ck-half")
    resumed = train(single, "resumed", *frozen, "--steps", "6", "--resume", f"{WORK}/ck-half")
    check(first + resumed == steps, f"3 + resume + 3 steps drew other masks: {first + resumed} vs {steps}")
    reseeded = train(single, "seed1", *frozen, "--steps", "6", "--seed", "1")
    check(all(a != b for a, b in zip(reseeded, steps)) and len(reseeded) == 6,
          f"--seed 1 drew seed 0's masks: {reseeded} vs {steps}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("dropout: all checks passed")
