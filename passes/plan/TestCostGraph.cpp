//===- TestCostGraph.cpp - report the cost graph as a remark -------------===//

#include "passes/plan/CostGraphBridge.h"
#include "passes/plan/Passes.h"

#include "colossal/cost/Estimator.h"

namespace colossal::plan {
#define GEN_PASS_DEF_TESTCOSTGRAPH
#include "passes/plan/Passes.h.inc"

namespace {
struct TestCostGraphPass : impl::TestCostGraphBase<TestCostGraphPass> {
  void runOnOperation() override {
    mlir::FailureOr<cost::Graph> graph = buildCostGraph(getOperation());
    if (mlir::failed(graph))
      return signalPassFailure();
    double activations = 0, remade = 0;
    for (const cost::Op &op : graph->ops)
      for (const cost::SavedTensor &saved : op.saved) {
        double n = 1;
        for (const auto &dim : saved.dims)
          n *= double(cost::Graph::dimSize(op, dim));
        activations += n * cost::bytesOf(saved.dtype);
        if (saved.recomputedWhenSelective)
          remade += n * cost::bytesOf(saved.dtype);
      }
    getOperation()->emitRemark()
        << "cost graph: " << graph->ops.size() << " ops, " << graph->parameterCount()
        << " parameters, " << int64_t(graph->modelFlops()) << " model FLOPs, "
        << int64_t(activations) << " activation bytes (" << int64_t(remade)
        << " made again under selective recomputation), " << graph->numLayers << " layers";
  }
};
} // namespace
} // namespace colossal::plan
