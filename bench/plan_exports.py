#!/usr/bin/python3
"""Planning real PyTorch exports: time and peak memory of

  colossal-compile MODEL.onnx --gpus 64 --batch 512 --seq 1024 --precision bf16 --emit=plan

on GPT-2 124M (one 548 MB file, weights inline) and GPT-2 1.5B (48 layers,
hidden 1600: weights as ONNX external data, one file per tensor, 6.2 GB),
both exported by PyTorch in training mode with dynamic batch and sequence
axes and a causal-mask buffer per layer (nanoGPT's shape, test/fixtures/models.py).

Wall time is the whole command, pinned to one core when `taskset` is
available; peak memory is the process's maximum resident set. Each compiler
given (the current one, and with --baseline PATH an earlier build) plans
each model REPEAT times; the plans must agree. Each also writes the model's
program once (`--gpus 2 --strategy dp=2 --batch 4 --seq 128 --emit=source
-o DIR`: the step's source, its weights, the graph beside them), timed the
same way; the two builds' files must be byte for byte the same. The exports
are cached in WORK (the 1.5B export takes minutes and about 10 GB of memory).

The issue's headline command, on the 124M model exported with PyTorch's
default dropout of 0.1 (attention probabilities and the block's output),
with the current build and an empty build cache:

  colossal-compile MODEL --gpus 64 --batch 512 --seq 1024 --target cuda --precision bf16 -o DIR

its wall time, peak memory, the source's size and longest line, and how many
softmaxes the step still computes (none: attention under dropout is raised
into the fused op). Then the same model as a host program of one sequence
(`--batch 1 --seq S -o DIR`) at S = 128, 256, 512 and 1024, one SGD step each:
the activation peak the runtime measured (and the plan's), which grows
linearly with S now that no s x s probabilities are kept.

  bench/plan_exports.py BUILD_DIR OUT.json [--work DIR] [--baseline PATH] [--repeat N] [--only 124m]
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD, OUT = sys.argv[1], sys.argv[2]


def option(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


WORK = option("--work", "/tmp/colossal-plan-exports")
BASELINE = option("--baseline")
REPEAT = int(option("--repeat", "3"))
ONLY = option("--only")
COMPILER = os.path.join(BUILD, "tools", "colossal-compile", "colossal-compile")
WRITE = ["--gpus", "2", "--strategy", "dp=2", "--batch", "4", "--seq", "128", "--emit=source", "--quiet"]
COMMAND = ["--gpus", "64", "--batch", "512", "--seq", "1024", "--precision", "bf16", "--emit=plan", "--quiet"]

HEADLINE = ["--gpus", "64", "--batch", "512", "--seq", "1024", "--target", "cuda", "--precision", "bf16", "--quiet"]

# name, hidden, heads, layers, dropout (GPT-2 small and XL; vocabulary 50257, 1024 positions).
MODELS = [("gpt2-124m", 768, 12, 12, 0.0), ("gpt2-1.5b", 1600, 25, 48, 0.0), ("gpt2-124m-dropout", 768, 12, 12, 0.1)]

EXPORT = """
import sys, torch
sys.path.insert(0, {fixtures!r})
from models import GPT2
torch.manual_seed(0)
model = GPT2(vocab=50257, hidden={hidden}, heads={heads}, layers={layers}, max_seq=1024)
for block in model.h:
    block.attn.attn_dropout.p = {dropout}
    block.dropout.p = {dropout}
ids = torch.randint(0, 50257, (1, 8))
labels = torch.randint(0, 50257, (1, 8))
# Files over 2 GB are written with external data (one file per tensor).
torch.onnx.export(model, (ids, labels), {path!r}, input_names=["input_ids", "labels"], output_names=["loss"],
                  opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={{"input_ids": {{0: "batch", 1: "seq"}}, "labels": {{0: "batch", 1: "seq"}}}})
