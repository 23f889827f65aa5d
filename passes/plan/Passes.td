//===- Passes.td - planning passes --------------------------*- tablegen -*-===//

#ifndef COLOSSAL_PASSES_PLAN
#define COLOSSAL_PASSES_PLAN

include "mlir/Pass/PassBase.td"

def TestCostGraph : Pass<"train-test-cost-graph", "mlir::func::FuncOp"> {
  let summary = "reports the cost model's view of a function (for tests)";
  let description = [{
    Builds `cost::Graph` from the function through the bridge and emits a
    remark with what the cost model sees: ops, parameter count, model FLOPs
    (contractions, forward and backward) and the activation bytes kept for
    backward without parallelism.

    ```
    remark: cost graph: 4 ops, 874 parameters, 19968 model FLOPs, 1664 activation bytes
    ```
  }];
}

def DistApplyPlan : Pass<"dist-apply-plan", "mlir::ModuleOp"> {
  let summary = "writes the training plan on the module (dist.plan)";
  let description = [{
    Records the plan the module is compiled for as `dist.plan`
    (`#dist.plan`): the degrees of data, tensor, sequence and pipeline
    parallelism, the tensor and sequence algorithms, microbatches and
    schedule, ZeRO, offload and recomputation, and the cluster the plan was
    priced for with the nodes its ranks need. The partitioning and memory
    passes and codegen read the plan from the module; a pass given its own
    setting that contradicts the plan fails, naming both.

    ```
    colossal-opt --dist-apply-plan='strategy=dp=2,tp=2,sp_mode=megatron cluster=dgx-h100' m.mlir
    module attributes {dist.plan = #dist.plan<dp = 2, tp = 2, sequence = "megatron", cluster = "dgx-h100">}
    ```

    Fails naming the key when the strategy does not parse, the cluster when
    it does not load, and both plans when the module already has another.
  }];
  let options = [
    Option<"strategyText", "strategy", "std::string", "\"\"",
           "The plan: dp=2,tp=2,sp_mode=megatron,zero=1,... (cost::Strategy's keys; empty: one rank)">,
    Option<"clusterName", "cluster", "std::string", "\"dgx-a100\"",
           "The machine the plan is priced for: a preset name or a colossal-cluster/1 file">,
  ];
  let dependentDialects = ["::colossal::dist::DistDialect"];
}

#endif // COLOSSAL_PASSES_PLAN
