"""Builds the emitted CUDA programs here and trains them on a GPU elsewhere.

    python3 tools/gpu_train_check.py build DIR [--gpt2-124m MODEL.onnx]
        (a machine with colossal-compile; no GPU needed) compiles every case
        for --target cuda, the cases without a PyTorch trajectory also for the
        host, copies the shared libraries the programs need that a CUDA
        machine may lack (MPI, OpenBLAS) into DIR/lib.
    python3 tools/gpu_train_check.py run DIR OUT
        (the GPU machine) trains every case for ten steps and compares its
        losses with PyTorch's (the fixture's reference.json) or with the host
        program's, then the GPT-2 124M benchmark when it was built; writes
        OUT/cuda-training.json (losses, step times and memory of every run),
        the step logs to DIR/logs.

Bounds: float32 programs within 1e-5 relative of PyTorch float32 (1e-4 of
the host program); bf16 and fp16 (16-bit numerics, docs/training-step.md)
within ten unit roundoffs of PyTorch float32.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "codegen"))
from fixture_runs import optimizer_flags  # noqa: E402

FIXTURES = os.path.join(ROOT, "test", "fixtures")
BOUND = {"fp32": 1e-5, "bf16": 10 * 2.0 ** -9, "fp16": 10 * 2.0 ** -12}
HOST_BOUND = 1e-4
ALL_OPTIMIZERS = ("sgd", "adamw", "lamb", "lars")

# name, model, precision, batch, compile flags, reference ("" for none: the
# host program is the reference), optimizers.
CASES = [
    ("mlp", "mlp", "fp32", 4, [], "reference.json", ALL_OPTIMIZERS),
    ("gpt2", "gpt2", "fp32", 2, [], "reference.json", ALL_OPTIMIZERS),
    ("bert", "bert", "fp32", 2, [], "reference.json", ALL_OPTIMIZERS),
    ("llama", "llama", "fp32", 2, [], "reference.json", ALL_OPTIMIZERS),
    ("gpt2-bf16", "gpt2", "bf16", 2, [], "reference.json", ("adamw", "lamb")),
    ("llama-fp16", "llama", "fp16", 2, [], "reference.json", ("adamw", "lamb")),
    ("bert-bf16", "bert", "bf16", 2, [], "reference.json", ("adamw",)),
    ("gpt2-recompute", "gpt2", "fp32", 2, ["--strategy", "recompute=full"], "reference.json", ("adamw",)),
    ("gpt2-zero1", "gpt2", "fp32", 2, ["--strategy", "zero=1"], "reference.json", ("adamw", "lamb")),
    ("gpt2-zero2", "gpt2", "fp32", 2, ["--strategy", "zero=2"], "reference.json", ("adamw", "lamb")),
    ("gpt2-zero3", "gpt2", "fp32", 2, ["--strategy", "zero=3"], "reference.json", ("adamw", "lamb")),
    ("gpt2-offload", "gpt2", "fp32", 2, ["--strategy", "zero=2,offload=optimizer"], "reference.json", ("adamw",)),
    ("gpt2-microbatches", "gpt2", "fp32", 4, ["--strategy", "microbatches=2"], "reference4.json", ("adamw", "lamb")),
    ("llama-microbatches", "llama", "fp32", 4, ["--strategy", "microbatches=2"], "reference4.json", ("adamw",)),
    ("dropout-mlp", "special/dropout_mlp", "fp32", 2, [], "", ("adamw",)),
    ("large-constants", "special/large_constants", "fp32", 32, [], "", ("sgd",)),
]
# GPT-2 124M in bf16 at two microbatch sizes: (program, batch).
BENCH_PROGRAMS = [("gpt2-124m-bf16", 8), ("gpt2-124m-bf16-b32", 32)]
# (program, optimizer, steps); the first run's kernels are timed too.
BENCH_RUNS = [("gpt2-124m-bf16", "adamw", 6), ("gpt2-124m-bf16", "lamb", 4), ("gpt2-124m-bf16-b32", "adamw", 4)]
# COLOSSAL_TARGET=cpu builds the host programs instead: the runner's own check
# on a machine without a GPU.
TARGET = os.environ.get("COLOSSAL_TARGET", "cuda")
HOST_HYPER = {"adamw": {"lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01},
              "sgd": {"lr": 0.05, "momentum": 0.0, "weight_decay": 0.0}}
# Shared libraries every Linux has, and the driver's: never copied.
SYSTEM_LIBS = ("linux-vdso", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux", "libgcc_s",
               "libstdc++", "libz.so", "libcuda.so")


def model_file(model):
    name = os.path.basename(model)
    path = os.path.join(FIXTURES, model, f"{name}_opset17.onnx")
    return path if os.path.exists(path) else os.path.join(FIXTURES, model + ".onnx")


def feed_dir(model, reference):
    suffix = "4" if reference == "reference4.json" else ""
    path = os.path.join(FIXTURES, model, "feed" + suffix)
    return path if os.path.isdir(path) else None


def compile_case(compiler, out, model, precision, batch, flags, target, extra=()):
    args = [compiler, model_file(model) if not extra else extra[0], "--batch", str(batch), "--seq",
            str(1024 if extra else 8), "--precision", precision, "--target", target, "-o", out, "--quiet", *flags]
    trainable = os.path.join(FIXTURES, model, "trainable.txt")
    if os.path.exists(trainable):
        args += ["--trainable", trainable]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"gpu-train-check: {' '.join(args)} failed:\n{run.stderr}")


def bundle_libraries(directory):
    """Copies the non-system shared libraries of every program to DIR/lib."""
    libs = os.path.join(directory, "lib")
    os.makedirs(libs, exist_ok=True)
    for root, _, files in os.walk(directory):
        if "model_train" not in files:
            continue
        for line in subprocess.run(["ldd", os.path.join(root, "model_train")], capture_output=True,
                                   text=True).stdout.splitlines():
            parts = line.split()
            if len(parts) < 3 or parts[1] != "=>" or "/cuda" in parts[2] or parts[0].startswith(SYSTEM_LIBS):
                continue
            target = os.path.join(libs, parts[0])
            if not os.path.exists(target):
                shutil.copy2(os.path.realpath(parts[2]), target)


def build(directory, gpt2_124m):
    compiler = os.environ.get("COLOSSAL_COMPILE", os.path.join(ROOT, "build/tools/colossal-compile/colossal-compile"))
    os.makedirs(directory, exist_ok=True)
    for name, model, precision, batch, flags, reference, _ in CASES:
        print(f"building {name}", flush=True)
        compile_case(compiler, os.path.join(directory, name), model, precision, batch, flags, TARGET)
        if not reference:
            compile_case(compiler, os.path.join(directory, name + "-host"), model, precision, batch, flags, "cpu")
    for name, batch in BENCH_PROGRAMS if gpt2_124m else []:
        print(f"building {name}", flush=True)
        out = os.path.join(directory, name)
        compile_case(compiler, out, "", "bf16", batch, [], "cuda", extra=(gpt2_124m,))
        # The weights (500 MB) are drawn again on the GPU machine: keep their header.
        weights = os.path.join(out, "weights.safetensors")
        with open(weights, "rb") as f:
            length = struct.unpack("<Q", f.read(8))[0]
            header = f.read(length)
        open(os.path.join(out, "weights.header.json"), "wb").write(header)
        os.remove(weights)
    # The device kernels' check against the host kernels, when it was built.
    checker = os.path.join(ROOT, "build/test/runtime/cuda-kernel-check")
    if TARGET == "cuda" and os.path.exists(checker):
        os.makedirs(os.path.join(directory, "cuda-kernel-check"), exist_ok=True)
        shutil.copy2(checker, os.path.join(directory, "cuda-kernel-check", "model_train"))
    bundle_libraries(directory)


def kernel_checks(directory, logs):
    checker = os.path.join(directory, "cuda-kernel-check", "model_train")
    if not os.path.exists(checker):
        return None
    path = os.path.join(logs, "kernels.json")
    try:
        run = subprocess.run([checker, "--json", path], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 120 s"}
    print(run.stdout[-3000:], run.stderr[-1000:], flush=True)
    result = json.load(open(path)) if os.path.exists(path) else {}
    result["exit"] = run.returncode
    return result


def draw_weights(program):
    """Writes weights.safetensors from the kept header: normal(0, 0.02) for
    matrices, ones for normalisation weights, zeros for biases; the CRCs
    the runtime checks are recomputed."""
    import numpy as np
    header = json.load(open(os.path.join(program, "weights.header.json")))
    rng = np.random.default_rng(0)
    blobs = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shape = info["shape"]
        if len(shape) >= 2:
            data = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        elif name.endswith("bias"):
            data = np.zeros(shape, np.float32)
        else:
            data = np.ones(shape, np.float32)
        raw = data.tobytes()
        assert len(raw) == info["data_offsets"][1] - info["data_offsets"][0], name
        header["__metadata__"][f"crc32.{name}"] = "%08x" % zlib.crc32(raw)
        blobs.append((info["data_offsets"][0], raw))
    text = json.dumps(header).encode()
    with open(os.path.join(program, "weights.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, raw in sorted(blobs, key=lambda b: b[0]):
            f.write(raw)


def train(program, args, log, timeout=60):
    if os.path.exists(log):
        os.remove(log)
    start = time.time()
    try:
        run = subprocess.run([os.path.join(program, "model_train"), "--quiet", "--log", log, *args],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    records = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
    if run.returncode:
        return records, f"exit {run.returncode}: {(run.stderr or run.stdout)[-800:]}"
    return records, None


def run_case(directory, logs, case, results):
    name, model, precision, batch, flags, reference, optimizers = case
    ref = json.load(open(os.path.join(FIXTURES, model, reference))) if reference else None
    feed = feed_dir(model, reference or "reference.json")
    for opt in optimizers:
        hyper = ref["hyper_parameters"][opt] if ref else HOST_HYPER[opt]
        args = (["--feed", feed] if feed else ["--steps", "10"]) + optimizer_flags(opt, hyper)
        entry = {"case": name, "model": model, "precision": precision, "optimizer": opt, "flags": flags}
        records, error = train(os.path.join(directory, name), args, f"{logs}/{name}-{opt}.jsonl")
        got = [r["loss"] for r in records or []]
        if ref:
            want, bound, against = ref["losses"][opt], BOUND[precision], "pytorch"
        else:
            host, host_error = train(os.path.join(directory, name + "-host"), args, f"{logs}/{name}-{opt}-host.jsonl")
            want, bound, against = [r["loss"] for r in host or []], HOST_BOUND, "host program"
            error = error or (host_error and "host: " + host_error)
        entry.update(against=against, bound=bound, losses=got, reference_losses=want)
        if records:
            entry["memory"] = records[-1].get("memory")
            entry["device_memory"] = records[-1].get("device_memory")
            entry["planned_activations"] = records[-1].get("planned_activations")
            entry["elapsed_seconds"] = [r["time"] for r in records]
        if error:
            entry.update(ok=False, error=error)
        elif len(got) != len(want) or not got:
            entry.update(ok=False, error=f"logged {len(got)} steps, the reference has {len(want)}")
        else:
            worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
            entry.update(worst_relative_error=worst, ok=worst <= bound)
        results.append(entry)
        status = "ok" if entry["ok"] else "FAILED"
        detail = entry.get("error") or f"{entry['worst_relative_error']:.2e} vs {against} (bound {bound:.0e})"
        print(f"{status:6} {name:20} {opt:6} {detail}", flush=True)


def bench(directory, logs):
    results = []
    for index, (name, optimizer, steps) in enumerate(BENCH_RUNS):
        program = os.path.join(directory, name)
        if not os.path.isdir(program):
            continue
        if not os.path.exists(os.path.join(program, "weights.safetensors")):
            draw_weights(program)
        results.append(bench_run(program, name, optimizer, steps, logs, profile=index == 0))
    return results or None


def bench_run(program, name, optimizer, steps, logs, profile):
    manifest = json.load(open(os.path.join(program, "manifest.json")))
    params = sum(_count(p["shape"]) for p in manifest["parameters"])
    batch, seq = manifest["inputs"][0]["shape"]
    layers, hidden = 12, 768
    hyper = ["--lr", "6e-4", "--weight-decay", "0.1"] if optimizer == "adamw" else ["--lr", "1e-3"]
    records, error = train(program, ["--steps", str(steps), "--optimizer", optimizer, *hyper],
                           f"{logs}/{name}-{optimizer}.jsonl", timeout=240)
    result = {"program": name, "optimizer": optimizer, "batch": batch, "seq": seq, "parameters": params,
              "error": error, "flops_per_token": 6 * params + 12 * layers * seq * hidden,
              "flops_formula": "6 N + 12 L s h (N parameters, embeddings included)", "records": records}
    if profile:
        result["kernels"] = kernel_profile(program, ["--steps", "1", "--optimizer", optimizer], logs)
    if records and len(records) >= 3:
        # The log's "time" is seconds since the run began: a step's time is
        # the difference; the first step (cuBLAS and allocator warm-up) is left out.
        steady = sorted(b["time"] - a["time"] for a, b in zip(records[1:], records[2:]))
        step = steady[len(steady) // 2]
        result.update(step_seconds_median=step, tokens_per_second=batch * seq / step,
                      mfu_bf16_dense_989=batch * seq * result["flops_per_token"] / step / 989e12)
    summary = {k: v for k, v in result.items() if k not in ("records", "kernels")}
    print(f"bench {name} {optimizer}: {json.dumps(summary)}", flush=True)
    if records:
        print(f"  last step's seconds: {records[-1].get('seconds')}", flush=True)
    return result


def kernel_name(signature):
    """A kernel's short name from its demangled signature: the last scope's,
    or for a library's generic wrapper (cutlass::Kernel2<...>) its argument's."""
    import re
    text = signature.replace("(anonymous namespace)", "anon").replace("<unnamed>", "anon")
    text = re.sub(r"^void ", "", re.sub(r"\(.*", "", text)).strip()
    wrapped = re.match(r"^[\w:]*::Kernel\d*<([\w]+)", text)
    if wrapped:
        return wrapped.group(1)
    while re.search(r"<[^<>]*>", text):
        text = re.sub(r"<[^<>]*>", "", text)
    return text.split("::")[-1]


def kernel_profile(program, args, logs):
    """Each kernel's device time over one step, by kernel, from Nsight
    Compute's gpu__time_duration (the kernels run one at a time under it)."""
    import csv
    import glob
    import io
    import re
    ncu = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") +
                                                 glob.glob("/usr/local/cuda/bin/ncu"))), None)
    if not ncu:
        return {"error": "ncu not found"}
    command = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--print-units",
               "base", os.path.join(program, "model_train"), "--quiet", *args]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return {"error": "ncu timed out after 180 s"}
    open(os.path.join(logs, "ncu.csv"), "w").write(run.stdout)
    rows = [r for r in csv.DictReader(io.StringIO(run.stdout[run.stdout.find('"ID"'):]))
            if r.get("Metric Name") == "gpu__time_duration.sum"]
    scale = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
    by_kernel = {}
    for r in rows:
        name = kernel_name(r["Kernel Name"])
        seconds = float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], 1e-9)
        total, count = by_kernel.get(name, (0.0, 0))
        by_kernel[name] = (total + seconds, count + 1)
    table = sorted(({"kernel": k, "seconds": t, "launches": c} for k, (t, c) in by_kernel.items()),
                   key=lambda e: -e["seconds"])
    return {"exit": run.returncode, "launches": len(rows), "kernel_seconds": sum(e["seconds"] for e in table),
            "by_kernel": table, "stderr": run.stderr[-1500:] if run.returncode else ""}


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def run(directory, out):
    # Step logs stay beside the programs; the report holds what they say.
    logs = os.path.join(directory, "logs")
    os.makedirs(out, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    kernels = kernel_checks(directory, logs)
    results = []
    start = time.time()
    for case in CASES:
        # A device that hangs every run must not eat the benchmark's time.
        if time.time() - start > 240:
            results.append({"case": case[0], "ok": False, "error": "skipped: the cases ran past 240 s"})
        elif os.path.isdir(os.path.join(directory, case[0])):
            run_case(directory, logs, case, results)
    gpu = None
    if shutil.which("nvidia-smi"):
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    report = {"gpu": gpu, "target": TARGET, "kernel_checks": kernels, "cases": results, "passed": sum(r["ok"] for r in results), "failed": sum(not r["ok"] for r in results)}
    report["bench"] = bench(directory, logs)
    json.dump(report, open(os.path.join(out, "cuda-training.json"), "w"), indent=1)
    print(f"gpu-train-check: {report['passed']} passed, {report['failed']} failed")
    return report["failed"] == 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        big = sys.argv[sys.argv.index("--gpt2-124m") + 1] if "--gpt2-124m" in sys.argv else None
        build(sys.argv[2], big)
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        sys.exit(0 if run(sys.argv[2], sys.argv[3]) else 1)
    else:
        sys.exit(__doc__)
