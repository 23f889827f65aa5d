"""What the host memory benchmarks share: a seeded GPT-2 exported with one
batch of random tokens, and one emitted program compiled with a strategy,
trained under mpirun, and measured."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures"))

import torch  # noqa: E402
import models  # noqa: E402
from gpt2_export import export_gpt2  # noqa: E402


def exported_gpt2(vocab, hidden, heads, layers, seq, batch, prefix):
    """The fixture generator's GPT-2 of this shape (seed 0) and a batch of
    random token ids and labels (seed 1), exported into a new temporary
    directory; returns the directory and the ONNX path."""
    torch.manual_seed(0)
    model = models.GPT2(vocab=vocab, hidden=hidden, heads=heads, layers=layers, max_seq=seq)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    labels = torch.randint(0, vocab, (batch, seq), generator=g)
    work = tempfile.mkdtemp(prefix=prefix)
    return work, export_gpt2(model, ids, labels, work, "gpt2.onnx")


def measure(compiler, mpirun, onnx_path, work, label, ranks, strategy, steps, axis):
    """Compiles ONNX_PATH for RANKS ranks with STRATEGY (None: one rank),
    trains STEPS AdamW steps on WORK/feed and returns the last step's loss,
    activation peak (and the compiler's planned one), model states per rank
    and bytes on mesh axis AXIS per step."""
    program = os.path.join(work, label.replace(" ", "").replace(",", "-").replace("=", ""))
    args = [compiler, onnx_path, "-o", program, "--quiet", "--trainable", os.path.join(work, "trainable.txt"),
            "--optimizer", "adamw"]
    if strategy:
        args += ["--gpus", str(ranks), "--strategy", strategy]
    subprocess.run(args, check=True)
    log = os.path.join(program, "steps.jsonl")
    launch = [mpirun, "--oversubscribe", "--allow-run-as-root", "-np", str(ranks)] if ranks > 1 else []
    subprocess.run(launch + [os.path.join(program, "model_train"), "--feed", os.path.join(work, "feed"), "--steps",
                             str(steps), "--log", log, "--quiet"], check=True)
    last = [json.loads(line) for line in open(log)][-1]
    manifest = json.load(open(os.path.join(program, "manifest.json")))
    memory = last["memory"]
    run = {
        "ranks": ranks,
        "loss_at_last_step": last["loss"],
        # What the runtime's allocator charged (TrackedAllocator.h), the
        # plan's own bookkeeping, and the process's resident high-water mark.
        "activations_peak_bytes": memory["activations"]["peak"],
        "planned_step_peak_bytes": manifest.get("planned_step_peak_bytes"),
        "planned_replayed_peak_bytes": last["planned_activations"]["peak"],
        "workspace_peak_bytes": memory["workspace"]["peak"],
        "communication_peak_bytes": memory["communication"]["peak"],
        "step_total_peak_bytes": memory["total"]["peak"],
        "rss_peak_bytes": last["rss_peak_bytes"],
        "model_state_bytes": {k: memory[k]["current"] for k in ("parameters", "gradients", "optimizer_state")},
        f"{'tensor' if axis == 'tp' else 'sequence'}_axis_bytes_per_step":
            {c: axes[axis]["bytes"] for c, axes in last.get("comm", {}).items() if axis in axes},
    }
    print(f"{label:26} activations peak {run['activations_peak_bytes']:>12,} B "
          f"(planned {run['planned_step_peak_bytes']:,}), parameters "
          f"{run['model_state_bytes']['parameters']:>10,} B, loss {last['loss']:.6f}")
    return run
