#!/usr/bin/env python3
"""What the emitted-program tests share: compiling a fixture, running its
program (under mpirun for several ranks), reading logs and checkpoints, and
the checks against the plan (bytes, calls, model-state memory, step peak).

A test script imports it with its arguments on the command line:

  SCRIPT COMPILER FIXTURES WORKDIR MPIRUN

WORKDIR is emptied first. `check` records a failure; `finish` prints the
memory tables and exits nonzero when anything failed.
"""
import array
import ast
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_runs import optimizer_flags, safetensors  # noqa: E402

COMPILER, FIXTURES, WORK, MPIRUN = sys.argv[1:5]
MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--mca",
             "btl_vader_single_copy_mechanism", "none"]
MODELS = ["mlp", "cnn", "gpt2", "bert", "llama", "vit"]
# A single rank's checkpoint file.
shard = "rank-00000-of-00001.safetensors"
failures = []

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


# The fixtures' batch per rank and microbatch: 2, or the one a file fixes.
FIXED_BATCH = {"mlp": 4}


def compile_model(model, out, *extra, batch=None):
    batch = batch or FIXED_BATCH.get(model, 2)
    args = [COMPILER, f"{FIXTURES}/{model}/{model}_opset17.onnx", "-o", out, "--quiet", "--batch", str(batch), "--seq",
            "8"]
    trainable = f"{FIXTURES}/{model}/trainable.txt"
    if os.path.exists(trainable):
        args += ["--trainable", trainable]
    return subprocess.run(args + list(extra), capture_output=True, text=True)


