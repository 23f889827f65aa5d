#!/usr/bin/env python3
"""Pipelined programs train exactly like one rank.

Each case compiles a fixture with a pipeline plan (--strategy pp=..., the
schedule, virtual stages, uneven stage layers, with data, tensor, Megatron
sequence and sequence-axis parallelism and recomputation), runs it under
mpirun on distinct rows per data-parallel rank and microbatch (ZeRO-1 and
optimizer offload over the data axis included), and checks:

- ten steps of SGD, AdamW and LAMB follow PyTorch's losses for the same
  global batch (reference.json) and the one-rank program's, within 1e-5;
- the first step's gradients, gathered from every rank's dump (a rank dumps
  the weights its stages hold; a tied weight is on two ranks), and the
  logged gradient norm equal PyTorch's, 1e-5 per tensor;
- each pipeline rank's memory, as the runtime's allocator charged it,
  against the plan's prediction for that rank (model states within 5%,
  activations within 7.5%);
- pipeline rank 0's point-to-point bytes and calls equal those derived here
  from the stage boundaries: one hidden-state tensor (microbatch rows x
  sequence (its slice under Megatron-SP or a sequence axis) x hidden, fp32)
  per boundary a rank's stage sends across, forward or backward, per
  microbatch;
- a pipeline's checkpoint resumes bit for bit, under one rank too, and
  one rank's under the pipeline; an export holds every stage's weights;
- a plan the search chose (--gpus 4 on small devices) is a pipeline, builds
  and trains like one rank;
- a stage killed, or one that stops answering, ends the job within 30 s,
  naming the rank or the stage waited for;
- bad plans (more stages than layers, stage layers that do not add up,
  virtual stages without the interleaved schedule, microbatches the
  interleaved schedule cannot group, ZeRO-2 and 3 with a pipeline) are
  refused with the cause.

  emitted_pipeline_programs.py COMPILER FIXTURES WORKDIR MPIRUN
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_checks import (  # noqa: E402
    check, check_refusals, compile_model, train, losses, worst_relative, batch_data, npy_floats, finish, WORK,
    optimizer_flags, runtime_name, safetensors, weight_error, check_counters, FIXTURES, COMPILER)

HIDDEN, SEQ = 16, 8
# (model, strategy, ranks, rows of the global batch, optimizers run)
ALL = ("sgd", "adamw", "lamb")
CASES = [
    ("gpt2", "pp=2", 2, 2, ALL),
    ("gpt2", "pp=2,schedule=gpipe,microbatches=2", 2, 2, ("adamw",)),
    ("gpt2_4layers", "pp=4,microbatches=2", 4, 2, ALL),
    ("gpt2_4layers", "pp=4,schedule=gpipe,microbatches=2", 4, 2, ("lamb",)),
    ("gpt2_4layers", "pp=2,schedule=interleaved,virtual_stages=2,microbatches=2", 2, 2, ALL),
    ("gpt2_4layers", "pp=2,stage_layers=1/3,recompute=full,microbatches=2", 2, 2, ("adamw",)),
    ("gpt2", "dp=2,pp=2,microbatches=2", 4, 4, ("adamw", "lamb")),
    ("gpt2", "dp=2,pp=2,zero=1,microbatches=2", 4, 4, ("adamw", "lamb", "sgd_plain")),
    ("llama", "dp=2,pp=2,zero=1,offload=optimizer", 4, 4, ("lamb",)),
    ("gpt2", "tp=2,pp=2", 4, 2, ("adamw",)),
    ("gpt2", "tp=2,sp_mode=megatron,pp=2", 4, 2, ALL),
    ("gpt2", "sp=2,sp_mode=all-to-all,pp=2", 4, 2, ("lamb",)),
    ("llama", "pp=2,microbatches=2", 2, 2, ALL),
    ("llama", "sp=2,sp_mode=ring,pp=2", 4, 2, ("adamw",)),
    ("llama_4layers", "pp=4,recompute=selective,microbatches=2", 4, 2, ("adamw", "sgd")),
    ("llama_4layers", "pp=2,stage_layers=3/1,schedule=gpipe", 2, 2, ("lamb",)),
]


def plan_of(strategy):
    items = dict(item.split("=") for item in strategy.split(","))
    number = lambda key: int(items.get(key, 1))  # noqa: E731
    return {"dp": number("dp"), "tp": number("tp"), "sp": number("sp"), "pp": number("pp"),
            "v": number("virtual_stages"), "m": number("microbatches"), "sp_mode": items.get("sp_mode", "none")}


def expected_sends(plan, rows):
    """Pipeline rank 0's sends in one step: (calls, bytes). Its virtual
    stages are 0, pp, 2 pp, ...; each sends its activations forward unless
    it is the last and its input's gradient back unless it is the first,
    once per microbatch, one hidden-state tensor each."""
    stages = plan["pp"] * plan["v"]
    per_microbatch = sum((s < stages - 1) + (s > 0) for s in range(0, stages, plan["pp"]))
    tokens = SEQ // (plan["tp"] if plan["sp_mode"] == "megatron" else plan["sp"])
    batch = rows // (plan["dp"] * plan["m"])
    calls = per_microbatch * plan["m"]
    return calls, calls * batch * tokens * HIDDEN * 4


MEMORY_ROWS = []


def check_stage_memory(program, log, plan, name, tag):
    """Each pipeline rank's memory, as its allocator charged it (rank 0's log
    and LOG.pipeline-rank-K), against the plan's prediction for that
    pipeline rank: parameters, gradients and optimizer state (its stages'
    weights, a tied one on both) within 5%, the activations peak (the
    microbatches it holds in flight, what it receives) within 5%."""
    predicted = json.load(open(f"{program}/manifest.json"))["predicted_pipeline_ranks"]
    check(len(predicted) == plan["pp"], f"{tag}: the plan predicts {len(predicted)} pipeline ranks")
    for k, want in enumerate(predicted):
        records = [json.loads(line) for line in open(log if k == 0 else f"{log}.pipeline-rank-{k}")]
        states = want["model_state_bytes_by_optimizer"][runtime_name(name)]
        worst = 0.0
        for category, bytes_ in states.items():
            got = max(r["memory"][category]["peak"] for r in records)
            worst = max(worst, abs(got - bytes_) / bytes_ if bytes_ else float(got != 0))
        activations = max(r["memory"]["activations"]["peak"] for r in records)
        act_error = abs(activations - want["activation_bytes"]) / want["activation_bytes"]
        MEMORY_ROWS.append((tag, k, worst, activations, want["activation_bytes"], act_error))
        check(worst <= 0.05, f"{tag}: pipeline rank {k}'s model states differ from the plan's by {worst:.1%}")
        check(act_error <= 0.05, f"{tag}: pipeline rank {k} held {activations} bytes of activations, the plan "
                                  f"predicts {want['activation_bytes']}")


def gradient_error(dump, grads_dir, ranks):
    """The worst relative L2 error of any dumped copy of any tensor against
    PyTorch's first-step gradient (tensors that are rounding noise about
    zero against the largest norm); every tensor must be dumped by some
    rank."""
    names = sorted(n[:-4] for n in os.listdir(grads_dir))
    want = {n: npy_floats(f"{grads_dir}/{n}.npy") for n in names}
    norms = {n: sum(x * x for x in w) ** 0.5 for n, w in want.items()}
    largest = max(norms.values())
    worst, where = 0.0, ""
    for name in names:
        copies = [d for d in [dump] + [f"{dump}/rank-{r:05d}" for r in range(1, ranks)]
                  if os.path.exists(f"{d}/{name}.npy")]
        if not copies:
            return float("inf"), f"{name} (dumped by no rank)"
        for d in copies:
            got = npy_floats(f"{d}/{name}.npy")
            if len(got) != len(want[name]):
                return float("inf"), f"{name} ({len(got)} elements)"
            difference = sum((a - b) ** 2 for a, b in zip(got, want[name])) ** 0.5
            error = difference / (norms[name] if norms[name] >= 1e-6 * largest else largest)
            if error > worst:
                worst, where = error, f"{name} ({d[len(WORK) + 1:]})"
    return worst, where


print(f"{'model':14} {'strategy':56} {'ranks':>5} {'optimizer':9} {'vs PyTorch':>10} {'vs 1 rank':>10}")
single = {}
for model, strategy, ranks, rows, optimizers in CASES:
    feed, reference, grads_dir = batch_data(model, rows)
    tag = f"{model}-" + strategy.replace(",", "-").replace("=", "").replace("/", "_")
    program = f"{WORK}/{tag}"
    built = compile_model(model, program, "--strategy", strategy, batch=rows)
    check(built.returncode == 0, f"{tag}: compile failed: {built.stderr[-2000:]}")
    if built.returncode:
        continue
    if (model, rows) not in single:
        single[(model, rows)] = f"{WORK}/{model}-{rows}-one-rank"
        one = compile_model(model, single[(model, rows)], batch=rows)
        check(one.returncode == 0, f"{model}: the one-rank build failed: {one.stderr[-2000:]}")
    plan = plan_of(strategy)
    for name in optimizers:
        hyper = reference["hyper_parameters"][name]
        log, one_log = f"{program}-{name}.log", f"{program}-{name}-one-rank.log"
        run = train(program, "--feed", feed, "--log", log, *optimizer_flags(name, hyper), ranks=ranks)
        check(run.returncode == 0, f"{tag} {name}: failed: {run.stderr[-2000:]}")
        one = train(single[(model, rows)], "--feed", feed, "--log", one_log, *optimizer_flags(name, hyper))
        if run.returncode or one.returncode:
            continue
        got = losses(log)
        vs_torch, vs_one = worst_relative(got, reference["losses"][name]), worst_relative(got, losses(one_log))
        print(f"{model:14} {strategy:56} {ranks:>5} {name:9} {vs_torch:>10.2e} {vs_one:>10.2e}")
        check(len(got) == 10 and vs_torch <= 1e-5, f"{tag} {name}: losses differ from PyTorch's by {vs_torch:.2e}")
        check(vs_one <= 1e-5, f"{tag} {name}: losses differ from one rank's by {vs_one:.2e}")
        comm = json.loads(open(log).readline())["comm"]
        sent = comm.get("send_recv", {}).get("pp", {})
        calls, sent_bytes = expected_sends(plan, rows)
        check(sent.get("calls") == calls and sent.get("bytes") == sent_bytes,
              f"{tag} {name}: pipeline rank 0 sent {sent} per step; the stage boundaries make {calls} calls, "
              f"{sent_bytes} bytes")
        if name == optimizers[0]:
            check_stage_memory(program, log, plan, name, tag)
        manifest = json.load(open(f"{program}/manifest.json"))
        predicted = {key: manifest[f"predicted_comm_{key}_per_step_by_optimizer"][runtime_name(name)].get("send_recv", {})
                     .get("pp") for key in ("bytes", "calls")}
        check(predicted == {"bytes": sent_bytes, "calls": calls},
              f"{tag} {name}: the plan predicts pipeline rank 0 sends {predicted}; it sent {sent}")
        # Every collective on every axis, bytes and calls (the pipeline
        # axis's sums of the loss, the tied weights' gradients and the norm
        # among them), as pipeline rank 0's counters saw them each step.
        check_counters(log, manifest["predicted_comm_bytes_per_step_by_optimizer"][runtime_name(name)], f"{tag} {name}",
                       calls=manifest["predicted_comm_calls_per_step_by_optimizer"][runtime_name(name)])
    dump, log = f"{program}-gradients", f"{program}-gradients.log"
    run = train(program, "--feed", feed, "--steps", "1", "--dump-gradients", dump, "--log", log, ranks=ranks)
    check(run.returncode == 0, f"{tag}: --dump-gradients failed: {run.stderr[-1500:]}")
    if run.returncode == 0:
        worst, where = gradient_error(dump, grads_dir, ranks)
        want_norm = sum(sum(x * x for x in npy_floats(f"{grads_dir}/{n}")) for n in os.listdir(grads_dir)) ** 0.5
        norm_error = abs(json.loads(open(log).readline())["grad_norm"] - want_norm) / want_norm
        print(f"{'':14} {'first-step gradients':56} {ranks:>5} {'':9} {worst:>10.2e}   (norm {norm_error:.1e}; "
              f"worst {where})")
        check(worst <= 1e-5, f"{tag}: the first-step gradient of {where} differs from PyTorch's by {worst:.2e}")
        check(norm_error <= 1e-5, f"{tag}: the gradient norm differs from PyTorch's by {norm_error:.2e}")

print(f"\n{'run':56} {'pp rank':>7} {'states':>7} {'activations':>11} {'predicted':>9} {'error':>6}")
for tag, k, states, got, want, error in MEMORY_ROWS:
    print(f"{tag:56} {k:>7} {states:>7.1%} {got:>11} {want:>9.0f} {error:>6.1%}")

# --trace: each rank's last step as a Chrome trace, one span per forward and
# backward call (microbatches x chunks of each), and the log's idle share.
program = f"{WORK}/gpt2_4layers-pp2-scheduleinterleaved-virtual_stages2-microbatches2"
feed = batch_data("gpt2_4layers", 2)[0]
run = train(program, "--feed", feed, "--steps", "2", "--trace", f"{WORK}/trace", "--log", f"{WORK}/trace.log", ranks=2)
check(run.returncode == 0, f"--trace failed: {run.stderr[-1500:]}")
if run.returncode == 0:
    for rank in range(2):
        trace = json.load(open(f"{WORK}/trace.rank-{rank:05d}.json"))
        calls = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "compute"]
        check(sorted(calls) == sorted(f"{kind}{m}.{chunk}" for kind in "FB" for m in range(2) for chunk in range(2)),
              f"--trace: rank {rank} traced the calls {calls}")
        check(0 <= trace["otherData"]["idle_fraction"] < 1, f"--trace: rank {rank}'s idle share {trace['otherData']}")
        sends = [e for e in trace["traceEvents"] if e["name"] == "send_recv pp" and e["tid"] in (1, 2)]
        check(len(sends) > 0, f"--trace: rank {rank} traced no pipeline sends on its communication streams")
    logged = [json.loads(line)["pipeline"] for line in open(f"{WORK}/trace.log")]
    check(len(logged) == 2 and all(0 <= p["idle_fraction"] < 1 for p in logged), f"--trace: the log says {logged}")
    print(f"--trace: 2 ranks x 8 calls traced; idle share of rank 0 {logged[-1]['idle_fraction']:.3f}")

# Without a pipeline: each rank traces its step calls (a microbatch's forward
# and backward are one call, "F0+B0"), the gradients' reduction and the
# optimizer, under the names the plan's predicted trace gives them.
program, plan_trace = f"{WORK}/gpt2-dp2-microbatches2", f"{WORK}/gpt2-dp2-predicted.json"
built = compile_model("gpt2", program, "--strategy", "dp=2,microbatches=2", batch=4)
planned = subprocess.run([COMPILER, f"{FIXTURES}/gpt2/gpt2_opset17.onnx", "--emit=plan", "--target", "cpu",
                          "--seq", "8", "--gpus", "2", "--batch", "4", "--strategy", "dp=2,microbatches=2",
                          "-o", f"{WORK}/gpt2-dp2-plan.json", "--trace", plan_trace, "--quiet"],
                         capture_output=True, text=True)
check(built.returncode == 0 and planned.returncode == 0,
      f"the dp=2 build or its plan failed: {built.stderr[-1500:]} {planned.stderr[-1500:]}")
if built.returncode == 0 and planned.returncode == 0:
    feed = batch_data("gpt2", 4)[0]
    run = train(program, "--feed", feed, "--steps", "2", "--trace", f"{WORK}/dp-trace", ranks=2)
    check(run.returncode == 0, f"--trace without a pipeline failed: {run.stderr[-1500:]}")
    predicted_events = [e for e in json.load(open(plan_trace))["traceEvents"] if e.get("ph") == "X"]
    predicted = [e["name"] for e in predicted_events if e["tid"] == 0]
    calls = ["F0+B0", "F1+B1"]
    check([n for n in predicted if "+" in n] == calls, f"the predicted trace's calls are {predicted}")
    # The communication streams (tids 1 and 2): one measured span per call,
    # as many per collective and axis as the plan's events count.
    planned_calls = {}
    for e in predicted_events:
        if e["tid"] > 0:
            planned_calls[e["name"]] = planned_calls.get(e["name"], 0) + e["args"]["calls"]
    tails = {"data-parallel reduction (exposed)", "optimizer"}
    for rank in range(2) if run.returncode == 0 else []:
        events = [e for e in json.load(open(f"{WORK}/dp-trace.rank-{rank:05d}.json"))["traceEvents"]
                  if e.get("ph") == "X"]
        names = [e["name"] for e in events if e["tid"] == 0]
        check([n for n in names if "+" in n] == calls and set(names) - set(calls) == tails,
              f"--trace without a pipeline: rank {rank} traced {names}")
        measured_calls = {}
        for e in events:
            if e["tid"] > 0:
                measured_calls[e["name"]] = measured_calls.get(e["name"], 0) + 1
        check(measured_calls == planned_calls and "all_reduce dp" in measured_calls,
              f"--trace: rank {rank}'s collectives {measured_calls}, the plan's {planned_calls}")
    print(f"--trace without a pipeline: predicted {predicted}, measured the same calls and {sorted(tails)}; "
          f"collectives per name {planned_calls} in both")

# Checkpoints: a pipeline saves at step 5 and resumes to step 10 bit for
# bit; the one-rank program resumes the pipeline's checkpoint, and the
# pipeline the one-rank program's (whatever wrote it, a checkpoint holds
# whole tensors); an export holds every stage's weights.
program, one = f"{WORK}/gpt2-dp2-pp2-zero1-microbatches2", f"{WORK}/gpt2-4-one-rank"
feed, reference = batch_data("gpt2", 4)[:2]
flags = ["--feed", feed, *optimizer_flags("adamw", reference["hyper_parameters"]["adamw"])]
whole = losses(f"{program}-adamw.log")
saved = train(program, *flags, "--steps", "5", "--save", f"{WORK}/pp-checkpoint", ranks=4)
check(saved.returncode == 0, f"a pipeline's --save failed: {saved.stderr[-1500:]}")
one_saved = train(one, *flags, "--steps", "5", "--save", f"{WORK}/one-checkpoint")
check(one_saved.returncode == 0, f"the one-rank --save failed: {one_saved.stderr[-1500:]}")
for runner, checkpoint, ranks, exact in [(program, "pp-checkpoint", 4, True), (one, "pp-checkpoint", 0, False),
                                         (program, "one-checkpoint", 4, False)]:
    log = f"{WORK}/resumed-{os.path.basename(runner)}-{checkpoint}.log"
    resumed = train(runner, *flags, "--steps", "10", "--resume", f"{WORK}/{checkpoint}", "--log", log, ranks=ranks)
    check(resumed.returncode == 0, f"{runner} --resume {checkpoint} failed: {resumed.stderr[-1500:]}")
    if resumed.returncode == 0:
        error = worst_relative(losses(log), whole[5:])
        check(losses(log) == whole[5:] if exact else error <= 1e-5,
              f"{os.path.basename(runner)} resumed from {checkpoint}: losses differ from the whole run's by {error:.2e}")
        print(f"resume {checkpoint} on {os.path.basename(runner)}: steps 6-10 differ by {error:.1e}")
exported = train(program, *flags, "--steps", "2", "--export", f"{WORK}/pp-export", ranks=4)
one_exported = train(one, *flags, "--steps", "2", "--export", f"{WORK}/one-export")
check(exported.returncode == 0 and one_exported.returncode == 0,
      f"--export failed: {exported.stderr[-1500:]} {one_exported.stderr[-1500:]}")
if exported.returncode == 0 and one_exported.returncode == 0:
    got, want = safetensors(f"{WORK}/pp-export/model.safetensors"), safetensors(f"{WORK}/one-export/model.safetensors")
    check(sorted(got) == sorted(want), f"a pipeline exported {sorted(set(got) ^ set(want))} unlike one rank")
    error, where = weight_error(want, got, batch_data("gpt2", 4)[2])
    check(error <= 1e-5, f"a pipeline's exported {where} differs from one rank's by {error:.2e}")
    print(f"--export: {len(got)} tensors, within {error:.1e} of one rank's (relative, worst {where})")

# A searched plan with a pipeline builds: on four devices of this machine's
# measured cluster description with 80 kB each beside the kernels'
# workspace, the best plan the search finds is pipelined; it trains like
# one rank on the same (synthetic) batch.
cluster = json.load(open(f"{FIXTURES}/../../docs/measurements/host-cluster-2-cores.json"))
cluster.update(name="four-small-devices", devices_per_node=4, memory_bytes=32 * 2**20 + 80000)
json.dump(cluster, open(f"{WORK}/small-devices.json", "w"))
searched, one = f"{WORK}/gpt2_4layers-searched", f"{WORK}/gpt2_4layers-8-one-rank"
built = compile_model("gpt2_4layers", searched, "--gpus", "4", "--cluster", f"{WORK}/small-devices.json", batch=8)
check(built.returncode == 0, f"--gpus 4 on small devices failed: {built.stderr[-1500:]}")
one_built = compile_model("gpt2_4layers", one, batch=8)
if built.returncode == 0 and one_built.returncode == 0:
    plan = json.load(open(f"{searched}/manifest.json"))["strategy"]
    check(plan["pp"] > 1, f"the search chose {plan} on devices that only a pipeline fits")
    run = train(searched, "--steps", "5", "--log", f"{searched}.log", ranks=4)
    alone = train(one, "--steps", "5", "--log", f"{one}.log")
    check(run.returncode == 0 and alone.returncode == 0, f"the searched plan failed: {run.stderr[-1500:]}")
    if run.returncode == 0 and alone.returncode == 0:
        error = worst_relative(losses(f"{searched}.log"), losses(f"{one}.log"))
        check(error <= 1e-5, f"the searched pipeline's losses differ from one rank's by {error:.2e}")
        print(f"--gpus 4 on 80 kB devices: searched {plan}; losses within {error:.1e} of one rank's")

# A stage that fails ends the whole job, non-zero, within 30 s: one killed
# (mpirun names its rank; pipeline rank k is world rank k here), and one
# that stops answering (its neighbours' receives time out, 5 s here, naming
# the stage they waited for: stage 1's neighbours, or a stage further down
# still waiting on them, whichever deadline passes first).
program = f"{WORK}/gpt2_4layers-pp4-microbatches2"
for fault, timeout, pattern in [("kill:2", "120", r"process rank 2 .*exited on signal 9"),
                                ("stop:1", "5", r"waiting for stage [12] \(pipeline rank [12]\): did not complete within 5 s")]:
    began = time.monotonic()
    run = train(program, "--steps", "5", ranks=4,
                extra_env={"COLOSSAL_FAULT_PIPELINE_STAGE": fault, "COLOSSAL_COLLECTIVE_TIMEOUT": timeout})
    elapsed = time.monotonic() - began
    output = run.stdout + run.stderr
    check(run.returncode != 0, f"a pipeline whose stage {fault} exited 0")
    check(elapsed < 30, f"a pipeline whose stage {fault} took {elapsed:.0f} s to end")
    check(re.search(pattern, output) is not None, f"a pipeline whose stage {fault}: no line matches /{pattern}/: "
                                                  f"{output[-1500:]}")
    print(f"stage fault {fault}: the job ended in {elapsed:.1f} s, exit status {run.returncode}")

# Bad plans, each refused with its cause.
refusals = []
for model, strategy, message in [
        ("gpt2", "pp=4", "4 stages (the plan's pp x virtual_stages) need at least one layer each"),
        ("gpt2", "pp=2,stage_layers=1/2", "stage_layers lists 2 stages holding 3 layers"),
        ("gpt2_4layers", "pp=3", "4 layers do not divide into 3 stages"),
        ("gpt2_4layers", "pp=2,virtual_stages=2", "only the interleaved schedule runs several model chunks per rank"),
        ("gpt2_4layers", "pp=2,schedule=interleaved,virtual_stages=2,microbatches=3",
         "needs the microbatches (3) to be a multiple of the pipeline ranks (2)"),
        ("gpt2", "dp=2,pp=2,zero=2", "runs with zero=1, not zero=2"),
        ("gpt2", "dp=2,pp=2,zero=3", "runs with zero=1, not zero=3")]:
    result = compile_model(model, f"{WORK}/refused", "--strategy", strategy, batch=6)
    refusals.append((f"{model} --strategy {strategy}", result, message))
check_refusals(refusals)
finish()