print(sum(p.numel() for p in model.parameters()))
"""


def exported(name, hidden, heads, layers, dropout):
    folder = os.path.join(WORK, name)
    path = os.path.join(folder, name + ".onnx")
    done = os.path.join(folder, "parameters.txt")
    if not os.path.exists(done):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        script = EXPORT.format(fixtures=os.path.join(HERE, "..", "test", "fixtures"), hidden=hidden, heads=heads,
                               layers=layers, dropout=dropout, path=path)
        run = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, check=True)
        with open(done, "w") as f:
            f.write(run.stdout.strip().splitlines()[-1])
    with open(done) as f:
        parameters = int(f.read())
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    return path, parameters, os.path.getsize(path), size


def timed(command, pinned=True, env=None):
    """Wall seconds and peak resident bytes of `command` (pinned to one core
    unless told otherwise)."""
    pin = ["taskset", "-c", "0"] if pinned and shutil.which("taskset") else []
    start = time.monotonic()
    process = subprocess.Popen(pin + command, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - start
    error = process.stderr.read()
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {error}")
    return seconds, usage.ru_maxrss * 1024


def plan(compiler, model, plan_path):
    seconds, peak = timed([compiler, model] + COMMAND + ["-o", plan_path])
    with open(plan_path) as f:
        p = json.load(f)
    return seconds, peak, p


def write_program(compiler, model, directory):
    shutil.rmtree(directory, ignore_errors=True)
    seconds, peak = timed([compiler, model] + WRITE + ["-o", directory])
    files = sorted(os.listdir(directory))
    return {"wall_s": seconds, "peak_rss_bytes": peak,
            "bytes": {f: os.path.getsize(os.path.join(directory, f)) for f in files}}


def measure(compiler, model, work):
    runs, plans = [], []
    for i in range(REPEAT):
        seconds, peak, p = plan(compiler, model, os.path.join(work, f"plan{i}.json"))
        runs.append({"wall_s": seconds, "peak_rss_bytes": peak, "search_s": p.get("search", {}).get("seconds")})
        p.pop("search", None)
        plans.append(p)
    if any(p != plans[0] for p in plans):
        raise SystemExit(f"{compiler} planned {model} differently across runs")
    best = min(runs, key=lambda r: r["wall_s"])
    return {"runs": runs, "best_wall_s": best["wall_s"], "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs),
            "strategy": plans[0]["strategy"], "microbatch_size": plans[0]["microbatch_size"],
            "step_time_s": plans[0]["predicted"]["step_time_s"]}, plans[0]


def run_headline(model):
    """The headline command on both cores (the build is parallel), cold cache."""
    directory, cache = os.path.join(WORK, "headline"), os.path.join(WORK, "headline-cache")
    for d in (directory, cache):
        shutil.rmtree(d, ignore_errors=True)
    seconds, peak = timed([COMPILER, model] + HEADLINE + ["-o", directory], pinned=False,
                          env=dict(os.environ, COLOSSAL_BUILD_CACHE=cache))
    with open(os.path.join(directory, "train_step.cpp")) as f:
        source = f.read()
    result = {"model": "gpt2-124m, dropout 0.1", "command": "colossal-compile MODEL " + " ".join(HEADLINE) + " -o DIR",
              "wall_s": seconds, "peak_rss_bytes": peak, "source_bytes": len(source),
              "longest_source_line": max(len(line) for line in source.splitlines()),
              "softmaxes_in_step": source.count("softmax("),
              "files": {f: os.path.getsize(os.path.join(directory, f)) for f in sorted(os.listdir(directory))}}
    shutil.rmtree(directory)
    shutil.rmtree(cache)
    return result


def activation_peaks(model):
    """One host step of one sequence at three lengths: planned and measured activation peaks."""
    peaks = []
    for seq in (128, 256, 512, 1024):
        directory = os.path.join(WORK, f"peak-{seq}")
        shutil.rmtree(directory, ignore_errors=True)
        subprocess.run([COMPILER, model, "--batch", "1", "--seq", str(seq), "-o", directory, "--quiet"], check=True)
        log = os.path.join(WORK, f"peak-{seq}.log")
        subprocess.run([os.path.join(directory, "model_train"), "--quiet", "--steps", "1", "--log", log,
                        "--optimizer", "sgd", "--lr", "0.01"], check=True)
        with open(log) as f:
            measured = json.loads(f.readline())["memory"]["activations"]["peak"]
        with open(os.path.join(directory, "manifest.json")) as f:
            planned = json.load(f)["planned_step_peak_bytes"]
        peaks.append({"seq": seq, "measured_activation_peak_bytes": measured, "planned_step_peak_bytes": planned})
        shutil.rmtree(directory)
    return peaks


def main():
    os.makedirs(WORK, exist_ok=True)
    results = []
    headline = None
    for name, hidden, heads, layers, dropout in MODELS:
        if ONLY and ONLY not in name:
            continue
        path, parameters, graph_bytes, total_bytes = exported(name, hidden, heads, layers, dropout)
        if dropout:
            headline = run_headline(path)
            headline["host_activation_peaks"] = activation_peaks(path)
            print(json.dumps(headline), flush=True)
            continue
        entry = {"model": name, "parameters": parameters, "layers": layers, "hidden": hidden,
                 "model_file_bytes": graph_bytes, "model_bytes_with_external_data": total_bytes}
        entry["current"], current = measure(COMPILER, path, WORK)
        current_dir = os.path.join(WORK, "program-current")
        entry["current"]["write_program"] = write_program(COMPILER, path, current_dir)
        if BASELINE:
            entry["baseline"], baseline = measure(BASELINE, path, WORK)
            entry["same_plan"] = baseline == current
            baseline_dir = os.path.join(WORK, "program-baseline")
            entry["baseline"]["write_program"] = write_program(BASELINE, path, baseline_dir)
            files = sorted(os.listdir(current_dir))
            entry["same_program_files"] = files == sorted(os.listdir(baseline_dir)) and all(
                filecmp.cmp(os.path.join(current_dir, f), os.path.join(baseline_dir, f), shallow=False) for f in files)
            shutil.rmtree(baseline_dir)
        shutil.rmtree(current_dir)
        print(json.dumps(entry), flush=True)
        results.append(entry)
    with open(OUT, "w") as f:
        json.dump({"benchmark": "plan-exports", "command": "colossal-compile MODEL " + " ".join(COMMAND),
                   "one_core": bool(shutil.which("taskset")), "baseline": BASELINE, "results": results,
                   "headline": headline}, f, indent=1)


main()
