#!/usr/bin/env python3
"""What colossal-compile shows while it builds, and builds it finds again.

On a terminal (a pseudo-terminal here) each phase (import, raising,
partitioning, the source, the weights) is shown on one line as it begins,
and the build of the program counts its seconds; in a log (a pipe) only the
build line, once, with no carriage returns. A second compile of the same step reuses the first
build's executable from the build cache (and says so), which trains as the
first did; another step (another learning rate) is built anew.

  terminal_progress.py COMPILER FIXTURES WORKDIR
"""
import json
import os
import pty
import shutil
import subprocess
import sys
import time

COMPILER, FIXTURES, WORK = sys.argv[1:4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def compile_gpt2(out, env, *extra):
    return [COMPILER, f"{FIXTURES}/gpt2/gpt2_opset17.onnx", "--batch", "2", "--seq", "8", "--quiet", "-o", out,
            *extra], dict(os.environ, **env)


def on_terminal(args, env, mark=None):
    """Runs `args` with all three streams on a pseudo-terminal; returns the
    exit status, everything it wrote, and the seconds it took from the start
    (or from when `mark` first appeared)."""
    master, slave = pty.openpty()
    start = time.time()
    child = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    output = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        output += data
        if mark and mark.encode() in output:
            start, mark = time.time(), None
    status = child.wait()
    os.close(master)
    return status, output.decode(errors="replace"), time.time() - start


no_cache = {"COLOSSAL_BUILD_CACHE": "off"}
out = f"{WORK}/terminal"
args, env = compile_gpt2(out, no_cache)
line = f"colossal-compile: building {out}/model_train"
# Seconds from the build line on: the build's own length, which the line counts.
status, text, seconds = on_terminal(args, env, mark=line)
check(status == 0, f"compile on a terminal failed: {text[-1500:]}")
check(line in text, f"no build line on the terminal: {text[-500:]!r}")
# A terminal's line is rewritten in place (it counts whole seconds of a
# build that lasts one or more).
check(f"{line}\n" not in text.replace("\r\n", "\n"), f"the terminal got a plain log line: {text[-500:]!r}")
# The compile's phases, each shown as it begins and cleared after.
for phase in (f"importing {FIXTURES}/gpt2/gpt2_opset17.onnx", "raising the graph", "partitioning",
              f"writing {out}/train_step.cpp", "writing the weights and the graph"):
    check(f"\r\033[Kcolossal-compile: {phase}" in text, f"the terminal was not shown '{phase}': {text[-800:]!r}")
if seconds >= 1.5:
    check(f"\r\033[K{line} (1 s)" in text, f"a {seconds:.1f} s build showed no seconds: {text[-500:]!r}")
print(f"terminal: {seconds:.1f} s, {text.count(chr(13))} carriage returns")

args, env = compile_gpt2(f"{WORK}/log", no_cache)
logged = subprocess.run(args, env=env, capture_output=True, text=True)
check(logged.returncode == 0, f"compile to a pipe failed: {logged.stderr[-1500:]}")
check(f"colossal-compile: building {WORK}/log/model_train\n" in logged.stderr and "\r" not in logged.stderr
      and "importing" not in logged.stderr,
      f"a log should get the build line once, without carriage returns: {logged.stderr[-500:]!r}")

# The build cache: the same step again comes from it; another is built.
cache = {"COLOSSAL_BUILD_CACHE": f"{WORK}/cache"}
first_args, env = compile_gpt2(f"{WORK}/first", cache)
second_args, _ = compile_gpt2(f"{WORK}/second", cache)
other_args, _ = compile_gpt2(f"{WORK}/other", cache, "--lr", "0.002")
first = subprocess.run(first_args, env=env, capture_output=True, text=True)
second = subprocess.run(second_args, env=env, capture_output=True, text=True)
other = subprocess.run(other_args, env=env, capture_output=True, text=True)
check(first.returncode == second.returncode == other.returncode == 0,
      f"cached compiles failed: {first.stderr[-800:]} {second.stderr[-800:]} {other.stderr[-800:]}")
check("earlier build of the same step" not in first.stderr, "the first build came from an empty cache")
check("earlier build of the same step" in second.stderr, f"the same step was built again: {second.stderr[-500:]}")
check("earlier build of the same step" not in other.stderr, "another step came from the cache")
print(f"cache: {len(os.listdir(f'{WORK}/cache'))} entries; second compile: "
      f"{[l for l in second.stderr.splitlines() if 'earlier build' in l]}")
runs = {}
for name in ("first", "second"):
    run = subprocess.run([f"{WORK}/{name}/model_train", "--steps", "3", "--log", f"{WORK}/{name}.log"],
                         capture_output=True, text=True)
    check(run.returncode == 0, f"{name}: model_train failed: {run.stderr[-800:]}")
    if run.returncode == 0:
        runs[name] = [json.loads(l)["loss"] for l in open(f"{WORK}/{name}.log")]
check(len(runs) == 2 and runs["first"] == runs["second"], f"the cached program trains otherwise: {runs}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
