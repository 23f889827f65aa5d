#!/usr/bin/python3
"""The cost model's activation memory against the emitted program's.

A GPT-2 and a LLaMA-style model (the fixture generator's classes: vocabulary
1024, hidden 256, 4 heads, 4 layers, sequence 128, batch 4) are exported
with PyTorch. For each recomputation setting (none, selective, full) the
search's cost model predicts the activation memory of one rank
(`--emit=plan`: what the step keeps for the backward pass plus the backward
pass's transient), and the compiled program trains STEPS steps on one rank,
its runtime's memory tracker measuring the step's activation peak (the
compiler's planned peak recorded beside it). One run, written as JSON.

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
from gpt2_export import export_gpt2  # noqa: E402
from parallel_runs import measure  # noqa: E402

COMPILER, OUT = sys.argv[1], sys.argv[2]
STEPS = 2
VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 1024, 256, 4, 4, 128, 4


def exported(kind):
    torch.manual_seed(0)
    model = (models.GPT2(vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=LAYERS, max_seq=SEQ) if kind == "gpt2"
             else models.Llama(vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=LAYERS, ffn=688))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    work = tempfile.mkdtemp(prefix=f"colossal-activations-{kind}-")
    return work, export_gpt2(model, ids, labels, work, f"{kind}.onnx")


def predicted(onnx_path, work, strategy):
    plan = subprocess.run([COMPILER, onnx_path, "--batch", str(BATCH), "--trainable",
                           os.path.join(work, "trainable.txt"), "--strategy", strategy, "--emit=plan", "--quiet"],
                          check=True, capture_output=True, text=True)
    return json.loads(plan.stdout)["memory"]["by_category"]["activations"]


runs = []
for kind in ["gpt2", "llama"]:
    work, onnx_path = exported(kind)
    for recompute in ["none", "selective", "full"]:
        strategy = f"recompute={recompute}"
        run = measure(COMPILER, None, onnx_path, work, f"{kind} {strategy}", 1, strategy, STEPS, "tp")
        cost = predicted(onnx_path, work, strategy)
        measured = run["activations_peak_bytes"]
        runs.append({"model": kind, "recompute": recompute, "cost_model_activation_bytes": cost,
                     "measured_step_peak_bytes": measured, "planned_step_peak_bytes": run["planned_step_peak_bytes"],
                     "predicted_over_measured": round(cost / measured, 4)})
        print(f"{kind:6} {recompute:10} cost model {cost:>12,} B  measured {measured:>12,} B  "
              f"ratio {cost / measured:.3f}")
    shutil.rmtree(work)

json.dump({"benchmark": "activation_memory", "model": {"vocab": VOCAB, "hidden": HIDDEN, "heads": HEADS,
                                                      "layers": LAYERS, "seq": SEQ, "batch": BATCH},
           "steps": STEPS, "runs": runs}, open(OUT, "w"), indent=2)
