#!/usr/bin/python3
"""A shape-only GPT built with --init and trained on one and two ranks.

colossal-model writes a GPT with no weights (default: 24 layers, hidden
1024, 16 heads, vocabulary 51200, sequence 128: 355 M parameters);
colossal-compile builds it with --init normal:0.02 on one rank, dp=2 and tp=2
(the build cache off, so each build is timed whole). For the one-rank step's
source the bench also times the C++ compiler on it at -O1 and -O0 (the
optimization the program used to be and is now built with), the object
alone. Each program then runs --steps 0 (start-up: drawing the weights and
allocating the state), exports its starting weights (compared byte for
byte across the plans), and trains 2 steps (losses, step and optimizer
seconds, peak resident memory). One run, written as JSON.

  bench/shape_only_build.py BUILD_DIR OUT.json [--layers N --hidden N --heads N --vocab N --seq N]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("build")
parser.add_argument("out")
parser.add_argument("--layers", type=int, default=24)
parser.add_argument("--hidden", type=int, default=1024)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--vocab", type=int, default=51200)
parser.add_argument("--seq", type=int, default=128)
a = parser.parse_args()

build = os.path.abspath(a.build)
compiler = f"{build}/tools/colossal-compile/colossal-compile"
work = tempfile.mkdtemp(prefix="colossal-shape-only-")
MPI = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", "2"]
env = dict(os.environ, COLOSSAL_BUILD_CACHE="off")


def timed(args, **kw):
    """Wall seconds, peak resident KiB (GNU time) and the result."""
    start = time.time()
    r = subprocess.run(["/usr/bin/time", "-f", "MAXRSS %M"] + args, capture_output=True, text=True, env=env, **kw)
    if r.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{r.stderr[-3000:]}")
    rss = max([int(m) for m in re.findall(r"MAXRSS (\d+)", r.stderr)] or [0])
    return time.time() - start, rss, r


model = f"{work}/gpt.onnx"
subprocess.run([f"{build}/tools/colossal-model/colossal-model", "gpt", "--layers", str(a.layers), "--hidden",
                str(a.hidden), "--heads", str(a.heads), "--vocab", str(a.vocab), "--seq", str(a.seq), "-o", model],
               check=True)
result = {"model": {"layers": a.layers, "hidden": a.hidden, "heads": a.heads, "vocab": a.vocab, "seq": a.seq},
          "batch": 2, "plans": {}}
plans = {"1 rank": [], "dp=2": ["--gpus", "2", "--strategy", "dp=2"], "tp=2": ["--gpus", "2", "--strategy", "tp=2"]}
starts = {}
for tag, flags in plans.items():
    out = f"{work}/{tag.replace(' ', '-').replace('=', '')}"
    seconds, rss, r = timed([compiler, model, "--batch", "2", "--seq", str(a.seq), "--init", "normal:0.02", "-o", out,
                             "--quiet", *flags])
    launch = MPI if flags else []
    startup, startup_rss, _ = timed(launch + [f"{out}/model_train", "--steps", "0"])
    exported, _, _ = timed(launch + [f"{out}/model_train", "--steps", "0", "--export", f"{out}-start"])
    starts[tag] = open(f"{out}-start/model.safetensors", "rb").read()
    shutil.rmtree(f"{out}-start")
    train_seconds, train_rss, _ = timed(launch + [f"{out}/model_train", "--steps", "2", "--log", f"{out}.log"])
    records = [json.loads(line) for line in open(f"{out}.log")]
    result["plans"][tag] = {
        "compile_seconds": round(seconds, 2), "compile_peak_rss_kib": rss,
        "source_lines": sum(1 for _ in open(f"{out}/train_step.cpp")),
        "weights_file_written": os.path.exists(f"{out}/weights.safetensors"),
        "startup_seconds_steps_0": round(startup, 2), "startup_peak_rss_kib": startup_rss,
        "export_seconds": round(exported, 2),
        "train_2_steps_seconds": round(train_seconds, 2), "train_peak_rss_kib": train_rss,
        "losses": [r["loss"] for r in records], "step_seconds": [r["seconds"] for r in records]}
    print(tag, json.dumps(result["plans"][tag]), flush=True)
result["starting_weights_identical"] = {tag: starts[tag] == starts["1 rank"] for tag in starts}

# The one-rank step's source under the C++ compiler at -O1 and -O0.
source = f"{work}/1-rank/train_step.cpp"
for level in ("-O1", "-O0"):
    seconds, rss, _ = timed(["c++", level, "-std=c++17", f"-I{os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'runtime', 'include')}", "-c", source,
                             "-o", f"{work}/step{level}.o"])
    result[f"cxx_object_seconds{level}"] = round(seconds, 2)
    result[f"cxx_object_peak_rss_kib{level}"] = rss
print(json.dumps(result, indent=1))
json.dump(result, open(a.out, "w"), indent=1)
shutil.rmtree(work)
