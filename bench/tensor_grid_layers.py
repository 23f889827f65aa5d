#!/usr/bin/python3
"""1D against the tensor grids, measured: a LLaMA-style model (separate
query, key and value projections, SwiGLU, RMSNorm, rotary attention, untied
head) and a GPT-2 (fused QKV projection, tied head), each compiled for 1
rank, for tp=4 (Megatron's 1D split) and tp=4,tp_mode=2d (a 2 x 2 grid,
SUMMA) on four ranks, and for tp=8 (1D), tp=8,tp_mode=2.5d,tp_depth=2 (two
layers of a 2 x 2 grid) and tp=8,tp_mode=3d (a 2 x 2 x 2 cube) on eight,
trained STEPS AdamW steps under mpirun on one batch.
Per rank, from the runtime's memory tracker and counters: the model states,
the step's activation peak (and the compiler's plan), and the bytes and calls
of every collective on every axis; beside them the manifest's predicted
bytes. What the grid computes whole on gathered blocks is listed from the
partitioner's report.

The models are narrow (the host runs them); docs/benchmarks.md sets the
measured ratios beside the cost model's predictions for a 4096-wide GPT
layer (bench/tensor_grid_comparison.py) and the papers' claims.

  bench/tensor_grid_layers.py COLOSSAL_COMPILE MPIRUN OUT.json
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures"))

import torch  # noqa: E402
import models  # noqa: E402
from gpt2_export import export_gpt2  # noqa: E402

COMPILER, MPIRUN, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
STEPS = 3
SHAPE = dict(vocab=1024, hidden=256, heads=8, layers=2, seq=64, batch=4)
STRATEGIES = [("1 rank", 1, None), ("tp=4 (1D)", 4, "tp=4"), ("tp=4, tp_mode=2d (2 x 2)", 4, "tp=4,tp_mode=2d"),
              ("tp=8 (1D)", 8, "tp=8"), ("tp=8, tp_mode=2.5d, tp_depth=2 (2 x 2 x 2)", 8, "tp=8,tp_mode=2.5d,tp_depth=2"),
              ("tp=8, tp_mode=3d (2 x 2 x 2)", 8, "tp=8,tp_mode=3d")]


def exported(kind, work):
    torch.manual_seed(0)
    s = SHAPE
    if kind == "llama":
        model = models.Llama(vocab=s["vocab"], hidden=s["hidden"], heads=s["heads"], layers=s["layers"],
                             ffn=4 * s["hidden"])
    else:
        model = models.GPT2(vocab=s["vocab"], hidden=s["hidden"], heads=s["heads"], layers=s["layers"],
                            max_seq=s["seq"])
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g)
    labels = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g)
    return export_gpt2(model, ids, labels, work, f"{kind}.onnx")


def measure(onnx_path, work, label, ranks, strategy):
    program = os.path.join(work, "".join(c for c in label if c.isalnum()))
    args = [COMPILER, onnx_path, "-o", program, "--quiet", "--trainable", os.path.join(work, "trainable.txt"),
            "--optimizer", "adamw"]
    if strategy:
        args += ["--gpus", str(ranks), "--strategy", strategy]
    built = subprocess.run(args, check=True, capture_output=True, text=True)
    whole = [line.split("computed whole", 1)[1].strip() for line in built.stderr.splitlines()
             if "computed whole" in line]
    log = os.path.join(program, "steps.jsonl")
    launch = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", str(ranks)] if ranks > 1 else []
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    subprocess.run(launch + [os.path.join(program, "model_train"), "--feed", os.path.join(work, "feed"), "--steps",
                             str(STEPS), "--log", log, "--quiet"], check=True, env=env)
    last = [json.loads(line) for line in open(log)][-1]
    manifest = json.load(open(os.path.join(program, "manifest.json")))
    memory = last["memory"]
    comm = {c: {axis: {"bytes": e["bytes"], "calls": e["calls"]} for axis, e in axes.items() if axis != "dp"}
            for c, axes in last.get("comm", {}).items()}
    comm = {c: axes for c, axes in comm.items() if axes}
    predicted = manifest.get("predicted_comm_bytes_per_step_by_optimizer", {}).get("adamw", {})
    predicted = {c: {a: b for a, b in axes.items() if a != "dp"} for c, axes in predicted.items()}
    return {
        "ranks": ranks,
        "strategy": strategy,
        "loss_at_last_step": last["loss"],
        "model_state_bytes": {k: memory[k]["current"] for k in ("parameters", "gradients", "optimizer_state")},
        "activations_peak_bytes": memory["activations"]["peak"],
        "planned_step_peak_bytes": manifest.get("planned_step_peak_bytes"),
        "communication_buffer_peak_bytes": memory["communication"]["peak"],
        "comm_per_step": comm,
        "predicted_comm_bytes_per_step": {c: axes for c, axes in predicted.items() if axes},
        "computed_whole": whole[0] if whole else "",
    }


results = {}
for kind in ("llama", "gpt2"):
    work = tempfile.mkdtemp(prefix=f"colossal-grid-{kind}-")
    onnx_path = exported(kind, work)
    results[kind] = {label: measure(onnx_path, work, label, ranks, strategy) for label, ranks, strategy in STRATEGIES}
    shutil.rmtree(work)

json.dump({"benchmark": "tensor_grid_layers", "shape": SHAPE, "steps": STEPS, "optimizer": "adamw",
           "runs": results}, open(OUT, "w"), indent=2)

for kind, runs in results.items():
    one = runs["1 rank"]
    print(f"\n{kind} (hidden {SHAPE['hidden']}, {SHAPE['layers']} layers, {SHAPE['batch']} x {SHAPE['seq']} tokens)")
    print("| plan | parameters per rank (of 1 rank) | activation peak (of 1 rank) | bytes per step by axis "
          "(measured = predicted) | loss |")
    print("|---|---|---|---|---|")
    for label, run in runs.items():
        params = run["model_state_bytes"]["parameters"]
        peak = run["activations_peak_bytes"]
        moved = ", ".join(f"{c} {a} {e['bytes']:,}" for c, axes in sorted(run["comm_per_step"].items())
                          for a, e in sorted(axes.items()))
        same = all(run["predicted_comm_bytes_per_step"].get(c, {}).get(a) == e["bytes"]
                   for c, axes in run["comm_per_step"].items() for a, e in axes.items())
        print(f"| {label} | {params:,} ({params / one['model_state_bytes']['parameters']:.3f}) | {peak:,} "
              f"({peak / one['activations_peak_bytes']:.3f}) | {moved or '-'}{'' if same else ' (PREDICTION DIFFERS)'} "
              f"| {run['loss_at_last_step']:.6f} |")
