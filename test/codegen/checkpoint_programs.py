#!/usr/bin/env python3
"""Checkpoints outlive their plan, and a failed save loses nothing.

Resume under another plan: a checkpoint written after 5 steps by one
program (plan and rank count) is continued to step 10 by another program of
the same model; the resumed run's 5 losses must equal the new plan's own
uninterrupted run (1e-6) and the original plan's (1e-5). The pairs cover
data parallelism, ZeRO-3 (weights and moments sharded), 1D tensor
parallelism (a fused QKV projection split in groups), all-to-all sequence
parallelism, optimizer offload, and a vocabulary padded for 2 tensor ranks
continued by one rank that holds it unpadded.

Weights out: --export writes the weights whole under the PyTorch module's
parameter names (PyTorch's loss on them is the program's) and the ONNX model
with them, which compiles again and trains on.

Safe saves: --save-every and --keep keep the newest checkpoints and a
`latest` pointer; a rank killed in the middle of a save, and a save that
reaches a file-size limit (the disk full), leave the previous checkpoint
loadable and the same; a checkpoint missing a tensor or holding one of
another shape is refused naming the tensor.

  checkpoint_programs.py COMPILER FIXTURES WORKDIR MPIRUN
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_checks import (  # noqa: E402
    check, check_refusals, compile_model, train, losses, optimizer_flags, batch_data, finish, FIXTURES, WORK,
    COMPILER)

MODEL, BATCH = "gpt2", 4
feed, reference, _ = batch_data(MODEL, BATCH)
flags = ["--feed", feed, *optimizer_flags("adamw", reference["hyper_parameters"]["adamw"])]

# Programs of one model under six plans; `ranks` 0 runs without mpirun.
PLANS = {
    "one": ([], 0),
    "dp2": (["--gpus", "2", "--strategy", "dp=2"], 2),
    "dp2-zero1": (["--gpus", "2", "--strategy", "dp=2,zero=1"], 2),
    "dp2-zero3": (["--gpus", "2", "--strategy", "dp=2,zero=3"], 2),
    "tp2": (["--gpus", "2", "--strategy", "tp=2"], 2),
    "sp2": (["--gpus", "2", "--strategy", "sp=2,sp_mode=all-to-all"], 2),
    "offload": (["--strategy", "zero=1,offload=optimizer"], 0),
}
for plan, (strategy, _) in PLANS.items():
    built = compile_model(MODEL, f"{WORK}/{plan}", *strategy, batch=BATCH)
    check(built.returncode == 0, f"{plan}: {built.stderr[-2000:]}")
    if built.returncode:
        finish()


def run(plan, *args):
    program = plan if plan.startswith("/") else f"{WORK}/{plan}"
    ranks = PLANS.get(plan, ([], 0))[1]
    return train(program, *flags, *args, ranks=ranks)


def relative(got, want):
    return max(abs(g - w) / abs(w) for g, w in zip(got, want)) if len(got) == len(want) and got else float("inf")


# Every plan's own ten steps, uninterrupted.
whole = {}
for plan in PLANS:
    result = run(plan, "--steps", "10", "--log", f"{WORK}/{plan}-whole.log")
    check(result.returncode == 0, f"{plan}: ten steps failed: {result.stderr[-1500:]}")
    whole[plan] = losses(f"{WORK}/{plan}-whole.log") if result.returncode == 0 else []

# 1. Resume under another plan.
print(f"{'written by':12} {'continued by':12} {'vs its own run':>15} {'vs the writer':>14}")
for source, target in [("one", "dp2"), ("dp2-zero3", "tp2"), ("tp2", "one"), ("sp2", "dp2-zero1"),
                       ("offload", "one"), ("one", "tp2")]:
    saved = f"{WORK}/{source}-at5"
    if not os.path.exists(saved):
        first = run(source, "--steps", "5", "--save", saved)
        check(first.returncode == 0, f"{source}: five steps and a save failed: {first.stderr[-1500:]}")
    log = f"{WORK}/{source}-to-{target}.log"
    second = run(target, "--steps", "10", "--resume", saved, "--log", log)
    check(second.returncode == 0, f"{source} -> {target}: the resumed run failed: {second.stderr[-1500:]}")
    if second.returncode:
        continue
    resumed = losses(log)
    own, writer = relative(resumed, whole[target][5:]), relative(resumed, whole[source][5:])
    print(f"{source:12} {target:12} {own:15.2e} {writer:14.2e}")
    check(own <= 1e-6, f"{source} -> {target}: resumed losses {resumed} are {own:.2e} from {target}'s own run")
    check(writer <= 1e-5, f"{source} -> {target}: resumed losses {resumed} are {writer:.2e} from {source}'s run")

# A vocabulary of 31 rows padded to 32 for 2 tensor ranks: one rank continues
# with the 31 rows, and the padded program continues that one rank's
# checkpoint with its padding back.
padded_model = f"{FIXTURES}/special/padded_vocab_lm.onnx"
for name, strategy in [("padded-one", []), ("padded-tp2", ["--gpus", "2", "--strategy", "tp=2"])]:
    built = subprocess.run([COMPILER, padded_model, "--quiet", "--batch", "2", "--seq", "8", "-o", f"{WORK}/{name}",
                            *strategy], capture_output=True, text=True)
    check(built.returncode == 0, f"{name}: {built.stderr[-1500:]}")
PLANS["padded-one"], PLANS["padded-tp2"] = ([], 0), ([], 2)
padded = {}
for plan in ("padded-one", "padded-tp2"):
    # No feed: the synthetic data of one seed, the same for both plans.
    ranks = PLANS[plan][1]
    result = train(f"{WORK}/{plan}", "--steps", "10", "--log", f"{WORK}/{plan}-whole.log", ranks=ranks)
    check(result.returncode == 0, f"{plan}: {result.stderr[-1500:]}")
    padded[plan] = losses(f"{WORK}/{plan}-whole.log") if result.returncode == 0 else []
for source, target in [("padded-tp2", "padded-one"), ("padded-one", "padded-tp2")]:
    saved, log = f"{WORK}/{source}-at5", f"{WORK}/{source}-to-{target}.log"
    first = train(f"{WORK}/{source}", "--steps", "5", "--save", saved, ranks=PLANS[source][1])
    second = train(f"{WORK}/{target}", "--steps", "10", "--resume", saved, "--log", log, ranks=PLANS[target][1])
    check(first.returncode == 0 and second.returncode == 0,
          f"{source} -> {target}: {first.stderr[-1500:]} {second.stderr[-1500:]}")
    if second.returncode == 0:
        resumed = losses(log)
        own, writer = relative(resumed, padded[target][5:]), relative(resumed, padded[source][5:])
        print(f"{source:12} {target:12} {own:15.2e} {writer:14.2e}")
        check(own <= 1e-6 and writer <= 1e-5, f"{source} -> {target}: resumed {resumed}, {own:.2e} / {writer:.2e}")

# 2. A folder of checkpoints: saves at steps 3, 6 and 9 and the last (10),
# the newest 3 kept, `latest` naming step 10; step 6 continues bit for bit.
folder = f"{WORK}/every3"
result = run("dp2", "--steps", "10", "--save", folder, "--save-every", "3", "--keep", "3")
kept = sorted(n for n in os.listdir(folder)) if result.returncode == 0 else []
check(kept == ["latest", "step-00000006", "step-00000009", "step-00000010"],
      f"--save-every 3 --keep 3 left {kept}: {result.stderr[-1500:]}")
check(result.returncode == 0 and open(f"{folder}/latest").read().strip() == "step-00000010",
      "latest does not name step 10")
again = run("dp2", "--steps", "10", "--resume", f"{folder}/step-00000006", "--log", f"{WORK}/from6.log")
check(again.returncode == 0 and losses(f"{WORK}/from6.log") == whole["dp2"][6:],
      f"the step-6 checkpoint does not continue the run bit for bit: {again.stderr[-1500:]}")
latest = run("dp2", "--steps", "12", "--resume", folder, "--log", f"{WORK}/from-latest.log")
check(latest.returncode == 0 and [json.loads(line)["step"] for line in open(f"{WORK}/from-latest.log")] == [11, 12],
      f"--resume FOLDER did not continue from its latest (step 10): {latest.stderr[-1500:]}")


# 2b. Weights out: --export after 5 steps writes whole tensors under the
# ONNX initializers' names, which are the PyTorch module's parameter names,
# and the ONNX model with them as its initializers;
# PyTorch's loss on them must be the program's loss at step 6 (1e-5), from
# a tensor-parallel run too. The padded vocabulary comes out unpadded, and
# --weights takes the file back (a fresh optimizer: the first loss is step 6's).
def pytorch_loss(weights):
    result = subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "pytorch_loss.py"), FIXTURES, MODEL, weights, feed],
                            capture_output=True, text=True)
    check(result.returncode == 0, f"PyTorch could not load {weights}: {result.stderr[-1500:]}")
    return json.loads(result.stdout)["loss"] if result.returncode == 0 else float("nan")


for plan in ("one", "tp2", "dp2-zero3"):
    out = f"{WORK}/{plan}-export"
    exported = run(plan, "--steps", "5", "--export", out)
    check(exported.returncode == 0, f"{plan} --export: {exported.stderr[-1500:]}")
    if exported.returncode:
        continue
    torch_loss = pytorch_loss(f"{out}/model.safetensors")
    error = abs(torch_loss - whole[plan][5]) / abs(whole[plan][5])
    print(f"{plan:12} exported after 5 steps: PyTorch's loss {torch_loss:.8f}, the program's at step 6 "
          f"{whole[plan][5]:.8f} ({error:.2e})")
    check(error <= 1e-5, f"{plan}: PyTorch's loss on the exported weights is {error:.2e} from the program's")
    back = run("one", "--steps", "1", "--import", f"{out}/model.safetensors", "--log", f"{WORK}/{plan}-back.log")
    check(back.returncode == 0 and relative(losses(f"{WORK}/{plan}-back.log"), whole[plan][5:6]) <= 1e-5,
          f"{plan}: --import of the exported file does not start at step 6's loss: {back.stderr[-1500:]}")
# The exported ONNX model (the graph with the trained initializers) imports
# and trains on from step 6's loss.
reimported = subprocess.run([COMPILER, f"{WORK}/tp2-export/model.onnx", "--quiet", "--batch", str(BATCH), "--seq",
                             "8", "--trainable", f"{FIXTURES}/{MODEL}/trainable.txt", "-o", f"{WORK}/reimported"],
                            capture_output=True, text=True)
check(reimported.returncode == 0, f"the exported model.onnx does not compile: {reimported.stderr[-1500:]}")
if reimported.returncode == 0:
    onward = train(f"{WORK}/reimported", *flags, "--steps", "3", "--log", f"{WORK}/reimported.log")
    onward_losses = losses(f"{WORK}/reimported.log") if onward.returncode == 0 else []
    error = relative(onward_losses[:1], whole["tp2"][5:6])
    print(f"the exported model.onnx, compiled again, trains on: losses {onward_losses} (the first {error:.2e} from "
          f"step 6's)")
    check(len(onward_losses) == 3 and error <= 1e-5 and onward_losses[2] < onward_losses[0],
          f"the exported model.onnx does not train on from step 6: {onward_losses} {onward.stderr[-1500:]}")
padded_export = train(f"{WORK}/padded-tp2", "--steps", "5", "--export", f"{WORK}/padded-export", ranks=2)
check(padded_export.returncode == 0, f"padded-tp2 --export: {padded_export.stderr[-1500:]}")
if padded_export.returncode == 0:
    data = open(f"{WORK}/padded-export/model.safetensors", "rb").read()
    header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
    check(header.get("wte", {}).get("shape") == [31, 16],
          f"the padded vocabulary was not exported unpadded: {header.get('wte')}")
    # Synthetic data differs by step: both plans' first step on the export.
    starts = []
    for plan in ("padded-tp2", "padded-one"):
        again = train(f"{WORK}/{plan}", "--steps", "1", "--weights", f"{WORK}/padded-export/model.safetensors",
                      "--log", f"{WORK}/{plan}-back.log", ranks=PLANS[plan][1])
        check(again.returncode == 0, f"{plan} --weights on the unpadded export: {again.stderr[-1500:]}")
        starts.append(losses(f"{WORK}/{plan}-back.log") if again.returncode == 0 else [])
    check(relative(starts[0], starts[1]) <= 1e-6,
          f"the padded and unpadded programs start differently from one export: {starts}")


def files_of(directory):
    return {name: open(f"{directory}/{name}", "rb").read() for name in sorted(os.listdir(directory))}


# 3. Faults. A save that dies leaves the previous checkpoint as it was.
base = f"{WORK}/dp2-zero3-at5"
before = files_of(base)
killed = train(f"{WORK}/dp2-zero3", *flags, "--steps", "8", "--resume", base, "--save", base, ranks=2,
               extra_env={"COLOSSAL_FAULT_KILL_IN_SAVE": "1"})
check(killed.returncode != 0, "a job whose rank 1 was killed in the save exited 0")
check(files_of(base) == before, "a save killed half way changed the previous checkpoint")
check(not os.path.exists(f"{base}.saving/index.json"), "a save killed half way left an index")
check_refusals([("the half-written save", run("dp2-zero3", "--steps", "10", "--resume", f"{base}.saving"),
                 "a save that did not finish")])
after_kill = run("dp2-zero3", "--steps", "10", "--resume", base, "--log", f"{WORK}/after-kill.log")
check(after_kill.returncode == 0 and losses(f"{WORK}/after-kill.log") == whole["dp2-zero3"][5:],
      f"the checkpoint a killed save left does not continue the run bit for bit: {after_kill.stderr[-1500:]}")

# The disk full: a file-size limit below one rank's file. Every rank fails
# naming the write, and the previous checkpoint loads as before.
full = train(f"{WORK}/dp2-zero3", *flags, "--steps", "8", "--resume", base, "--save", base, ranks=2,
             file_size_kb=64)
check_refusals([("a save past the file-size limit", full, "File too large")])
check(all(f"rank {r}: write {base}.saving/rank-0000{r}-of-00002.safetensors" in full.stderr for r in (0, 1)),
      f"not every rank named its failed write: {full.stderr[-1500:]}")
check(files_of(base) == before and not os.path.exists(f"{base}.saving"),
      "a save that ran out of space changed the previous checkpoint or left its stage behind")


def rewrite(source, target, edit):
    """A copy of checkpoint `source` whose tensors `edit(name, shape, data)`
    changes (returning None drops the tensor), with each file's CRCs and the
    index rewritten to match: a well-formed checkpoint of another model."""
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    index = json.load(open(f"{source}/index.json"))
    for entry in index["files"]:
        data = open(f"{source}/{entry['file']}", "rb").read()
        length = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + length])
        metadata = header.pop("__metadata__", {})
        tensors = {}
        for name, info in header.items():
            begin, end = info["data_offsets"]
            changed = edit(name, info["shape"], data[8 + length + begin:8 + length + end])
            metadata.pop(f"crc32.{name}", None)
            if changed is not None:
                tensors[name] = (info["dtype"], *changed)
        out_header, blob = {"__metadata__": metadata}, b""
        for name, (dtype, shape, payload) in tensors.items():
            out_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(payload)]}
            blob += payload
        text = json.dumps(out_header).encode()
        text += b" " * (-len(text) % 8)
        whole_file = struct.pack("<Q", len(text)) + text + blob
        open(f"{target}/{entry['file']}", "wb").write(whole_file)
        entry["bytes"], entry["crc32"] = len(whole_file), f"{zlib.crc32(whole_file) & 0xffffffff:08x}"
        for name in list(index["tensors"]):
            if name not in tensors:
                del index["tensors"][name]
            else:
                index["tensors"][name]["global_shape"] = tensors[name][1]
                for shard in index["tensors"][name]["shards"]:
                    shard["shape"] = tensors[name][1]
    json.dump(index, open(f"{target}/index.json", "w"), indent=2)


# A directory that is not a checkpoint is never replaced by one.
foreign = f"{WORK}/not-a-checkpoint"
os.makedirs(foreign, exist_ok=True)
open(f"{foreign}/notes.txt", "w").write("keep me")
check_refusals([("--save into a directory of other files", run("one", "--steps", "1", "--save", foreign),
                 "holds other files than a checkpoint; give a new directory")])
check(open(f"{foreign}/notes.txt").read() == "keep me", "a refused save touched the directory's files")

one_at5 = f"{WORK}/one-at5"
rewrite(one_at5, f"{WORK}/no-wpe", lambda name, shape, data: None if name == "optimizer.v:wpe.weight" else (shape, data))
rewrite(one_at5, f"{WORK}/short-wpe",
        lambda name, shape, data: ([shape[0] - 1, *shape[1:]], data[:len(data) * (shape[0] - 1) // shape[0]])
        if name == "wpe.weight" else (shape, data))
check_refusals([
    ("a checkpoint without a tensor", run("tp2", "--steps", "10", "--resume", f"{WORK}/no-wpe"),
     "holds no tensor 'optimizer.v:wpe.weight'"),
    ("a checkpoint of another shape", run("dp2", "--steps", "10", "--resume", f"{WORK}/short-wpe"),
     "tensor 'wpe.weight' is ["),
    ("a checkpoint of another model", train(f"{WORK}/padded-one", "--steps", "10", "--resume", one_at5),
     "the checkpoint is of model"),
])
finish()
