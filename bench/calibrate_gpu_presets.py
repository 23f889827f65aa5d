#!/usr/bin/env python3
"""Fits the GPU presets' two free rates to the published runs.

For each device class (A100, H100) it searches a grid of
  - the GEMM plateau: the efficiency large products reach (the preset's
    curve by FLOPs per call, scaled so that its top is this value), and
  - the streaming fraction: the share of the datasheet memory bandwidth that
    memory-bound kernels (norms, softmax, elementwise, loss, embedding) reach
    over the bytes of their operands,
runs bench/published_runs.json through published-runs-bench with each pair,
and keeps the pair with the smallest largest error (then the smallest
median). Everything else (peaks, links, the fused attention curves) stays as
the preset has it. It also reports a leave-one-source-out check: the pair
fitted without a source's runs, and that source's errors under it.

  bench/calibrate_gpu_presets.py BUILD_DIR [OUTPUT.json]

The fitted values are then written into cost_model/lib/Cluster.cpp by hand;
published-runs-bench without --preset checks the presets as they ship.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

PRESETS = {"a100": "dgx-a100", "h100": "dgx-h100"}
PLATEAUS = [round(0.50 + 0.025 * i, 3) for i in range(19)]  # 0.50 .. 0.95
FRACTIONS = [round(0.10 + 0.025 * i, 3) for i in range(13)]  # 0.10 .. 0.40
KINDS = ["elementwise", "transcendental", "norm", "softmax", "loss", "embedding"]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    build = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs_file = os.path.join(root, "bench", "published_runs.json")
    bench = os.path.join(build, "bench", "published-runs-bench")
    cost = os.path.join(build, "tools", "colossal-cost", "colossal-cost")
    work = tempfile.mkdtemp(prefix="calibrate-")

    base = {}
    for device, preset in PRESETS.items():
        path = os.path.join(work, preset + ".base.json")
        subprocess.run([cost, "--cluster", preset, "--dump-cluster", path], check=True)
        with open(path) as f:
            base[device] = json.load(f)

    def errors(device, plateau, fraction):
        cluster = json.loads(json.dumps(base[device]))
        top = max(p["efficiency"] for p in cluster["gemm_efficiency"])
        for p in cluster["gemm_efficiency"]:
            p["efficiency"] = p["efficiency"] * plateau / top
        bandwidth = cluster["memory_bandwidth_bytes_per_s"]
        # The backward's traffic is about twice the forward's operands.
        cluster.setdefault("kernels", {})["streaming"] = {
            k: {"forward": {"call_s": 0, "bytes_per_s": fraction * bandwidth},
                "backward": {"call_s": 0, "bytes_per_s": fraction * bandwidth / 2}} for k in KINDS}
        path = os.path.join(work, PRESETS[device] + ".json")
        with open(path, "w") as f:
            json.dump(cluster, f)
        out = os.path.join(work, "out.json")
        subprocess.run([bench, runs_file, out, "--preset", PRESETS[device] + "=" + path],
                       check=True, capture_output=True)
        with open(out) as f:
            result = json.load(f)
        return [r for r in result["runs"] if r["device"].startswith(device)]

    def score(runs, keep):
        chosen = [abs(r["error"]) for r in runs if keep(r)]
        return (max(chosen), statistics.median(chosen)) if chosen else (0, 0)

    report = {"grid": {"gemm_plateau": PLATEAUS, "streaming_fraction": FRACTIONS}, "devices": {}}
    for device in PRESETS:
        table = {(g, m): errors(device, g, m) for g in PLATEAUS for m in FRACTIONS}
        best = min(table, key=lambda k: score(table[k], lambda r: True))
        worst, median = score(table[best], lambda r: True)
        print(f"{device}: GEMM plateau {best[0]}, streaming fraction {best[1]}: "
              f"median |error| {100 * median:.1f}%, max {100 * worst:.1f}%")
        held_out = {}
        sources = sorted({r["source"] for r in table[best]})
        for source in sources if len(sources) > 1 else []:
            fitted = min(table, key=lambda k: score(table[k], lambda r: r["source"] != source))
            mine = [r["error"] for r in table[fitted] if r["source"] == source]
            held_out[source] = {"fitted_without": {"gemm_plateau": fitted[0], "streaming_fraction": fitted[1]},
                                "errors": mine}
            print(f"  without {source}: plateau {fitted[0]}, fraction {fitted[1]}; {source}'s errors "
                  + " ".join(f"{100 * e:+.1f}%" for e in mine))
        report["devices"][device] = {
            "gemm_plateau": best[0], "streaming_fraction": best[1],
            "median_abs_error": median, "max_abs_error": worst,
            "runs": [{"name": r["name"], "error": r["error"]} for r in table[best]],
            "leave_one_source_out": held_out}
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