def train(program, *args, ranks=0):
    launcher = [MPIRUN, *MPI_FLAGS, "-np", str(ranks)] if ranks else []
    env = dict(os.environ)
    if ranks:
        # OpenMPI's unloaded plugins keep allocations LeakSanitizer cannot
        # name; single-process runs keep leak checking.
        env.update(OPENBLAS_NUM_THREADS="1", OMPI_MCA_mpi_yield_when_idle="1", COLOSSAL_COLLECTIVE_TIMEOUT="120",
                   ASAN_OPTIONS="detect_leaks=0")
    return subprocess.run(launcher + [f"{program}/model_train", "--quiet", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def repeat_batch(source, target, times):
    """Copies a .npy file with its rows repeated `times` times along axis 0."""
    data = open(source, "rb").read()
    header_length = struct.unpack("<H", data[8:10])[0]
    header = ast.literal_eval(data[10:10 + header_length].decode("latin1"))
    body = data[10 + header_length:]
    shape = (header["shape"][0] * times,) + tuple(header["shape"][1:])
    text = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (header["descr"], shape)
    text += " " * ((64 - (10 + len(text) + 1) % 64) % 64) + "\n"
    with open(target, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1") + body * times)


def npy_floats(path):
    """The float32 values of a .npy file."""
    data = open(path, "rb").read()
    header_length = struct.unpack("<H", data[8:10])[0]
    return array.array("f", data[10 + header_length:])


def weight_error(single, parallel, grads_dir):
    """The largest relative L2 distance ||x - y|| / ||x|| of a weight tensor
    between two runs, over the elements whose PyTorch first-step gradient is
    at least 1e-4 of the model's largest. Below that, float32 reassociation
    (about 1e-7 of the largest terms summed) exceeds 1e-3 of the gradient,
    and Adam's and LAMB's per-element normalisation turns it into weight
    differences of that order; at zero in exact arithmetic (a key
    projection's bias cannot change the softmax) the gradient is pure
    rounding, normalised into steps the size of the learning rate."""
    grads = {key: npy_floats(f"{grads_dir}/{key}.npy") for key in single
             if os.path.exists(f"{grads_dir}/{key}.npy")}
    largest = max(max(abs(g) for g in grad) for grad in grads.values())
    worst, where = 0.0, ""
    for key, grad in grads.items():
        kept = [(x, y) for x, y, g in zip(single[key], parallel[key], grad) if abs(g) > 1e-4 * largest]
        norm = sum(x * x for x, _ in kept) ** 0.5
        if not kept or norm == 0:
            continue
        error = sum((x - y) ** 2 for x, y in kept) ** 0.5 / norm
        if error > worst:
            worst, where = error, key
    return worst, where


def losses(log):
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


def worst_relative(got, want):
    return max(abs(g - w) / abs(w) for g, w in zip(got, want)) if len(got) == len(want) else float("inf")



def worst_weight_error(reference_checkpoint, run, ranks, model):
    """The largest weight error of any rank's checkpoint against one rank's."""
    a = safetensors(reference_checkpoint)
    worst, where = 0.0, ""
    for r in range(ranks):
        b = safetensors(f"{run}/rank-{r:05d}-of-{ranks:05d}.safetensors")
        error, key = weight_error(a, b, f"{FIXTURES}/{model}/grads")
        if error >= worst:
            worst, where = error, key
    return worst, where


MODEL_STATES = ("parameters", "gradients", "optimizer_state")
memory_rows = []


def check_model_states(log, predicted, tag, space="memory"):
    """Every step's peak bytes of parameters, gradients and optimizer state
    on rank 0 (the runtime's memory tracker; `space` names the log's device
    or pinned host memory) are within 5% of the plan's per-rank model states
    (the ZeRO formulas of the cost model); what the plan puts at zero is
    zero."""
    worst = 0.0
    measured = {}
    for line in open(log):
        memory = json.loads(line)[space]
        for category in MODEL_STATES:
            got, want = memory[category]["peak"], predicted[category]
            measured[category] = got
            worst = max(worst, abs(got - want) / want if want else float(got != 0))
    check(worst <= 0.05, f"{tag}: model states {measured} bytes, the plan says {predicted}")
    memory_rows.append((tag, measured, predicted, worst))


step_rows = []


def check_step_peak(log, program, tag):
    """The step frees each value after its last use: the activations peak
    the runtime measured at every step equals the compiler's plan exactly,
    and is below what holding every value would take."""
    manifest = json.load(open(f"{program}/manifest.json"))
    planned, every = manifest["planned_step_peak_bytes"], manifest["step_value_bytes"]
    peaks = {json.loads(line)["memory"]["activations"]["peak"] for line in open(log)}
    check(peaks == {planned}, f"{tag}: step peaks {sorted(peaks)} bytes, the compiler planned {planned}")
    check(planned < every, f"{tag}: the planned peak {planned} is not below holding every value ({every})")
    step_rows.append((tag, sorted(peaks), planned, every, manifest.get("predicted_activation_bytes_per_rank")))


def check_counters(log, predicted, tag, calls=None):
    """Every step's counters equal the plan's bytes per collective and axis
    (and its calls, when given)."""
    for line in open(log):
        comm = json.loads(line)["comm"]
        measured = {c: {axis: e["bytes"] for axis, e in axes.items()} for c, axes in comm.items()}
        check(measured == predicted, f"{tag}: the program moved {measured} bytes, the plan says {predicted}")
        if calls is not None:
            made = {c: {axis: e["calls"] for axis, e in axes.items()} for c, axes in comm.items()}
            check(made == calls, f"{tag}: the program made {made} collective calls, the plan says {calls}")


def check_overlap(log, buckets, tag):
    """The host step reports every gradient as it computes it: every bucket's
    all-reduce started before the step returned (GradientBuckets.h)."""
    for line in open(log):
        got = json.loads(line).get("gradient_buckets")
        check(got == {"total": buckets, "started_during_step": buckets},
              f"{tag}: gradient buckets {got}, expected all {buckets} started during the step")


def check_prefetch(log, microbatches, tag):
    """ZeRO-3 (ParameterPrefetch.h): the step's gathers are the all-gathers
    the counters saw; the first call of a run learns their order, and from
    then on every gather started before the step asked for it."""
    for line in open(log):
        record = json.loads(line)
        gathers, calls = record["zero3_gathers"], record["comm"]["all_gather"]["dp"]["calls"]
        learning = gathers["total"] // microbatches if record["step"] == 1 else 0
        check(gathers["total"] == calls and gathers["prefetched"] == gathers["total"] - learning,
              f"{tag} step {record['step']}: gathers {gathers}, {calls} all-gathers; expected all but "
              f"{learning} prefetched")


def gradient_buckets(program, capacity):
    """How many all-reduces the trainer's bucketing makes (GradientBuckets.h:
    trainable float32 gradients in reverse parameter order, a bucket closed
    when the next tensor would take it past `capacity` bytes)."""
    sizes = []
    for p in json.load(open(f"{program}/manifest.json"))["parameters"]:
        if p["trainable"]:
            n = 1
            for d in p["shape"]:
                n *= d
            sizes.append(4 * n)
    buckets, filled = 0, None
    for size in reversed(sizes):
        if filled is None or filled + size > capacity:
            buckets, filled = buckets + 1, 0
        filled += size
    return buckets



def check_refusals(cases):
    """Bad input: each (what, completed process, message) failed with a
    nonzero exit and an error saying `message`."""
    for what, result, message in cases:
        ok = result.returncode != 0 and message in result.stderr
        print(f"bad input, {what}: {'refused' if ok else 'NOT REFUSED AS EXPECTED'}: {result.stderr.strip()[:160]}")
        check(ok, f"{what}: expected a failure saying '{message}', got {result.returncode}: {result.stderr}")


def repeated_feed(model, times):
    """The fixture's feed with every file's batch repeated `times` times (a
    mean loss over repeated rows is the same loss, so the trajectory is still
    PyTorch's), written once under WORKDIR."""
    target = f"{WORK}/{model}-feed{2 * times}"
    if not os.path.exists(target):
        os.makedirs(target)
        for name in os.listdir(f"{FIXTURES}/{model}/feed"):
            repeat_batch(f"{FIXTURES}/{model}/feed/{name}", f"{target}/{name}", times)
    return target


OFFLOAD_HEADER = (f"{'model':8} {'offload':8} {'optimizer':9} {'worst loss error vs PyTorch':>28} "
                  f"{'worst weight error vs 1 rank':>30}")


def check_offload(model, ranks):
    """Optimizer offload (ZeRO-Offload): each rank's ZeRO-2 shard of the
    optimizer state lives in pinned host memory with fp32 copies of the
    shard's weights and gradients, and the host runs the update. The kernels
    are the same, on copies, so the losses equal those of the same run
    without offload bit for bit (ZeRO-2 on two ranks, whose logs
    `{model}-{name}-zero2-x2-n.log` must exist; one rank replicated,
    `{model}-{name}.log`); the bytes each way equal the plan's; the device
    keeps no optimizer state; the host keeps what the plan says. One rank
    offloads its whole state."""
    reference = json.load(open(f"{FIXTURES}/{model}/reference.json"))
    program = f"{WORK}/{model}-offload-x{ranks}"
    strategy = "zero=2,microbatches=2,offload=optimizer" if ranks == 2 else "offload=optimizer"
    built = compile_model(model, program, "--gpus", str(ranks), "--strategy", strategy, batch=4 if ranks == 2 else 2)
    check(built.returncode == 0, f"{model} {strategy}: {built.stderr[-2000:]}")
    if built.returncode:
        return
    manifest = json.load(open(f"{program}/manifest.json"))
    check(manifest["strategy"]["offload"] == "optimizer", f"{model}: the manifest records {manifest['strategy']}")
    moved = manifest["predicted_offload_bytes_per_step"]
    for name in (["adamw", "lamb"] if ranks == 2 else ["adamw"]):
        flags = optimizer_flags(name, reference["hyper_parameters"][name])
        tag = f"{model}-{name}-offload-x{ranks}"
        offload_feed = repeated_feed(model, 2) if ranks == 2 else f"{FIXTURES}/{model}/feed"
        run = train(program, "--feed", offload_feed, "--log", f"{WORK}/{tag}.log", "--save", f"{WORK}/{tag}", *flags,
                    ranks=ranks if ranks > 1 else 0)
        check(run.returncode == 0, f"{tag}: run failed: {run.stderr[-1500:]}")
        if run.returncode:
            continue
        log = f"{WORK}/{tag}.log"
        got = losses(log)
        loss_error = worst_relative(got, reference["losses"][name])
        without = f"{WORK}/{model}-{name}-zero2-x2-n.log" if ranks == 2 else f"{WORK}/{model}-{name}.log"
        same = os.path.exists(without) and got == losses(without)
        check(same, f"{tag}: the losses differ from the same run without offload ({without})")
        reference_run = f"{WORK}/{model}-{name}-4-1/{shard}" if ranks == 2 else None
        worst_weight, where = (worst_weight_error(reference_run, f"{WORK}/{tag}", ranks, model)
                               if reference_run and os.path.exists(reference_run) else (0.0, "one rank"))
        if ranks > 1:
            check_counters(log, manifest["predicted_comm_bytes_per_step_by_optimizer"][name], tag)
        for line in open(log):
            measured = json.loads(line)["offload"]
            check(measured == moved, f"{tag}: moved {measured} bytes to and from the host, the plan says {moved}")
        check_model_states(log, manifest["predicted_model_state_bytes_per_rank_by_optimizer"][name],
                           f"{model} {name} offload x{ranks} device")
        check_model_states(log, manifest["predicted_pinned_model_state_bytes_per_rank_by_optimizer"][name],
                           f"{model} {name} offload x{ranks} host", space="pinned_memory")
        print(f"{model:8} {f'x{ranks}':8} {name:9} {loss_error:28.2e} {worst_weight:30.2e}  "
              f"({where}; {moved['to_host']:.0f} B down, {moved['to_device']:.0f} B up per step, measured = "
              f"predicted; losses bit for bit those without offload)")
        check(loss_error <= 1e-5, f"{tag}: offloaded losses differ from PyTorch's by {loss_error:.2e}")
        check(worst_weight <= 1e-5, f"{tag}: final weights differ from one rank's by {worst_weight:.2e} ({where})")


RECOMPUTE_HEADER = f"{'model':8} {'recompute':16} {'optimizer':9} {'step peak, bytes':>18} {'without':>10}"


def check_recompute(model, where, recompute_feed, extra, plain, plain_log, batch, granularity="full"):
    """Recomputation, full or selective: the backward pass re-runs each
    layer's forward ops (all of them, or all but the contractions) from the
    layer's checkpoints (passes/memory/Recompute.h). The same ops on the
    same inputs: the losses equal those of `plain_log` (the same run without
    recomputation) bit for bit, the step's measured peak equals the
    compiler's plan at every step, and on one rank the plan is below the
    peak of `plain` (the program without). Under ZeRO-3 (`extra` names the
    strategy) the re-run layers read their weights again: the bytes still
    equal the plan's."""
    reference = json.load(open(f"{FIXTURES}/{model}/reference.json"))
    label = f"{granularity} {where}"
    program = f"{WORK}/{model}-recompute-{label.replace(' ', '-')}"
    built = compile_model(model, program, *(extra or ["--strategy", f"recompute={granularity}"]), batch=batch)
    check(built.returncode == 0, f"{model} recompute={granularity}: {built.stderr[-2000:]}")
    if built.returncode or not os.path.exists(f"{plain}/manifest.json"):
        return
    manifest = json.load(open(f"{program}/manifest.json"))
    check(manifest["strategy"]["recompute"] == granularity, f"{model}: the manifest records {manifest['strategy']}")
    planned, without = manifest["planned_step_peak_bytes"], json.load(open(f"{plain}/manifest.json"))["planned_step_peak_bytes"]
    # One rank: activations dominate, and recomputation must lower the peak.
    # Under ZeRO-3 at a microbatch of one 8-token sample the fixture's
    # activations (512 bytes each) are smaller than the weight views a
    # re-run layer holds (up to 4 KiB): reported, not required.
    if not extra:
        check(planned < without, f"{model} {label}: recomputation plans a step peak of {planned} bytes, not below {without}")
    # Both optimizers on GPT-2 one rank; LAMB (two norm completions) elsewhere.
    for name in (["adamw", "lamb"] if model == "gpt2" and not extra else ["lamb"]):
        tag = f"{model}-{name}-recompute-{label.replace(' ', '-')}"
        log = f"{WORK}/{tag}.log"
        run = train(program, "--feed", recompute_feed, "--log", log,
                    *optimizer_flags(name, reference["hyper_parameters"][name]), ranks=2 if extra else 0)
        check(run.returncode == 0, f"{tag}: run failed: {run.stderr[-1500:]}")
        if run.returncode:
            continue
        same_as = f"{WORK}/" + plain_log.format(model=model, name=name)
        check(os.path.exists(same_as) and losses(log) == losses(same_as),
              f"{tag}: the losses differ from the same run without recomputation ({same_as})")
        check_step_peak(log, program, tag)
        if extra:
            check_counters(log, manifest["predicted_comm_bytes_per_step_by_optimizer"][name], tag)
        print(f"{model:8} {label:16} {name:9} {planned:18} {without:10}  ({planned / without:.2f} of the peak without; "
              f"losses bit for bit those without recomputation{'; bytes measured = predicted' if extra else ''})")


def finish():
    """Prints what every run measured against the plan and exits: nonzero
    when any check failed."""
    # The step's own values, freed after their last use: measured = planned.
    # Beside them the cost model's activation estimate for the run (what the
    # search weighs plans by), within 5% of the measured peak: on these tiny
    # fixtures a weight weighs as much as a layer's activations, so every
    # weight-sized temporary the estimate missed would show.
    print(f"{'model':8} {'measured step peak':>18} {'planned':>10} {'every value held':>17} {'cost model':>11}  bytes")
    ratios = []
    for tag, peaks, planned, every, predicted in step_rows:
        estimate = f"{predicted:>11.0f} ({predicted / planned:.3f})" if predicted else f"{'-':>11}"
        if predicted:
            ratios.append(predicted / planned)
            check(abs(predicted / planned - 1) <= 0.05,
                  f"{tag}: the cost model's activation estimate {predicted:.0f} is not within 5% of the measured "
                  f"step peak {planned}")
        print(f"{tag:8} {', '.join(map(str, peaks)):>18} {planned:>10} {every:>17} {estimate}  "
              f"({every / planned:.1f}x less than every value)")
    if ratios:
        within = sum(abs(r - 1) <= 0.05 for r in ratios)
        print(f"cost model / measured activation peak: {min(ratios):.3f} to {max(ratios):.3f}, "
              f"{within} of {len(ratios)} runs within 5%")

    # The plan's memory is right for the model states: every run above logged
    # its peak bytes per category, within 5% of the prediction (the padding of
    # a shard is the difference).
    print(f"{'run':30} {'parameters':>21} {'gradients':>21} {'optimizer state':>21}  measured / predicted bytes per rank")
    for tag, measured, predicted, worst in memory_rows:
        cells = " ".join(f"{measured[c]:>10}/{predicted[c]:<10.0f}" for c in MODEL_STATES)
        print(f"{tag:30} {cells}  worst {worst:.1e}")
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
