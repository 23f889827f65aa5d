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

#endif // COLOSSAL_PASSES_PLAN
