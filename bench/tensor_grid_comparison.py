#!/usr/bin/python3
"""1D, 2D, 2.5D and 3D tensor parallelism on one GPT layer, as the cost model
predicts them, beside what the seed papers claim.

    /usr/bin/python3 bench/tensor_grid_comparison.py BUILD OUT.json [--hidden H]

For each mode at 8 and at 64 tensor ranks (2D, which needs a square, at 4
and 16 beside 8), the layer's share of an estimate (`colossal-cost --json`
for two layers less one layer: the embedding, head and loss cancel) gives per
rank its parameter and activation bytes, its communication per grid axis
(message bytes as the plan and the runtime's counters count them, and the
traffic one rank sends, message bytes times the NCCL bus factor of the
collective on its group) and its share of the step time, on DGX A100 nodes.

Beside them, the efficiency tables of Colossal-AI's documentation
(docs/source/en/features/{1D,2D,2p5D,3D}_tensor_parallel.md: memory and
bandwidth terms per mode) evaluated at the same q and d, and the speedups the
papers measured: Optimus (Xu et al. 2021, arXiv 2104.05343) 1.48x training
over Megatron on 64 GPUs; Tesseract (Wang et al. 2021, arXiv 2105.14500)
1.38x over 1D and 1.53x over 2D with strong scaling.

Nothing here is measured: the partitioner builds 1D only, so no grid program
runs yet. Writes OUT.json and prints a Markdown table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

# Bus factors of nccl-tests (doc/PERFORMANCE.md): the traffic one rank sends
# per byte of message on a group of n.
BUS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}

CLAIMED = {
    # Colossal-AI documentation efficiency tables: parameters, activations
    # (fractions of one device's) and the bandwidth term.
    "1d": lambda P, q, d: (1 / P, 1.0, 2 * (P - 1) / P),
    "2d": lambda P, q, d: (1 / q**2, 1 / q**2, 6 * (q - 1) / q),
    "2.5d": lambda P, q, d: (1 / q**2, 1 / (d * q**2), 3 * (q - 1) * (d + 1) / (d * q)),
    "3d": lambda P, q, d: (1 / q**3, 1 / q**3, 6 * (q - 1) / q**3),
}


def estimate(cost, shape, layers, strategy, nodes):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "e.json")
        args = [cost, "--model", "gpt", "--layers", str(layers), "--hidden", str(shape["hidden"]),
                "--heads", str(shape["heads"]), "--seq", str(shape["seq"]), "--vocab", str(shape["vocab"]),
                "--microbatch", str(shape["microbatch"]), "--cluster", "dgx-a100", "--nodes", str(nodes),
                "--strategy", strategy, "--json", out]
        run = subprocess.run(args, capture_output=True, text=True)
        # 3: predicted, but it does not fit a device's memory; the layer's
        # share is still what is compared (one rank holds a layer at most).
        if run.returncode not in (0, 3):
            sys.exit(f"colossal-cost failed for {strategy}: {run.stderr.strip()}")
        with open(out) as f:
            return json.load(f)


def layer_share(cost, shape, strategy, nodes):
    one, two = (estimate(cost, shape, layers, strategy, nodes) for layers in (1, 2))
    sizes = {axis["name"]: axis["size"] for axis in two["mesh"]}
    comm = {}
    for sign, e in ((1, two), (-1, one)):
        for c in e["communication"]:
            key = (c["axis"], c["collective"])
            comm[key] = comm.get(key, 0) + sign * c["bytes"]
    axes = {}
    for (axis, collective), message in comm.items():
        if message == 0:
            continue
        entry = axes.setdefault(axis, {"message_bytes": 0, "sent_bytes": 0, "collectives": {}})
        entry["message_bytes"] += message
        entry["sent_bytes"] += message * BUS[collective](sizes[axis])
        entry["collectives"][collective] = message
    memory = {k: two["memory"]["by_category"][k] - one["memory"]["by_category"][k]
              for k in ("parameters", "activations")}
    seconds = two["predicted"]["step_time_s"] - one["predicted"]["step_time_s"]
    return {"axes": axes, "parameters_bytes": memory["parameters"], "activations_bytes": memory["activations"],
            "sent_bytes": sum(a["sent_bytes"] for a in axes.values()), "layer_step_s": seconds}


def configurations():
    # (ranks, mode, q, d, strategy)
    yield 8, "1d", 8, 1, "tp=8"
    yield 4, "2d", 2, 1, "tp=4,tp_mode=2d"
    yield 16, "2d", 4, 1, "tp=16,tp_mode=2d"
    yield 8, "2.5d", 2, 2, "tp=8,tp_mode=2.5d,tp_depth=2"
    yield 8, "3d", 2, 2, "tp=8,tp_mode=3d"
    yield 64, "1d", 64, 1, "tp=64"
    yield 64, "2d", 8, 1, "tp=64,tp_mode=2d"
    yield 64, "2.5d", 4, 4, "tp=64,tp_mode=2.5d,tp_depth=4"
    yield 64, "3d", 4, 4, "tp=64,tp_mode=3d"


def compare(cost, shape):
    """The rows for one model shape, each against 1D at its rank count."""
    single = layer_share(cost, shape, "dp=1", 1)
    rows = []
    for ranks, mode, q, d, strategy in configurations():
        share = layer_share(cost, shape, strategy, max(1, ranks // 8))
        parameters, activations, bandwidth = CLAIMED[mode](ranks, q, d)
        share.update({
            "ranks": ranks, "mode": mode, "q": q, "depth": d, "strategy": strategy,
            "parameters_of_one_rank": share["parameters_bytes"] / single["parameters_bytes"],
            "activations_of_one_rank": share["activations_bytes"] / single["activations_bytes"],
            "claimed": {"parameters_of_one_rank": parameters, "activations_of_one_rank": activations,
                        "bandwidth_term": bandwidth},
        })
        rows.append(share)
    for group in (8, 64):
        base = next(r for r in rows if r["ranks"] == group and r["mode"] == "1d")
        for r in rows:
            if r["ranks"] == group or (group == 8 and r["ranks"] in (4, 16)):
                r["sent_vs_1d"] = r["sent_bytes"] / base["sent_bytes"]
                r["speedup_over_1d"] = base["layer_step_s"] / r["layer_step_s"]
    return {"model": dict(shape, family="gpt", dtype="bf16"), "one_rank": single, "rows": rows}


def print_table(comparison):
    shape = comparison["model"]
    print(f"\nhidden {shape['hidden']}, {shape['microbatch']} x {shape['seq']} tokens per microbatch\n")
    mib = 1 << 20
    print("| ranks | mode | grid | parameters MiB (of 1 rank; claimed) | activations MiB (of 1 rank; claimed) "
          "| sent MiB per layer (vs 1D) | claimed bandwidth term | layer ms (speedup over 1D) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in comparison["rows"]:
        grid = {"1d": f"{r['ranks']}", "2d": f"{r['q']}x{r['q']}", "2.5d": f"{r['q']}x{r['q']}x{r['depth']}",
                "3d": f"{r['q']}x{r['q']}x{r['q']}"}[r["mode"]]
        c = r["claimed"]
        print(f"| {r['ranks']} | {r['mode']} | {grid} | {r['parameters_bytes'] / mib:.1f} "
              f"({r['parameters_of_one_rank']:.4f}; {c['parameters_of_one_rank']:.4f}) | "
              f"{r['activations_bytes'] / mib:.1f} ({r['activations_of_one_rank']:.4f}; "
              f"{c['activations_of_one_rank']:.4f}) | {r['sent_bytes'] / mib:.1f} ({r['sent_vs_1d']:.2f}) | "
              f"{c['bandwidth_term']:.3f} | {r['layer_step_s'] * 1e3:.2f} ({r['speedup_over_1d']:.2f}x) |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--microbatches", default="1,16",
                        help="samples per microbatch to compare at, comma-separated (tokens = samples x 2048)")
    args = parser.parse_args()
    cost = os.path.join(args.build, "tools", "colossal-cost", "colossal-cost")
    comparisons = []
    for microbatch in (int(m) for m in args.microbatches.split(",")):
        shape = {"hidden": args.hidden, "heads": args.hidden // 128, "seq": 2048, "vocab": 51200,
                 "microbatch": microbatch}
        comparisons.append(compare(cost, shape))
    result = {
        "what": "one GPT layer's share of the predicted step (two layers less one), per tensor-parallel rank",
        "cluster": "dgx-a100 (8 GPUs per node; 64 ranks span 8 nodes)",
        "comparisons": comparisons,
        "papers": {
            "optimus_2d_training_speedup_over_megatron_64_gpus": 1.48,
            "tesseract_speedup_over_1d_strong_scaling": 1.38,
            "tesseract_speedup_over_2d_strong_scaling": 1.53,
            "sources": ["Xu et al. 2021, arXiv 2104.05343 (abstract)", "Wang et al. 2021, arXiv 2105.14500 (abstract)",
                        "Colossal-AI docs/source/en/features/*_tensor_parallel.md (efficiency tables)"],
        },
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    for comparison in comparisons:
        print_table(comparison)


if __name__ == "__main__":
    main()
