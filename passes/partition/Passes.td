//===- Passes.td - splitting the step over the mesh ---------*- tablegen -*-===//

#ifndef COLOSSAL_PASSES_PARTITION
#define COLOSSAL_PASSES_PARTITION

include "mlir/Pass/PassBase.td"

def TensorParallelPass : Pass<"train-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron's 1D tensor parallelism of @forward over mesh axis tp";
  let description = [{
    Splits @forward's column-then-row pairs of linear layers (MLP, SwiGLU and
    attention blocks, attention by heads) over the ranks of mesh axis `tp`
    (Shoeybi et al. 2019), and its vocabulary tables by rows (embedding
    lookups, output layers scoring a cross-entropy). A replicated value
    entering a split region becomes copies over the axis (its gradient is
    summed); a row-parallel output is summed. Split parameters take their
    slice's type and record `split_dim` and `splits`. Run before
    `train-autodiff`; `train-lower-resharding` turns the reshardings into
    collectives. Fails naming the op when a width does not divide by `ranks`.
    On a module with a `dist.plan`, the plan's `tp` (nothing to do at 1).
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "0", "Ranks of the tensor axis (0: the module's dist.plan's tp)">,
    Option<"report", "report", "bool", "false", "Emit a remark saying what was split">,
  ];
}

def TensorGridPass : Pass<"train-tensor-grid", "::mlir::ModuleOp"> {
  let summary = "2D (Optimus, SUMMA), 2.5D (Tesseract) and 3D tensor parallelism of @forward";
  let description = [{
    Splits @forward over a q x q grid of tensor ranks, mesh axes `tp_row`
    and `tp_col` (Xu et al. 2021): activations in blocks (rows over
    `tp_row`, features over `tp_col`), every linear layer whose weight is
    read once as SUMMA's product of blocks (`dist.grid_linear`), its weight
    a 1/q^2 block per rank and its bias split over `tp_col`; layer and RMS
    norms on the blocks (row statistics completed over `tp_col`);
    elementwise ops and residual adds on the blocks; reshapes, transposes,
    slices and concatenations carrying the split, attention by heads; a
    cross-entropy over block logits
    vocabulary-parallel over `tp_col`, its rows summed over `tp_row`. Other
    ops reading blocks compute on whole values (the blocks gathered), so the
    step stays exact; the report names them. Split parameters record a
    `dist.sharding` layout. Fails naming the op when a dimension does not
    divide by q. On a module with a `dist.plan`, runs when the plan asks for
    `tp_mode = "2d"` (tp = q^2) or `"2.5d"`.

    2.5D (Wang et al. 2021, Tesseract): `depth` layers of the q x q grid,
    mesh axis `tp_depth`. The rows are split over the layers, then over each
    layer's `tp_row`; each layer runs the 2D algorithm on its rows with the
    same weight blocks (held 1/q^2, read as copies over `tp_depth`, so their
    gradients are summed over the depth); the loss sums its rows over
    `tp_rows`, one grid column's ranks across the layers.

    3D (`cube`, tp = q^3; Bian et al. 2021): a q x q x q cube, mesh axes
    `tp_in`, `tp_w`, `tp_out`. Activations hold 1/q^3 (rows over `tp_w` and
    one of `tp_in`/`tp_out`, features over the other, swapped by each
    linear layer); a linear layer gathers its input's rows and its weight
    block (1/q^3 per rank) over `tp_w`, multiplies locally and
    reduce-scatters the partial sums into the rows, all as reshardings.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "0", "Tensor ranks, q x q x depth (0: the module's dist.plan's tp)">,
    Option<"depth", "depth", "int64_t", "0", "Layers of the grid, 2.5D's depth (0: the plan's tp_depth, else 1)">,
    Option<"cube", "cube", "bool", "false", "3D: the tensor ranks as a q x q x q cube (default: the plan's tp_mode)">,
    Option<"report", "report", "bool", "false", "Emit a remark saying what was split">,
  ];
}

def SequenceParallelPass : Pass<"train-sequence-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron's sequence parallelism on the tensor axis";
  let description = [{
    On a module split by `train-tensor-parallel` (Korthikanti et al. 2022):
    outside the split blocks, norms, residual adds, dropout and biases
    compute on the rank's slice of the tokens. Only the layouts of the tensor
    split's reshardings change: each block's entry gathers the token split
    (an all-gather), each exit sum scatters it (a reduce-scatter). On a
    module with a `dist.plan`, runs when the plan asks for
    `sequence = "megatron"` with `tp` above 1.
  }];
  let options = [
    Option<"report", "report", "bool", "false", "Emit a remark saying what was split by tokens">,
  ];
}

