#!/usr/bin/python3
"""The cost model's activation memory against the emitted program's.

Four models built from the fixture generator's classes are exported with
PyTorch (vocabulary 1024, hidden 256, 4 heads, sequence 128, batch 4): the
GPT-2 and the LLaMA-style model of 4 layers the activation estimate was
developed on, and two it never saw: a wider GPT (6 layers) and a BERT-style
encoder (4 layers) whose padding mask hides the last quarter of every other
row. For each recomputation setting (none, selective, full) the search's
cost model predicts one rank's activation memory (`--emit=plan`: what the
step keeps for the backward pass plus the backward pass's transient), and
the compiled program trains STEPS steps on one rank. Three numbers per run:
the activation peak the runtime's allocator charged (every tensor the step
allocated, TrackedAllocator.h), the compiler's planned peak, and the cost
model's estimate; beside them the kernels' scratch (workspace), the step's
peak of all host memory and the process's resident high-water mark. One run,
written as JSON.

  bench/activation_memory.py COLOSSAL_COMPILE OUT.json
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures"))
import models  # noqa: E402
from gpt2_export import export_model  # noqa: E402
from parallel_runs import measure  # noqa: E402

COMPILER, OUT = sys.argv[1], sys.argv[2]
STEPS = 2
VOCAB, HIDDEN, HEADS, SEQ, BATCH = 1024, 256, 4, 128, 4
# (name, layers, whether the estimate was developed on it)
MODELS = [("gpt2", 4, True), ("llama", 4, True), ("gpt-wide", 6, False), ("bert-padded", 4, False)]


def exported(kind, layers):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    if kind in ("gpt2", "gpt-wide"):
        model = models.GPT2(vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=layers, max_seq=SEQ)
        inputs = {"input_ids": ids, "labels": labels}
    elif kind == "llama":
        model = models.Llama(vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=layers, ffn=688)
        inputs = {"input_ids": ids, "labels": labels}
    else:
        model = models.BERT(vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=layers, max_seq=SEQ)
        mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
        mask[1::2, SEQ * 3 // 4:] = 0
        labels[:, ::3] = -100
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    work = tempfile.mkdtemp(prefix=f"colossal-activations-{kind}-")
    return work, export_model(model, inputs, work, f"{kind}.onnx")


def predicted(onnx_path, work, strategy):
    plan = subprocess.run([COMPILER, onnx_path, "--batch", str(BATCH), "--trainable",
                           os.path.join(work, "trainable.txt"), "--strategy", strategy, "--emit=plan", "--quiet"],
                          check=True, capture_output=True, text=True)
    return json.loads(plan.stdout)["memory"]["by_category"]["activations"]


runs = []
for kind, layers, developed_on in MODELS:
    work, onnx_path = exported(kind, layers)
    for recompute in ["none", "selective", "full"]:
        strategy = f"recompute={recompute}"
        run = measure(COMPILER, None, onnx_path, work, f"{kind} {strategy}", 1, strategy, STEPS, "tp")
        cost = predicted(onnx_path, work, strategy)
        allocated = run["activations_peak_bytes"]
        runs.append({"model": kind, "layers": layers, "estimate_developed_on_it": developed_on,
                     "recompute": recompute, "allocated_activation_peak_bytes": allocated,
                     "planned_step_peak_bytes": run["planned_step_peak_bytes"],
                     "cost_model_activation_bytes": cost,
                     "predicted_over_allocated": round(cost / allocated, 4),
                     "workspace_peak_bytes": run["workspace_peak_bytes"],
                     "step_total_peak_bytes": run["step_total_peak_bytes"],
                     "rss_peak_bytes": run["rss_peak_bytes"]})
        print(f"{kind:11} {recompute:10} allocated {allocated:>12,} B  planned {run['planned_step_peak_bytes']:>12,} B  "
              f"cost model {cost:>12,} B ({cost / allocated:.3f})  workspace {run['workspace_peak_bytes']:>10,} B")
    shutil.rmtree(work)

json.dump({"benchmark": "activation_memory",
           "model": {"vocab": VOCAB, "hidden": HIDDEN, "heads": HEADS, "seq": SEQ, "batch": BATCH},
           "steps": STEPS, "runs": runs}, open(OUT, "w"), indent=2)
