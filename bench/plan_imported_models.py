#!/usr/bin/python3
"""Planning from a model file: search time and plan quality of
`colossal-compile MODEL.onnx --gpus N --emit=plan` on shape-only models.

For the GPT configurations of the Megatron-LM README's weak-scaling table
(1.7B to 1T parameters on 32 to 3072 A100s, vocabulary 51200, sequence 2048),
colossal-model writes the shape-only ONNX file; colossal-compile imports it,
finds its layers, and searches (dp x 1D tp placed op by op by the sharding
solver or as the partitioner splits it x pp, microbatches, schedule, ZeRO,
offload, recomputation) in bf16 on
dgx-a100 nodes. The same command with --strategy fixing the table's dp, tp
and pp (the rest searched) gives the published configuration's predicted step
under the same cost model and graph; the ratio is searched / published.

Wall time is the whole command (import of every microbatch size the search
tries, layer detection, solver, search), pinned to one core when `taskset`
is available. The searched plan's command runs --repeats times (3 unless
given) and its wall time is their median, every run's kept beside it: on a
shared virtual machine one core's speed varies by half from minute to
minute. Written as JSON.

  bench/plan_imported_models.py BUILD_DIR OUT.json [--quick] [--repeats N]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BUILD, OUT = sys.argv[1], sys.argv[2]
QUICK = "--quick" in sys.argv
REPEATS = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3
MODEL = os.path.join(BUILD, "tools", "colossal-model", "colossal-model")
COMPILER = os.path.join(BUILD, "tools", "colossal-compile", "colossal-compile")

# name, heads, hidden, layers, tp, pp, gpus, global batch (Megatron-LM README).
CONFIGS = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512),
    ("18B", 48, 6144, 40, 8, 1, 256, 1024),
    ("39B", 64, 8192, 48, 8, 2, 512, 1536),
    ("76B", 80, 10240, 60, 8, 4, 1024, 1792),
    ("145B", 96, 12288, 80, 8, 8, 1536, 2304),
    ("310B", 128, 16384, 96, 8, 16, 1920, 2160),
    ("530B", 128, 20480, 105, 8, 35, 2520, 2520),
    ("1T", 160, 25600, 128, 8, 64, 3072, 3072),
]
if QUICK:
    CONFIGS = CONFIGS[:2]

pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []


def plan(model, gpus, batch, plan_path, strategy=None, repeats=1):
    command = pin + [COMPILER, model, "--gpus", str(gpus), "--batch", str(batch),
                     "--precision", "bf16", "--emit=plan", "--quiet", "-o", plan_path]
    if strategy:
        command += ["--strategy", strategy]
    runs = []
    for _ in range(repeats):
        start = time.monotonic()
        run = subprocess.run(command, capture_output=True, text=True)
        runs.append(time.monotonic() - start)
        if run.returncode != 0:
            return {"error": run.stderr.strip(), "wall_s": runs[-1]}
    seconds = sorted(runs)[len(runs) // 2]
    with open(plan_path) as f:
        p = json.load(f)
    s = p["strategy"]
    return {
        "wall_s": seconds,
        "wall_s_runs": runs,
        "search_s": p.get("search", {}).get("seconds"),
        "candidates": p.get("search", {}).get("candidates"),
        "strategy": s,
        "microbatch_size": p["microbatch_size"],
        "step_time_s": p["predicted"]["step_time_s"],
        "mfu": p["predicted"]["mfu"],
        "memory_gib": p["memory"]["per_rank_peak_bytes"] / 2**30,
        # The tensor axis as the sharding solver places it, or as the
        # partitioner splits it (buildable); when the plan cannot be built,
        # the best one that can and its predicted step.
        "tensor_placement": p.get("tensor_placement"),
        "executable": p.get("executable"),
        "buildable_alternative": p.get("buildable_alternative"),
    }


results = []
with tempfile.TemporaryDirectory() as work:
    for name, heads, hidden, layers, tp, pp, gpus, batch in CONFIGS:
        model = os.path.join(work, name + ".onnx")
        subprocess.run([MODEL, "gpt", "--layers", str(layers), "--hidden", str(hidden), "--heads", str(heads),
                        "--seq", "2048", "--vocab", "51200", "-o", model], check=True, capture_output=True)
        searched = plan(model, gpus, batch, os.path.join(work, name + ".plan.json"), repeats=REPEATS)
        dp = gpus // (tp * pp)
        published = plan(model, gpus, batch, os.path.join(work, name + ".published.json"),
                         "dp=%d,tp=%d,pp=%d" % (dp, tp, pp))
        entry = {"model": name, "gpus": gpus, "global_batch": batch, "layers": layers,
                 "model_file_bytes": os.path.getsize(model),
                 "searched": searched, "published": dict(published, tp=tp, pp=pp, dp=dp)}
        if "step_time_s" in searched and "step_time_s" in published:
            entry["ratio"] = searched["step_time_s"] / published["step_time_s"]
        results.append(entry)
        s = searched.get("strategy", {})
        print("%-5s %5d GPUs: %6.2f s wall (runs %s), searched dp=%s tp=%s pp=%s %.3f s, published %s, ratio %s" % (
            name, gpus, searched["wall_s"], " ".join("%.2f" % r for r in searched.get("wall_s_runs", [])), s.get("dp"), s.get("tp"), s.get("pp"),
            searched.get("step_time_s", float("nan")),
            "%.3f s" % published["step_time_s"] if "step_time_s" in published else published.get("error"),
            "%.3f" % entry["ratio"] if "ratio" in entry else "-"), flush=True)

# Long contexts: one sequence per step, more GPUs than samples. The plan
# must split the model axis; which split wins depends on the length.
# name, heads, hidden, layers, sequence, gpus, global batch.
LONG = [
    ("1.3B-8k", 16, 2048, 24, 8192, 8, 1),
    ("1.3B-32k", 16, 2048, 24, 32768, 8, 1),
    ("1.3B-128k", 16, 2048, 24, 131072, 8, 1),
]
if QUICK:
    LONG = LONG[:1]
long_results = []
with tempfile.TemporaryDirectory() as work:
    for name, heads, hidden, layers, seq, gpus, batch in LONG:
        model = os.path.join(work, name + ".onnx")
        subprocess.run([MODEL, "gpt", "--layers", str(layers), "--hidden", str(hidden), "--heads", str(heads),
                        "--seq", str(seq), "--vocab", "51200", "-o", model], check=True, capture_output=True)
        searched = plan(model, gpus, batch, os.path.join(work, name + ".plan.json"))
        tensor = plan(model, gpus, batch, os.path.join(work, name + ".tp.json"), "tp=%d" % gpus)
        entry = {"model": name, "sequence": seq, "gpus": gpus, "global_batch": batch, "searched": searched,
                 "tensor_parallel": tensor}
        if "step_time_s" in searched and "step_time_s" in tensor:
            entry["ratio_to_tensor_parallel"] = searched["step_time_s"] / tensor["step_time_s"]
        long_results.append(entry)
        s = searched.get("strategy", {})
        print("%-9s %5d GPUs: %6.2f s wall, searched dp=%s tp=%s sp=%s %s pp=%s %.3f s, tp=%d alone %s" % (
            name, gpus, searched["wall_s"], s.get("dp"), s.get("tp"), s.get("sp"), s.get("sp_mode"), s.get("pp"),
            searched.get("step_time_s", float("nan")), gpus,
            "%.3f s" % tensor["step_time_s"] if "step_time_s" in tensor else tensor.get("error")), flush=True)

with open(OUT, "w") as f:
    json.dump({"benchmark": "plan-imported-models", "cluster": "dgx-a100", "precision": "bf16",
               "one_core": bool(pin), "repeats": REPEATS, "results": results, "long_context": long_results}, f, indent=2)
