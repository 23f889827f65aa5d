#!/usr/bin/env python3
"""Emitted programs on tensor grids train exactly like one rank.

Colossal-AI's 2D (Optimus), 2.5D (Tesseract) and 3D tensor parallelism,
built by the partitioner (`--strategy tp=4,tp_mode=2d`,
`tp=8,tp_mode=2.5d,tp_depth=2`, `tp=8,tp_mode=3d`) or chosen by the search
(`--emit=plan --strategy tp_mode=3d`, then `--plan`): on 4, 8 and 16 ranks,
alone and beside data parallelism, ZeRO, recomputation and pipelines, the
runs follow PyTorch's trajectories and the single-rank program's weights,
every collective on every grid axis is the plan's and the papers' per-layer
counts, and the model states and the step's peak are the plan's. What a grid
cannot split is refused, naming the op and the dimension.

  emitted_grid_programs.py COMPILER FIXTURES WORKDIR MPIRUN
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_checks import (  # noqa: E402
    check, check_refusals, compile_model, train, losses, worst_relative, check_model_states, check_step_peak,
    check_counters, batch_data, check_gradients, runtime_name, finish, WORK, shard, optimizer_flags,
    train_like_one_rank, strategy_value)

# The language fixtures' tokens per sequence (test/fixtures/models.py).
SEQ = 8

# 2D tensor parallelism (tp=4,tp_mode=2d: Optimus on a 2 x 2 grid, axes
# tp_row and tp_col): activations in blocks (rows over tp_row, features over
# tp_col), every linear layer SUMMA's product of blocks with its weight a
# quarter per rank (also beside ZeRO-2, offload, microbatches and
# recomputation), layer and RMS norms on the blocks (row statistics
# completed over tp_col), attention by heads (LLaMA: rotary tables read as
# copies), the loss vocabulary-parallel over tp_col, LLaMA's embedding
# split by vocabulary over tp_row and by features over tp_col; what the grid
# does not split computes whole from gathered blocks (on the 2D grid,
# nothing); GPT-2's fused QKV projection has its columns in three groups,
# each split over tp_col, and its embedding, tied to the output layer, is
# split as that layer's SUMMA weight. On the MLP, GPT-2 and
# LLaMA fixtures, and with 2 data-parallel ranks x the grid on 8, the runs
# train like PyTorch and one
# rank (first-step gradients, losses, final weights), every collective on
# every axis moves the bytes and calls the plan predicts (SUMMA's from the
# cost model's formulas, the rest as the IR counts them), the model states
# and the step's peak are the compiler's plan (the cost model's activation
# estimate, which counts the blocks the grid gathers and slices, within
# 5%), and each grid axis's broadcasts and
# reduces equal Optimus's per-layer counts computed here from the weights'
# shapes (Xu et al. 2021, sec. 3.1: per linear layer, q broadcasts of an X
# block along the row and q of a W block along the column forward; q of
# each again and q reduces of a dX and a dW block backward).
def linear_weights(manifest):
    """The grid's blocked linear weights: blocks of two dimensions that are
    not embedding tables split by vocabulary, or are tables tied to the
    output layer (its SUMMA weight)."""
    grid = manifest["tensor_grid"]
    tables = set(grid.get("lookup_tables", [])) - set(grid.get("tied_lookup_tables", []))
    return [p for p in manifest["parameters"] if len(p.get("grid_split", [])) == 2 and p["name"] not in tables]


def check_lookup_tables(manifest, model, tag):
    """LLaMA's untied embedding is split by vocabulary over the grid (a
    block of 1/q^2 of the table, 1/q^3 on the cube); GPT-2's, tied to the
    output layer, too: on the 2D grid and 2.5D's layers as that layer's
    SUMMA weight, on the cube as an untied table (the layout the output
    layer's weight takes, gathered over tp_w)."""
    grid = manifest["tensor_grid"]
    tables, tied = grid.get("lookup_tables"), grid.get("tied_lookup_tables")
    want = (["embed_tokens.weight"], []) if model.startswith("llama") else (
        (["wte.weight"], ["wte.weight"]) if model.startswith("gpt2") else ([], []))
    check((tables, tied) == want, f"{tag}: tables split by vocabulary {tables}, tied {tied}; wanted {want}")


def optimus_closed_form(manifest, rows, q, microbatches=1):
    """Per step: {collective: {axis: (bytes, calls)}} of the grid's linear
    layers, from each blocked weight's shape ([n/q, k/q] as the model file
    holds it, transposed into the layer) and the rank's rows of X."""
    want = {"broadcast": {"tp_col": [0, 0], "tp_row": [0, 0]}, "reduce": {"tp_col": [0, 0], "tp_row": [0, 0]}}
    for p in linear_weights(manifest):
        n_block, k_block = p["shape"]
        x_block, w_block = 4 * (rows // q) * k_block, 4 * n_block * k_block
        for collective, axis, block, per in (("broadcast", "tp_col", x_block, 2 * q), ("broadcast", "tp_row", w_block, 2 * q),
                                             ("reduce", "tp_col", x_block, q), ("reduce", "tp_row", w_block, q)):
            want[collective][axis][0] += per * block * microbatches
            want[collective][axis][1] += per * microbatches
    return {c: {a: tuple(v) for a, v in axes.items()} for c, axes in want.items()}


print(f"{'model':12} {'dp x grid':9} {'optimizer':9} {'worst loss error vs PyTorch':>28} {'worst weight error vs 1 rank':>30}")
for model, dp, batch, seq_rows, extra in [
        ("mlp", 1, 4, 1, ""), ("gpt2_4heads", 1, 2, 8, ""), ("llama_4heads", 1, 2, 8, ""), ("gpt2", 2, 4, 8, ""),
        ("llama", 2, 4, 8, "zero=2"), ("llama", 1, 4, 8, "microbatches=2"), ("llama", 2, 4, 8, "zero=1,offload=optimizer"),
        ("llama_4heads", 1, 2, 8, "recompute=full")]:
    feed_dir, reference, _ = batch_data(model, batch)
    ranks = 4 * dp
    slug = "-" + extra.replace("=", "").replace(",", "-") if extra else ""
    program = f"{WORK}/{model}-grid2x2-dp{dp}{slug}"
    built = compile_model(model, program, "--gpus", str(ranks), "--strategy",
                          f"dp={dp},tp=4,tp_mode=2d" + ("," + extra if extra else ""), batch=batch)
    check(built.returncode == 0, f"{model} 2D grid x dp={dp}: {built.stderr[-2000:]}")
    if built.returncode:
        continue
    manifest = json.load(open(f"{program}/manifest.json"))
    grid = manifest.get("tensor_grid", {})
    check(manifest["strategy"]["tp"] == 4 and manifest["gpus"] == ranks and grid.get("side") == 2 and
          grid.get("grid_linears", 0) > 0, f"{model}: the manifest records {manifest['strategy']}, grid {grid}")
    check_lookup_tables(manifest, model, f"{model} 2D grid x dp={dp}")
    check_gradients(program, model, batch, ranks, f"{model}-grid2x2-dp{dp}{slug}")
    single = f"{WORK}/{model}-b{batch}"
    if not os.path.exists(f"{single}/model_train"):
        built = compile_model(model, single, "--gpus", "1", batch=batch)
        check(built.returncode == 0, f"{model} on one rank: {built.stderr[-2000:]}")
    for name in (["adamw", "sgd"] if dp == 1 and not extra else ["adamw"] if "recompute" in extra else ["lamb"]):
        if not os.path.exists(f"{WORK}/{model}-{name}-{batch}-1/{shard}"):
            one = train(single, "--feed", feed_dir, "--save", f"{WORK}/{model}-{name}-{batch}-1",
                        *optimizer_flags(name, reference["hyper_parameters"][name]))
            check(one.returncode == 0, f"{model} {name} on one rank: {one.stderr[-1500:]}")
        tag = f"{model}-{name}-grid2x2-dp{dp}{slug}"
        ran = train_like_one_rank(program, model, name, batch, ranks, tag, feed_dir, reference)
        if not ran:
            continue
        log, loss_error, worst_weight, where = ran
        predicted = manifest["predicted_comm_bytes_per_step_by_optimizer"][name]
        calls = manifest["predicted_comm_calls_per_step_by_optimizer"][name]
        check_counters(log, predicted, tag, calls=calls)
        first = json.loads(open(log).readline())["comm"]
        measured = {c: {a: (first[c][a]["bytes"], first[c][a]["calls"]) for a in ("tp_col", "tp_row")}
                    for c in ("broadcast", "reduce")}
        microbatches = strategy_value(extra, "microbatches")
        closed_form = optimus_closed_form(manifest, batch // dp // microbatches * seq_rows, 2, microbatches)
        # (Recomputation runs some layers' products twice: its bytes are the
        # plan's, checked above, and not the formulas' single pass.)
        check(measured == closed_form or "recompute" in extra,
              f"{tag}: SUMMA moved {measured} (bytes, calls), Optimus's formulas say {closed_form}")
        check_model_states(log, manifest["predicted_model_state_bytes_per_rank_by_optimizer"][name], tag)
        check_step_peak(log, program, tag)
        grid_moved = ", ".join(f"{c} {a} {b} B/{n}" for c, axes in measured.items() for a, (b, n) in axes.items())
        if "recompute" in extra:
            # Recomputation re-runs each layer's products (SUMMA's
            # broadcasts again) and changes nothing else.
            same_as = f"{WORK}/{model}-{name}-grid2x2-dp{dp}.log"
            check(os.path.exists(same_as) and losses(log) == losses(same_as),
                  f"{tag}: the losses differ from the same grid without recomputation")
        print(f"{model:12} {f'{dp} x 2x2':9} {name + (' ' + extra if extra else ''):9} {loss_error:28.2e} "
              f"{worst_weight:30.2e}  ({where}; {grid_moved}: measured = plan = Optimus's; every other collective "
              f"measured = plan)")
        check(loss_error <= 1e-5, f"{tag}: losses differ from PyTorch's by {loss_error:.2e}")
        check(worst_weight <= 1e-5, f"{tag}: final weights differ from one rank's by {worst_weight:.2e} ({where})")

# Without --feed a program draws its own tokens (the same for every plan at
# one seed) below the vocabulary, which a grid splits over one of its axes,
# not over all its ranks (drawn up to 4 x the table's rows, the lookups and
# the loss stopped on ids outside it). Two steps on the grid equal one rank's.
for model in ("gpt2_4heads", "llama_4heads"):
    grid, single = f"{WORK}/{model}-grid2x2-dp1", f"{WORK}/{model}-b2"
    one = train(single, "--steps", "2", "--log", f"{WORK}/{model}-synthetic-1.log")
    on_grid = train(grid, "--steps", "2", "--log", f"{WORK}/{model}-synthetic-grid.log", ranks=4)
    check(one.returncode == 0 and on_grid.returncode == 0,
          f"{model} on synthetic data: {one.stderr[-800:]} {on_grid.stderr[-1500:]}")
    if one.returncode == 0 and on_grid.returncode == 0:
        error = worst_relative(losses(f"{WORK}/{model}-synthetic-grid.log"), losses(f"{WORK}/{model}-synthetic-1.log"))
        check(error <= 1e-5, f"{model} on synthetic data: the 2D grid's losses differ from one rank's by {error:.2e}")
        print(f"{model} 2x2 grid on its own synthetic tokens: losses within {error:.1e} of one rank's")

# 2.5D tensor parallelism (tp=8,tp_mode=2.5d,tp_depth=2: Tesseract, two
# layers of a 2 x 2 grid, axes tp_depth, tp_row and tp_col): the rows split
# over the layers and then each layer's rows, every layer SUMMA on its rows
# with the same weight blocks (a quarter per rank, as Colossal-AI's 2.5D
# table states), their gradients summed over tp_depth; the loss's rows
# summed over a grid column across the layers (tp_rows). GPT-2 (AdamW) and
# LLaMA (SGD) on 8 ranks train like PyTorch and one rank, every collective
# on every axis is the plan's, and each layer's SUMMA moves Optimus's
# counts for its rows while tp_depth carries one all-reduce of every weight
# block per step (Wang et al. 2021, sec. 3: the depth's reduction of the
# weight gradients).
def one_rank_run(model, name, batch, feed_dir, reference):
    """The single-rank program's checkpoint after training with `name` on
    `batch` rows (train_like_one_rank's reference), made once."""
    single = f"{WORK}/{model}-b{batch}"
    if not os.path.exists(f"{single}/model_train"):
        built = compile_model(model, single, "--gpus", "1", batch=batch)
        check(built.returncode == 0, f"{model} on one rank: {built.stderr[-2000:]}")
    if not os.path.exists(f"{WORK}/{model}-{name}-{batch}-1/{shard}"):
        one = train(single, "--feed", feed_dir, "--save", f"{WORK}/{model}-{name}-{batch}-1",
                    *optimizer_flags(name, reference["hyper_parameters"][name]))
        check(one.returncode == 0, f"{model} {name} on one rank: {one.stderr[-1500:]}")


def grid_run(model, name, batch, strategy, tag, grid_wants, feed_dir, reference, searched=None):
    """Compiles `model` for 8 ranks under `strategy`, checks the manifest's
    grid section holds `grid_wants`, the first-step gradients against
    PyTorch's and the counters against the plan, and trains it beside the
    single-rank program; returns (manifest, log, loss error, worst weight
    error, where, the first step's collectives), or None when a step failed.
    With `searched` (fixed parts), the search plans the 8 GPUs of a DGX A100
    node with them (--emit=plan) and must choose `strategy`; the program is
    built from that plan (--plan)."""
    program = f"{WORK}/{tag}"
    how = ["--strategy", strategy]
    if searched:
        plan = f"{WORK}/{tag}-plan.json"
        planned = compile_model(model, plan, "--emit=plan", "--gpus", "8", "--strategy", searched, batch=batch)
        chosen = json.load(open(plan))["strategy"] if planned.returncode == 0 else {}
        want = dict(item.split("=") for item in strategy.split(","))
        check(planned.returncode == 0 and all(str(chosen.get(k)) == v for k, v in want.items()),
              f"{model}: the search with {searched} planned {chosen} (wanted {strategy}): {planned.stderr[-1500:]}")
        how = ["--plan", plan]
    built = compile_model(model, program, "--gpus", "8", *how, batch=batch)
    check(built.returncode == 0, f"{model} {strategy}: {built.stderr[-2000:]}")
    if built.returncode:
        return None
    manifest = json.load(open(f"{program}/manifest.json"))
    grid = manifest.get("tensor_grid", {})
    check(all(grid.get(k) == v for k, v in grid_wants.items()) and manifest["strategy"]["tp"] == 8,
          f"{model}: the manifest records {manifest['strategy']}, grid {grid}")
    check_lookup_tables(manifest, model, tag)
    check_gradients(program, model, batch, 8, tag)
    one_rank_run(model, name, batch, feed_dir, reference)
    run_tag = f"{model}-{name}-{tag.split('-', 1)[1]}"
    ran = train_like_one_rank(program, model, name, batch, 8, run_tag, feed_dir, reference)
    if not ran:
        return None
    log = ran[0]
    kind = runtime_name(name)
    check_counters(log, manifest["predicted_comm_bytes_per_step_by_optimizer"][kind], run_tag,
                   calls=manifest["predicted_comm_calls_per_step_by_optimizer"][kind])
    check_model_states(log, manifest["predicted_model_state_bytes_per_rank_by_optimizer"][kind], run_tag)
    check_step_peak(log, program, run_tag)
    return (manifest, *ran, json.loads(open(log).readline())["comm"])


def tesseract_depth_sums(manifest, microbatches=1):
    """Per step: (bytes, calls) of the weight blocks' gradient sums over tp_depth."""
    blocks = linear_weights(manifest)
    return (sum(4 * p["shape"][0] * p["shape"][1] for p in blocks) * microbatches, len(blocks) * microbatches)


for model, batch, name in [("gpt2", 4, "adamw"), ("llama", 4, "sgd_plain")]:
    feed_dir, reference, _ = batch_data(model, batch)
    ran = grid_run(model, name, batch, "tp=8,tp_mode=2.5d,tp_depth=2", f"{model}-tesseract2x2x2",
                   {"mode": "2.5d", "side": 2, "depth": 2}, feed_dir, reference)
    if not ran:
        continue
    manifest, log, loss_error, worst_weight, where, first = ran
    tag = f"{model}-{name}-tesseract2x2x2"
    measured = {c: {a: (first[c][a]["bytes"], first[c][a]["calls"]) for a in ("tp_col", "tp_row")}
                for c in ("broadcast", "reduce")}
    layer_rows = batch * SEQ // 2
    closed_form = optimus_closed_form(manifest, layer_rows, 2)
    check(measured == closed_form, f"{tag}: each layer's SUMMA moved {measured}, Optimus's formulas for its "
                                   f"{layer_rows} rows say {closed_form}")
    depth_sums = (first["all_reduce"]["tp_depth"]["bytes"], first["all_reduce"]["tp_depth"]["calls"])
    check(depth_sums == tesseract_depth_sums(manifest),
          f"{tag}: tp_depth summed {depth_sums} (bytes, calls), the weight blocks are {tesseract_depth_sums(manifest)}")
    print(f"{model:12} {'2x2x2':9} {name:9} {loss_error:28.2e} {worst_weight:30.2e}  ({where}; tp_depth all_reduce "
          f"{depth_sums[0]} B/{depth_sums[1]} = the weight blocks; each layer's SUMMA = Optimus's for "
          f"{layer_rows} rows; every collective measured = plan)")
    check(loss_error <= 1e-5, f"{tag}: losses differ from PyTorch's by {loss_error:.2e}")
    check(worst_weight <= 1e-5, f"{tag}: final weights differ from one rank's by {worst_weight:.2e} ({where})")

# 3D tensor parallelism (tp=8,tp_mode=3d: a 2 x 2 x 2 cube, axes tp_in,
# tp_w and tp_out, Bian et al. 2021 as Colossal-AI builds it): activations
# hold 1/q^3, their rows over tp_w and one of tp_in and tp_out, their
# features over the other, which each linear layer swaps; a weight [k, n]
# is held 1/q^3 (k over two axes, n over one), gathered over tp_w for the
# local product, whose partial sums are reduce-scattered into the rows;
# norms complete their statistics over the features' axis; the loss is
# vocabulary-parallel. GPT-2 (AdamW) and LLaMA (SGD) on 8 ranks train like
# PyTorch and one rank, every collective on every axis is the plan's, and
# tp_w's reduce-scatters are the paper's backward weight traffic: per linear
# layer one reduce-scatter of its gradient, |W|/q^2, over the weight axis
# (Bian et al. 2021, sec. 3; the forward's all-gathers of the weights share
# tp_w with the gathers of what the cube does not split, and are the
# plan's).
def cube_weight_scatters(manifest, q):
    """Per step: (bytes, calls) of the weights' gradient reduce-scatters
    over tp_w, from the blocks' shapes (each [n/q, k/q^2] or its transpose,
    gathered q-fold for the product)."""
    weights = linear_weights(manifest)
    return (sum(4 * p["shape"][0] * p["shape"][1] * q for p in weights), len(weights))


for model, batch, name, extra in [("gpt2", 4, "adamw", ""), ("llama", 4, "sgd_plain", ""),
                                  ("llama", 4, "sgd_plain", "recompute=full")]:
    feed_dir, reference, _ = batch_data(model, batch)
    slug = "-" + extra.replace("=", "") if extra else ""
    # GPT-2's cube is the search's choice when tp_mode=3d is all it fixes.
    ran = grid_run(model, name, batch, "tp=8,tp_mode=3d" + ("," + extra if extra else ""), f"{model}-cube2x2x2{slug}",
                   {"mode": "3d", "side": 2}, feed_dir, reference, searched="tp_mode=3d" if model == "gpt2" else None)
    if not ran:
        continue
    manifest, log, loss_error, worst_weight, where, first = ran
    tag = f"{model}-{name}-cube2x2x2{slug}"
    scattered = (first["reduce_scatter"]["tp_w"]["bytes"], first["reduce_scatter"]["tp_w"]["calls"])
    want = cube_weight_scatters(manifest, 2)
    check(scattered == want, f"{tag}: tp_w reduce-scattered {scattered} (bytes, calls); the weights' gradients are {want}")
    if extra:
        # Recomputation re-runs each layer's forward (its gathers and
        # reduce-scatters again, as the plan counts) and changes nothing else.
        same_as = f"{WORK}/{model}-{name}-cube2x2x2.log"
        check(os.path.exists(same_as) and losses(log) == losses(same_as),
              f"{tag}: the losses differ from the same cube without recomputation")
    print(f"{model:12} {'2x2x2 cube':9} {name + (' ' + extra if extra else ''):9} {loss_error:28.2e} {worst_weight:30.2e}  ({where}; tp_w "
          f"reduce_scatter {want[0]} B/{want[1]} = the weights' gradients, |W|/q^2 each; every collective "
          "measured = plan)")
    check(loss_error <= 1e-5, f"{tag}: losses differ from PyTorch's by {loss_error:.2e}")
    check(worst_weight <= 1e-5, f"{tag}: final weights differ from one rank's by {worst_weight:.2e} ({where})")

# 2.5D layers and 3D cubes composed, on 16 ranks: two pipeline stages each
# on its own 2 x 2 x 2 (two microbatches), and two data-parallel replicas
# of one under ZeRO-1 and ZeRO-2; LLaMA on 8 rows (the 4-row batch and its
# rows reversed): the losses are the single-rank program's and, beside the
# data axis, every collective's bytes and calls and the model states are
# the plan's. (A pipeline rank's own bytes are not predicted yet.)
def doubled_rows(src, dst):
    """A feed of twice the rows: each file's rows, then the same rows in
    reverse order (a .npy of [4, ...] becomes [8, ...]; the header keeps its
    length)."""
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        data = open(f"{src}/{name}", "rb").read()
        length = struct.unpack("<H", data[8:10])[0]
        header, body = data[10:10 + length].decode("latin1"), data[10 + length:]
        rows = int(header.split("'shape': (")[1].split(",")[0])
        width = len(body) // rows
        reversed_rows = b"".join(body[r * width:(r + 1) * width] for r in reversed(range(rows)))
        header = header.replace(f"'shape': ({rows},", f"'shape': ({2 * rows},")
        if len(header) != length:
            header = header.rstrip("\n").rstrip(" ")
            header += " " * (length - 1 - len(header)) + "\n"
        open(f"{dst}/{name}", "wb").write(data[:10] + header.encode("latin1") + body + reversed_rows)


feed8 = f"{WORK}/llama-feed8"
doubled_rows(batch_data("llama", 4)[0], feed8)
single8 = f"{WORK}/llama-b8"
built = compile_model("llama", single8, "--gpus", "1", batch=8)
check(built.returncode == 0, f"llama on one rank, 8 rows: {built.stderr[-2000:]}")
one = train(single8, "--feed", feed8, "--steps", "4", "--log", f"{WORK}/llama-b8.log")
check(one.returncode == 0, f"llama on one rank, 8 rows: {one.stderr[-1500:]}")
for strategy, label in [("tp=8,tp_mode=2.5d,tp_depth=2,pp=2,microbatches=2", "2.5D pp=2"),
                        ("tp=8,tp_mode=3d,pp=2,microbatches=2", "3D pp=2"),
                        ("dp=2,tp=8,tp_mode=2.5d,tp_depth=2,zero=2", "dp=2 x 2.5D zero=2"),
                        ("dp=2,tp=8,tp_mode=3d,zero=1", "dp=2 x 3D zero=1")]:
    tag = "llama-" + "".join(c for c in label if c.isalnum())
    program = f"{WORK}/{tag}"
    built = compile_model("llama", program, "--gpus", "16", "--strategy", strategy, batch=8)
    check(built.returncode == 0, f"llama {label}: {built.stderr[-2000:]}")
    if built.returncode or one.returncode:
        continue
    run = train(program, "--feed", feed8, "--steps", "4", "--log", f"{WORK}/{tag}.log", ranks=16)
    check(run.returncode == 0, f"llama {label}: run failed: {run.stderr[-1500:]}")
    if run.returncode:
        continue
    error = worst_relative(losses(f"{WORK}/{tag}.log"), losses(f"{WORK}/llama-b8.log"))
    planned = ""
    if "pp=" not in strategy:
        manifest = json.load(open(f"{program}/manifest.json"))
        check_counters(f"{WORK}/{tag}.log", manifest["predicted_comm_bytes_per_step_by_optimizer"]["lamb"], tag,
                       calls=manifest["predicted_comm_calls_per_step_by_optimizer"]["lamb"])
        check_model_states(f"{WORK}/{tag}.log", manifest["predicted_model_state_bytes_per_rank_by_optimizer"]["lamb"],
                           tag)
        planned = "; every collective and the model states = plan"
    print(f"llama {label} (16 ranks), lamb: losses within {error:.2e} of one rank's{planned}")
    check(error <= 1e-5, f"llama {label}: losses differ from one rank's by {error:.2e}")

# Pipelines of grids: two stages, each on its own 2 x 2 grid (8 ranks), the
# layers split alike (the first norm brings the embeddings' sum into the
# grid): GPT-2 trains like PyTorch. (Each stage's bytes are not predicted
# per pipeline rank yet.)
feed4, reference4, _ = batch_data("gpt2", 4)
program = f"{WORK}/gpt2-grid2x2-pp2"
built = compile_model("gpt2", program, "--gpus", "8", "--strategy", "tp=4,tp_mode=2d,pp=2,microbatches=2", batch=4)
check(built.returncode == 0, f"gpt2 2D grid x pp=2: {built.stderr[-2000:]}")
if built.returncode == 0:
    run = train(program, "--feed", feed4, "--log", f"{WORK}/gpt2-grid2x2-pp2.log",
                *optimizer_flags("lamb", reference4["hyper_parameters"]["lamb"]), ranks=8)
    check(run.returncode == 0, f"gpt2 2D grid x pp=2: run failed: {run.stderr[-1500:]}")
    if run.returncode == 0:
        error = worst_relative(losses(f"{WORK}/gpt2-grid2x2-pp2.log"), reference4["losses"]["lamb"])
        print(f"gpt2 pp=2 x 2x2 grid (8 ranks), lamb: losses within {error:.2e} of PyTorch's")
        check(error <= 1e-5, f"gpt2 2D grid x pp=2: losses differ from PyTorch's by {error:.2e}")


# Every initializer trainable (no --trainable file): LLaMA's rotary tables,
# read as copies on every grid rank, get gradients summed over both axes
# of the grid (a [1, 1, s, d] table: all-reduced, no dimension to
# scatter). The grid trains like one rank, gradient norm included.
feed4 = batch_data("llama", 4)[0]
every = {}
for ranks, strategy in ((1, None), (4, "tp=4,tp_mode=2d")):
    program = f"{WORK}/llama-all-trainable-{ranks}"
    how = ["--strategy", strategy] if strategy else []
    built = compile_model("llama", program, "--gpus", str(ranks), *how, batch=4, trainable_file=False)
    check(built.returncode == 0, f"llama, every initializer trainable, on {ranks} ranks: {built.stderr[-2000:]}")
    if built.returncode == 0:
        run = train(program, "--feed", feed4, "--steps", "3", "--log", f"{program}.log", ranks=ranks if strategy else 0)
        check(run.returncode == 0, f"llama, every initializer trainable, on {ranks} ranks: {run.stderr[-1500:]}")
        if run.returncode == 0:
            every[ranks] = [(r["loss"], r["grad_norm"]) for r in map(json.loads, open(f"{program}.log"))]
if len(every) == 2:
    error = max(worst_relative([x[i] for x in every[4]], [x[i] for x in every[1]]) for i in (0, 1))
    print(f"llama, every initializer trainable, 2 x 2 grid: losses and gradient norms within {error:.2e} of one rank's")
    check(error <= 1e-5, f"llama, every initializer trainable: the grid differs from one rank by {error:.2e}")

# A grid refuses what it cannot run, naming it.
check_refusals([
    ("a 3D cube on a number of tensor ranks that is not a cube",
     compile_model("gpt2", f"{WORK}/tpz", "--gpus", "4", "--strategy", "tp=4,tp_mode=3d", batch=4),
     "tp_mode=3d needs a cube number of tensor ranks (q x q x q), not tp=4"),
    ("a 2D grid that does not divide the rows (3 rows on a 2 x 2 grid)",
     compile_model("gpt2", f"{WORK}/grid-rows", "--gpus", "4", "--strategy", "tp=4,tp_mode=2d", batch=3),
     "splits this linear layer's 3 rows in 2 and its 16 input and 48 output features in 2, which must divide"),
    ("2.5D layers that do not divide the rows (2 rows over 2 layers of 2 x 2 grids)",
     compile_model("gpt2", f"{WORK}/layers-rows", "--gpus", "8", "--strategy", "tp=8,tp_mode=2.5d,tp_depth=2",
                   batch=2),
     "on 2 layers of 2 x 2 grids (2.5D) splits this linear layer's 2 rows in 4"),
    ("2.5D layers that do not divide the tensor ranks (tp=8, tp_depth=3)",
     compile_model("gpt2", f"{WORK}/layers-3", "--gpus", "8", "--strategy", "tp=8,tp_mode=2.5d,tp_depth=3",
                   batch=4),
     "tp_mode=2.5d with tp_depth=3 needs tp = q x q x 3 tensor ranks (3 layers of a q x q grid), not tp=8"),
    ("a 2D grid on a number of tensor ranks that is not a square",
     compile_model("gpt2", f"{WORK}/grid-8", "--gpus", "8", "--strategy", "tp=8,tp_mode=2d", batch=4),
     "tp_mode=2d needs a square number of tensor ranks (a q x q grid), not tp=8"),
 ])

finish()
