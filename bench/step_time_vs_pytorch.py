#!/usr/bin/python3
"""Host step time of an emitted program against PyTorch on the same CPU.

A GPT-2 (vocabulary 1024, hidden 128, 4 heads, 4 layers, sequence 64, batch
8; the fixture generator's model class) is exported with PyTorch, compiled by
colossal-compile into model_train, and trained for STEPS AdamW steps; PyTorch
(Debian's torch, same weights, batch, optimizer and thread count) trains the
same model. Both report the median step time after WARMUP steps; the first
losses are printed side by side as a sanity check. One run, written as JSON.

  bench/step_time_vs_pytorch.py COLOSSAL_COMPILE OUT.json [THREADS]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "fixtures"))

import torch  # noqa: E402
import models  # noqa: E402
from gpt2_export import export_gpt2  # noqa: E402

COMPILER, OUT = sys.argv[1], sys.argv[2]
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
STEPS, WARMUP = 30, 5
VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 1024, 128, 4, 4, 64, 8
LR = 1e-3

torch.set_num_threads(THREADS)
torch.manual_seed(0)
model = models.GPT2(vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=LAYERS, max_seq=SEQ)
initial = {k: v.clone() for k, v in model.state_dict().items()}
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)

work = tempfile.mkdtemp(prefix="colossal-step-bench-")
onnx_path = export_gpt2(model, ids, labels, work, "gpt2_bench.onnx")

program = os.path.join(work, "program")
subprocess.run([COMPILER, onnx_path, "-o", program, "--quiet", "--trainable", os.path.join(work, "trainable.txt"),
                "--optimizer", "adamw", "--lr", str(LR)], check=True)
env = dict(os.environ, OPENBLAS_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS))
log = os.path.join(work, "steps.jsonl")
subprocess.run([os.path.join(program, "model_train"), "--feed", os.path.join(work, "feed"), "--steps", str(STEPS),
                "--log", log, "--quiet", "--weight-decay", "0.01"], check=True, env=env)
records = [json.loads(line) for line in open(log)]
times = [b["time"] - a["time"] for a, b in zip(records, records[1:])]
ours = statistics.median(times[WARMUP:])

model.load_state_dict(initial)
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, eps=1e-8, weight_decay=0.01)
torch_times, torch_losses = [], []
for step in range(STEPS):
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss = model(ids, labels)
    loss.backward()
    optimizer.step()
    torch_times.append(time.perf_counter() - start)
    torch_losses.append(loss.item())
theirs = statistics.median(torch_times[WARMUP + 1:])

result = {
    "benchmark": "host step time, emitted program vs PyTorch",
    "model": {"kind": "gpt2", "vocab": VOCAB, "hidden": HIDDEN, "heads": HEADS, "layers": LAYERS, "seq": SEQ,
              "batch": BATCH, "parameters": sum(p.numel() for p in model.parameters())},
    "optimizer": "adamw", "threads": THREADS, "steps": STEPS, "warmup_steps": WARMUP,
    "torch_version": torch.__version__,
    "colossal_step_seconds": ours, "pytorch_step_seconds": theirs,
    "ratio_colossal_over_pytorch": ours / theirs,
    "first_losses": {"colossal": [r["loss"] for r in records[:3]], "pytorch": torch_losses[:3]},
}
with open(OUT, "w") as f:
    json.dump(result, f, indent=2)
print(json.dumps(result, indent=2))
shutil.rmtree(work)
