//===- DistAttrs.td - attributes of the dist dialect --------*- tablegen -*-===//

#ifndef COLOSSAL_DIST_ATTRS
#define COLOSSAL_DIST_ATTRS

include "colossal/Dialect/Dist/DistDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how one rank's part of a value relates to the whole value on the mesh";
  let description = [{
    For each dimension the mesh axes splitting it (major first, joined by
    `*`; `-` when whole), the axes over which the ranks hold pending partial
    sums (`sum(...)`), and the axes over which they hold copies their readers
    use each in their own way (`copies(...)`). An axis named nowhere holds
    the value whole, read the same way everywhere (Layout.h).

    ```mlir
    #dist.sharding<[-, tp, -] sum(dp) copies(sp)>
    ```

    Constraints:
    - every name is a mesh axis name (letters, digits, `_`), each at most
      once in the whole sharding.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$sums, "::mlir::ArrayAttr":$copies);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "const ::colossal::dist::Layout &":$layout)>
  ];
  let extraClassDeclaration = [{
    /// The sharding as a layout (Layout.h).
    ::colossal::dist::Layout getLayout() const;
  }];
}

def Dist_PlanAttr : AttrDef<Dist_Dialect, "Plan"> {
  let mnemonic = "plan";
  let summary = "the training plan a module is compiled for";
  let description = [{
    Written on the module as `dist.plan` by `dist-apply-plan` (the search's
    choice, a plan file or `--strategy`); the partitioning and memory passes
    read their settings from it and codegen builds the program and its
    predictions for it. The degrees multiply to the ranks the program runs
    on; `cluster` names the machine the plan was priced for (a preset or a
    cluster file) with `nodes` of it. A parameter at its default is not
    printed.

    ```mlir
    module attributes {dist.plan = #dist.plan<dp = 2, tp = 2, sequence = "megatron",
                                              microbatches = 4, zero = 1, recompute = "selective">}
    ```

    Constraints:
    - the degrees (`dp`, `tp`, `sp`, `pp`), `tp_depth`, `microbatches`,
      `virtual_stages` and `nodes` are at least 1; `zero` is 0 to 3;
    - `tp_mode` is `1d`, `2d`, `2.5d` or `3d`; `sequence` is `none`,
      `megatron`, `all-to-all` or `ring`; `schedule` is `gpipe`, `1f1b` or
      `interleaved`; `offload` is `none` or `optimizer`; `recompute` is
      `none`, `selective` or `full`;
    - `stage_layers`, when given, has `pp` x `virtual_stages` positive
      entries (`array<i64: 4, 4>`).
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "1">:$dp,
    DefaultValuedParameter<"int64_t", "1">:$tp,
    DefaultValuedParameter<"int64_t", "1">:$sp,
    DefaultValuedParameter<"int64_t", "1">:$pp,
    StringRefParameter<"", "\"1d\"">:$tp_mode,
    DefaultValuedParameter<"int64_t", "1">:$tp_depth,
    StringRefParameter<"", "\"none\"">:$sequence,
    DefaultValuedParameter<"int64_t", "1">:$microbatches,
    StringRefParameter<"", "\"1f1b\"">:$schedule,
    DefaultValuedParameter<"int64_t", "1">:$virtual_stages,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$stage_layers,
    DefaultValuedParameter<"int64_t", "0">:$zero,
    StringRefParameter<"", "\"none\"">:$offload,
    StringRefParameter<"", "\"none\"">:$recompute,
    StringRefParameter<"", "\"dgx-a100\"">:$cluster,
    DefaultValuedParameter<"int64_t", "1">:$nodes
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The ranks the plan runs on.
    int64_t getRanks() const { return getDp() * getTp() * getSp() * getPp(); }
    /// Sequence parallelism on an axis of its own (all-to-all or ring).
    bool hasSequenceAxis() const { return getSequence() == "all-to-all" || getSequence() == "ring"; }
    /// Megatron's sequence parallelism, riding on a tensor axis.
    bool hasMegatronSequence() const { return getSequence() == "megatron" && getTp() > 1; }
    /// The module attribute's name.
    static constexpr ::llvm::StringLiteral kAttrName = "dist.plan";
    /// The plan on `module`, or null when none was applied.
    static PlanAttr on(::mlir::Operation *module) { return module->getAttrOfType<PlanAttr>(kAttrName); }
  }];
}

#endif // COLOSSAL_DIST_ATTRS