def SequenceAxisParallelPass : Pass<"train-sequence-axis-parallel", "::mlir::ModuleOp"> {
  let summary = "sequence parallelism over mesh axis sp: all-to-all (Ulysses) or ring attention";
  let description = [{
    Every rank of axis `sp` holds the model and its slice of each sequence's
    tokens. Attention trades the token split for a head split between
    all-to-alls (`algorithm=all-to-all`, Jacobs et al. 2023) or keeps the
    rank's queries while key and value blocks pass around the ring
    (`algorithm=ring`, Li et al. 2021). The loss sums its rows and counted
    labels over the axis. On a module with a `dist.plan`, the plan's `sp` and
    `sequence` (nothing to do unless all-to-all or ring with `sp` above 1).
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "0", "Ranks of the sequence axis (0: the module's dist.plan's sp)">,
    Option<"algorithm", "algorithm", "std::string", "\"\"",
           "all-to-all or ring (empty: the plan's, else all-to-all)">,
    Option<"report", "report", "bool", "false", "Emit a remark saying what was split">,
  ];
}

def LowerReshardingPass : Pass<"train-lower-resharding", "::mlir::ModuleOp"> {
  let summary = "replaces every dist.reshard with the collectives of its cheapest plan";
  let description = [{
    The partitioning passes say how values lie on the mesh with
    `dist.reshard`; `train-autodiff` differentiates them. This pass turns
    each into the single-axis collectives the cost model's resharding plan
    names, so the bytes the search priced are the bytes the program moves.
    With `keep-forward` (the training pipeline's), @forward, the model the
    cost model reads, keeps its reshardings as stated.
  }];
  let options = [
    Option<"keepForward", "keep-forward", "bool", "false", "Leave @forward's reshardings as they are">,
  ];
}

def PipelineStagesPass : Pass<"train-pipeline-stages", "::mlir::ModuleOp"> {
  let summary = "marks each op of @forward with the pipeline stage it runs on";
  let description = [{
    On a module whose `dist.plan` has `pp` x `virtual_stages` above 1: the
    layers (the cost graph's repeated blocks) go to the virtual stages in
    order, as many on each as the plan's `stage_layers` says (else equal
    shares), the ops before the first layer to the first stage and those
    after the last to the last; an op reading a later stage's value moves
    there. What reads only inputs and constants (masks, positions) or only
    weights and constants (parameter reads, their views) is made again on
    every stage that reads it (a weight read on two stages, as GPT's tied
    embedding and output layer, is read on both). Each op gets `dist.stage`;
    `train-autodiff` gives gradient ops their op's stage and
    `train-split-stages` cuts the step by them. Run after the tensor and
    sequence splits, before `train-autodiff`. Fails naming the cause when
    there are fewer layers than stages, no repeated layers, or a
    `stage_layers` that does not cover the layers.
  }];
  let options = [
    Option<"report", "report", "bool", "false", "Emit a remark with the layers on each stage">,
  ];
}

def SplitStagesPass : Pass<"train-split-stages", "::mlir::ModuleOp"> {
  let summary = "cuts @forward_backward into a forward and a backward function per pipeline stage";
  let description = [{
    On a module whose ops carry `dist.stage` (`train-pipeline-stages`):
    @forward_backward becomes `@stage<s>_forward` and `@stage<s>_backward`
    for each virtual stage s. A value one stage's forward makes and a later
    stage reads is a result `send:<k>` (`dist.to`) of the first and an
    argument `recv:<k>` (`dist.from`) of the second; gradients flow back the
    same way; what a stage's backward reads of its forward is a result
    `save:<k>` of the forward and an argument of the backward. Program inputs
    are arguments of every function reading them; constants, parameter reads
    and what reads only them (weight views, casts) are made where they are
    read. The last stage's forward returns the
    loss; each backward returns its stage's part of the gradients it makes
    (`grad:<name>`; a weight read on several stages has a part on each,
    which the stages sum). Run last.
  }];
}

#endif // COLOSSAL_PASSES_PARTITION
