#!/usr/bin/python3
"""The pipeline bubble, measured against the cost model's prediction.

A shape-only GPT of identical layers (colossal-model; a small vocabulary, so
the embedding and the head weigh little beside the layers) is built for two
pipeline ranks under 1F1B and interleaved 1F1B (two chunks per rank) with 4
and 8 microbatches, on the `host` cluster (this machine's measured rates).
Each program trains a few steps with --trace, seven times (--repeats); the
last step's trace gives each rank's time in its forward and backward calls
and the step's length. The measured bubble is the cost model's quantity: the share
of the pipeline's step (the longest rank's) the busiest rank (the most time
in calls) spends outside its calls; the median of the runs is set
beside the prediction for the same plan from `--emit=plan`: bubble /
(bubble + compute + exposed communication) of the plan's busiest pipeline
rank. Written as JSON.

  bench/pipeline_bubble.py BUILD_DIR OUT.json [--layers N --hidden N --heads N --seq N --vocab N --steps N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("build")
parser.add_argument("out")
parser.add_argument("--layers", type=int, default=8)
parser.add_argument("--hidden", type=int, default=256)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--seq", type=int, default=64)
parser.add_argument("--vocab", type=int, default=64)
parser.add_argument("--rows", type=int, default=2, help="rows per microbatch")
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--repeats", type=int, default=7, help="runs of each plan; the median is reported")
a = parser.parse_args()

build = os.path.abspath(a.build)
compiler = f"{build}/tools/colossal-compile/colossal-compile"
work = tempfile.mkdtemp(prefix="colossal-bubble-")
MPI = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", "2"]
# One core per rank: each rank's kernels on one thread.
env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

model = f"{work}/gpt.onnx"
subprocess.run([f"{build}/tools/colossal-model/colossal-model", "gpt", "--layers", str(a.layers), "--hidden",
                str(a.hidden), "--heads", str(a.heads), "--vocab", str(a.vocab), "--seq", str(a.seq), "-o", model],
               check=True)
result = {"model": {"layers": a.layers, "hidden": a.hidden, "heads": a.heads, "vocab": a.vocab, "seq": a.seq},
          "rows_per_microbatch": a.rows, "steps": a.steps, "repeats": a.repeats, "cluster": "host", "runs": []}
for schedule in ["1f1b", "interleaved"]:
    for m in [4, 8]:
        strategy = f"dp=1,tp=1,sp=1,pp=2,microbatches={m},schedule={schedule},zero=0,recompute=none" + \
            (",virtual_stages=2" if schedule == "interleaved" else "")
        batch = str(a.rows * m)
        plan_file = f"{work}/plan-{schedule}-{m}.json"
        planned = subprocess.run([compiler, model, "--emit=plan", "--target", "cpu", "--gpus", "2", "--batch", batch,
                                  "--seq", str(a.seq), "--strategy", strategy, "-o", plan_file, "--quiet"],
                                 capture_output=True, text=True)
        if planned.returncode not in (0, 3):
            sys.exit(f"planning {strategy} failed:\n{planned.stderr[-3000:]}")
        p = json.load(open(plan_file))["predicted"]
        predicted_idle = p["bubble_s"] / (p["bubble_s"] + p["compute_s"] + p["exposed_comm_s"])
        program = f"{work}/{schedule}-{m}"
        built = subprocess.run([compiler, model, "--target", "cpu", "--batch", batch, "--seq", str(a.seq),
                                "--strategy", strategy, "--init", "normal:0.02", "-o", program, "--quiet"],
                               capture_output=True, text=True, env=env)
        if built.returncode:
            sys.exit(f"building {strategy} failed:\n{built.stderr[-3000:]}")
        repeats = []
        for repeat in range(a.repeats):
            trace, log = f"{program}/trace{repeat}", f"{program}/log{repeat}.jsonl"
            run = subprocess.run(MPI + [f"{program}/model_train", "--steps", str(a.steps), "--trace", trace, "--log",
                                        log, "--quiet"], capture_output=True, text=True, env=env)
            if run.returncode:
                sys.exit(f"running {strategy} failed:\n{run.stderr[-3000:]}")
            ranks = [json.load(open(f"{trace}.rank-{r:05d}.json"))["otherData"] for r in range(2)]
            busy = [(1 - r["idle_fraction"]) * r["step_seconds"] for r in ranks]
            makespan = max(r["step_seconds"] for r in ranks)
            repeats.append({"step_seconds_per_rank": [r["step_seconds"] for r in ranks],
                            "busy_seconds_per_rank": busy, "bubble_fraction": 1 - max(busy) / makespan})
        measured = sorted(r["bubble_fraction"] for r in repeats)[len(repeats) // 2]
        row = {"schedule": schedule, "microbatches": m, "strategy": strategy, "repeats": repeats,
               "measured_bubble_fraction": measured, "predicted_bubble_fraction": predicted_idle,
               "predicted": {k: p[k] for k in ("step_time_s", "compute_s", "exposed_comm_s", "bubble_s")},
               "relative_error": measured / predicted_idle - 1 if predicted_idle > 0 else None,
               "uniform_formula": 1 / (1 + m * (2 if schedule == "interleaved" else 1) / (2 - 1))}
        result["runs"].append(row)
        each = ", ".join(f"{r['bubble_fraction']:.3f}" for r in repeats)
        print(f"{schedule:12} m={m}: bubble measured {measured:.3f} (runs {each}), predicted {predicted_idle:.3f} "
              f"({row['relative_error']:+.0%}), uniform formula {row['uniform_formula']:.3f}")
with open(a.out, "w") as f:
    json.dump(result, f, indent=1)
