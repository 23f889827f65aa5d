#!/usr/bin/python3
"""Predicted against measured step time of emitted host programs.

colossal-bench measures this machine into a cluster description (GEMM by
shape, attention, memory-bound kernels, the optimizer, MPI collectives by
size; or --cluster FILE reuses one), again before each round of runs: a
virtual machine's core speed drifts by a third over minutes, so each
round's runs are predicted with the rates measured just before them. A shape-only GPT (colossal-model) is
built under several plans on 1 and 2 ranks, each rank on one core; each
program trains --steps steps, --repeats times, and a run's measured step is
the median of its steps' wall times after the first two (the log's `time`
differences: data, step, optimizer, collectives). The programs run in turns,
repeat after repeat, so that the machine's slow spells fall on all alike. The prediction is
`colossal-compile --emit=plan --cluster FILE` for the same plan. Reported per
plan: the median over repeats, the prediction and their ratio; over the
2-rank plans, the measured and predicted order (Kendall's tau). JSON out.

  bench/host_step_prediction.py BUILD_DIR OUT.json [--cluster FILE] [--repeats N] [--steps N]
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("build")
parser.add_argument("out")
parser.add_argument("--cluster", help="a colossal-cluster/1 file; measured by colossal-bench when absent")
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--hidden", type=int, default=256)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--seq", type=int, default=128)
parser.add_argument("--vocab", type=int, default=512)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--only", help="run the plans whose name contains this")
a = parser.parse_args()

build = os.path.abspath(a.build)
compiler = f"{build}/tools/colossal-compile/colossal-compile"
work = tempfile.mkdtemp(prefix="colossal-step-")
# One core per rank: each rank's kernels on one thread.
env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def mpi(ranks):
    # mpirun's own binding (a core per rank for one or two), as a user runs
    # the program.
    return ["mpirun", "--oversubscribe", "--allow-run-as-root", "-x", "OPENBLAS_NUM_THREADS",
            "-x", "OMP_NUM_THREADS", "-np", str(ranks)]


def measure_cluster(path):
    subprocess.run(mpi(2) + [f"{build}/tools/colossal-bench/colossal-bench", "--device", "cpu", "--name",
                             "host-measured", "-o", path], check=True, env=env, stdout=subprocess.DEVNULL)
    return path


cluster = a.cluster or measure_cluster(f"{work}/host-cluster.json")

model = f"{work}/gpt.onnx"
subprocess.run([f"{build}/tools/colossal-model/colossal-model", "gpt", "--layers", str(a.layers), "--hidden",
                str(a.hidden), "--heads", str(a.heads), "--vocab", str(a.vocab), "--seq", str(a.seq), "-o", model],
               check=True, stdout=subprocess.DEVNULL)

# Every key given: --emit=plan searches the keys a strategy leaves open
# (tp=2 alone plans Megatron-SP, pp=2 the interleaved schedule), while -o DIR
# builds their defaults.
BASE = dict(dp=1, tp=1, sp=1, pp=1, microbatches=1, zero=0, recompute="none", sp_mode="none", offload="none",
            schedule="1f1b", virtual_stages=1)
PLANS = [
    ("1 rank", dict()),
    ("1 rank, 2 microbatches", dict(microbatches=2)),
    ("1 rank, full recomputation", dict(recompute="full")),
    ("dp=2", dict(dp=2)),
    ("dp=2, ZeRO-3", dict(dp=2, zero=3)),
    ("dp=2, 2 microbatches", dict(dp=2, microbatches=2)),
    ("dp=2, selective recomputation", dict(dp=2, recompute="selective")),
    ("tp=2", dict(tp=2)),
    ("tp=2, Megatron-SP", dict(tp=2, sp_mode="megatron")),
    ("sp=2 all-to-all", dict(sp=2, sp_mode="all-to-all")),
    ("sp=2 ring", dict(sp=2, sp_mode="ring")),
    ("pp=2, 4 microbatches", dict(pp=2, microbatches=4)),
]


def strategy_of(changes):
    s = dict(BASE, **changes)
    return ",".join(f"{k}={v}" for k, v in s.items())


def ranks_of(changes):
    s = dict(BASE, **changes)
    return s["dp"] * s["tp"] * s["sp"] * s["pp"]


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2


result = {"model": {"kind": "gpt", "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "vocab": a.vocab,
                    "seq": a.seq}, "global_batch": a.batch, "steps": a.steps, "repeats": a.repeats,
          "cluster_remeasured_each_round": not a.cluster, "runs": []}
# Plan and build every program first, then run them in turns, so that a
# slow spell of the machine falls on every plan alike.
plans = []
for name, changes in PLANS:
    if a.only and a.only not in name:
        continue
    strategy, ranks = strategy_of(changes), ranks_of(changes)
    common = [model, "--target", "cpu", "--cluster", cluster, "--gpus", str(ranks), "--batch", str(a.batch), "--seq",
              str(a.seq), "--strategy", strategy, "--quiet"]
    plan_file = f"{work}/plan.json"
    # The plan the partitioner builds, so the prediction is the built program's.
    program = f"{work}/program-{len(plans)}"
    built = subprocess.run([compiler] + common + ["--init", "normal:0.02", "-o", program], capture_output=True,
                           text=True, env=env)
    if built.returncode:
        sys.exit(f"building {strategy} failed:\n{built.stderr[-3000:]}")
    built_strategy = json.load(open(f"{program}/manifest.json"))["strategy"]
    plans.append({"name": name, "strategy": strategy, "given": dict(BASE, **changes), "ranks": ranks,
                  "program": program, "common": common, "built_strategy": built_strategy,
                  "repeats": []})


predictions = {}


def predicted_with(p, cluster_file):
    """The plan the partitioner builds, so the prediction is the built program's
    (planned once per description: a given --cluster serves every round)."""
    key = (p["program"], cluster_file)
    if key not in predictions:
        predictions[key] = plan_with(p, cluster_file)
    return predictions[key]


def plan_with(p, cluster_file):
    plan_file = f"{work}/plan.json"
    command = [compiler] + p["common"] + ["--emit=plan", "--buildable-only", "-o", plan_file]
    command[command.index("--cluster") + 1] = cluster_file
    planned = subprocess.run(command, capture_output=True, text=True)
    if planned.returncode not in (0, 3):
        sys.exit(f"planning {p['strategy']} failed:\n{planned.stderr[-3000:]}")
    plan = json.load(open(plan_file))
    # The prediction must be the built program's plan: every key the
    # manifest records, and every key given (the schedule is not in the
    # manifest).
    expected = dict({k: str(v) for k, v in p["given"].items()}, **{k: str(v) for k, v in p["built_strategy"].items()})
    differ = {k: (v, plan["strategy"].get(k)) for k, v in expected.items() if str(plan["strategy"].get(k)) != v}
    if differ:
        sys.exit(f"{p['name']}: the plan predicted is not the program built (built, planned): {differ}")
    return plan["predicted"]


clusters = []
for repeat in range(a.repeats):
    # This round's rates: measured now, unless a description was given.
    round_cluster = cluster if a.cluster or repeat == 0 else measure_cluster(f"{work}/host-cluster-{repeat}.json")
    clusters.append(json.load(open(round_cluster)))
    for p in plans:
        p.setdefault("predictions", []).append(predicted_with(p, round_cluster))
        log = f"{p['program']}/log{repeat}.jsonl"
        run = subprocess.run(mpi(p["ranks"]) + [f"{p['program']}/model_train", "--steps", str(a.steps), "--log", log,
                                                "--quiet"], capture_output=True, text=True, env=env)
        if run.returncode:
            sys.exit(f"running {p['strategy']} failed:\n{run.stderr[-3000:]}")
        lines = [json.loads(line) for line in open(log)]
        times = [line["time"] for line in lines]
        steps = [b - t for t, b in zip(times, times[1:])][1:]
        p["repeats"].append({"step_s": median(steps), "predicted_step_s": p["predictions"][-1]["step_time_s"],
                             "compute_s": median([line["seconds"]["step"] for line in lines[2:]]),
                             "optimizer_s": median([line["seconds"]["optimizer"] for line in lines[2:]])})

for p in plans:
    repeats = p["repeats"]
    # The round whose prediction is the median one stands for the plan.
    predicted = sorted(p["predictions"], key=lambda e: e["step_time_s"])[len(p["predictions"]) // 2]
    measured = median([r["step_s"] for r in repeats])
    row = {"plan": p["name"], "strategy": p["strategy"], "ranks": p["ranks"], "repeats": repeats,
           "measured_step_s": measured, "predicted_step_s": predicted["step_time_s"],
           "predicted": {k: v for k, v in predicted.items() if k.endswith("_s")},
           "predicted_over_measured": predicted["step_time_s"] / measured}
    result["runs"].append(row)
    each = ", ".join(f"{r['step_s'] * 1e3:.0f}" for r in repeats)
    print(f"{p['name']:30} {p['ranks']} ranks: measured {measured * 1e3:6.1f} ms (runs {each}; compute "
          f"{median([r['compute_s'] for r in repeats]) * 1e3:.1f}, optimizer "
          f"{median([r['optimizer_s'] for r in repeats]) * 1e3:.1f}), predicted {predicted['step_time_s'] * 1e3:6.1f} ms "
          f"(compute {predicted['compute_s'] * 1e3:.1f}, optimizer {predicted['optimizer_s'] * 1e3:.1f}, comm "
          f"{predicted['exposed_comm_s'] * 1e3:.1f}, bubble {predicted['bubble_s'] * 1e3:.1f}): "
          f"{row['predicted_over_measured'] - 1:+.0%}")


def kendall_tau(xs, ys):
    concordant = discordant = 0
    for i, j in itertools.combinations(range(len(xs)), 2):
        s = (xs[i] - xs[j]) * (ys[i] - ys[j])
        concordant += s > 0
        discordant += s < 0
    pairs = len(xs) * (len(xs) - 1) // 2
    return (concordant - discordant) / pairs if pairs else None


two = [r for r in result["runs"] if r["ranks"] == 2]
result["two_rank_kendall_tau"] = kendall_tau([r["measured_step_s"] for r in two], [r["predicted_step_s"] for r in two])
result["worst_error"] = max(abs(r["predicted_over_measured"] - 1) for r in result["runs"])
print(f"worst |predicted / measured - 1| {result['worst_error']:.1%}; Kendall tau over the {len(two)} 2-rank plans "
      f"{result['two_rank_kendall_tau']}")
result["clusters"] = clusters
with open(a.out, "w") as f:
    json.dump(result, f, indent=1)
