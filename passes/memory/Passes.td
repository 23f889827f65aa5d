//===- Passes.td - when the step holds what -----------------*- tablegen -*-===//

#ifndef COLOSSAL_PASSES_MEMORY
#define COLOSSAL_PASSES_MEMORY

include "mlir/Pass/PassBase.td"

def RecomputeLayersPass : Pass<"train-recompute-layers", "::mlir::ModuleOp"> {
  let summary = "re-runs each layer's forward ops in the backward pass instead of keeping their results";
  let description = [{
    Activation checkpointing per layer (Chen et al. 2016; Megatron-LM's full
    and selective granularities). The backward pass of @forward_backward keeps
    each layer's checkpoints (the values that leave the layer) and re-runs the
    rest of the layer's forward ops just before the layer's backward needs
    them; `granularity=selective` keeps the contractions' results too. The
    layers are the repeated blocks the cost model finds in @forward. The
    re-run ops are the same ops on the same inputs: the gradients are bit for
    bit those without recomputation. On a module with a `dist.plan`, the
    plan's `recompute` (nothing to do at `none`).
  }];
  let options = [
    Option<"granularity", "granularity", "std::string", "\"\"",
           "full: re-run every op of a layer but its checkpoints; selective: keep the contractions' results too "
           "(empty: the plan's, else full)">,
    Option<"report", "report", "bool", "false", "Emit a remark saying what was recomputed">,
  ];
}

def RegatherForBackwardPass : Pass<"train-regather-for-backward", "::mlir::ModuleOp"> {
  let summary = "gives the backward pass its own all-gather of each gathered sequence shard it reads";
  let description = [{
    Under Megatron sequence parallelism a block's input lives split by tokens
    and is all-gathered at the block's entry. Megatron-LM keeps the shard, not
    the gathered tensor, and gathers it again in the backward pass
    (Korthikanti et al. 2022, section 4.2.2); so does this pass, placing the
    second gather just before its first backward use. The cost model charges
    the second gather, so the bytes moved are the plan's. On a module with a
    `dist.plan`, runs when the plan asks for `sequence = "megatron"` with
    `tp` above 1.
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"tp\"", "The mesh axis whose gathers are repeated">,
    Option<"report", "report", "bool", "false", "Emit a remark with the number of gathers repeated">,
  ];
}

def RereadParametersPass : Pass<"train-reread-parameters", "::mlir::ModuleOp"> {
  let summary = "gives the backward pass its own read of each weight the forward also reads";
  let description = [{
    A `train.param` read stays fetched until the last use of that read; under
    ZeRO-3 a fetch is an all-gather. The backward pass gets its own read of
    each weight (and re-runs the weight's views: transposes, reshapes, casts),
    placed before its first use there, so each weight is whole twice, briefly,
    instead of across the whole step.
  }];
}

def FoldTransposesPass : Pass<"train-fold-transposes", "::mlir::ModuleOp"> {
  let summary = "folds matrix transposes around products into train.gemm's operand flags";
  let description = [{
    On matrices:

    ```
    matmul(transpose(a), b)      -> gemm(a, b) {trans_a}
    matmul(a, transpose(b))      -> gemm(a, b) {trans_b}
    transpose(gemm(a, b))        -> gemm(b, a), both flags flipped
    transpose(all_reduce(gemm))  -> all_reduce(the product transposed)
    linear(x, transpose(w), b)   -> linear(x, w, b) {transpose_weight}
    dist.grid_linear(x, transpose(w))
                                 -> dist.grid_linear(x, w) {transpose_weight}
    transpose(dw) of dist.grid_linear_grad(x, transpose(w), dy)
                                 -> dw of dist.grid_linear_grad(x, w, dy) {transpose_weight}
    ```

    so a weight gradient is one product made in the weight's layout, and a
    weight stored as `nn.Linear` stores it is read in place. Batched (rank > 2)
    products keep their transposes.
  }];
}

#endif // COLOSSAL_PASSES_MEMORY
