//===- PartitionerSplits.cpp - the partitioner's splits, read back --------===//

#include "PartitionerSplits.h"

#include "colossal/cost/AppliedSharding.h"
#include "passes/partition/SequenceAxisParallel.h"
#include "passes/partition/SequenceParallel.h"
#include "passes/partition/TensorGrid.h"
#include "passes/partition/TensorParallel.h"
#include "passes/plan/CostGraphBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"

namespace colossal {

namespace {

/// What reading a split back needs of `module`'s graph; nullopt (with the
/// bridge's diagnostic) where the cost model cannot represent it.
std::optional<cost::Graph> shapesOf(mlir::ModuleOp module) {
  plan::CostGraphOptions options;
  options.shapesOnly = true;
  mlir::FailureOr<cost::Graph> graph =
      plan::buildCostGraph(module.lookupSymbol<mlir::func::FuncOp>("forward"), options);
  if (mlir::failed(graph))
    return std::nullopt;
  return std::move(*graph);
}

/// Runs `split` (true when it splits) with its diagnostics kept as the
/// reason (the partitioner's refusal is a placement's reason, not an error
/// of the search): empty when it succeeds.
template <typename Split> std::string refusalOf(mlir::MLIRContext &context, Split &&split) {
  std::string reason;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &diag) {
    if (reason.empty())
      reason = diag.str();
    return mlir::success();
  });
  if (split())
    return {};
  return reason.empty() ? std::string("it gave no reason") : reason;
}

} // namespace

PartitionerSplits::TensorSplit &PartitionerSplits::tensorSplit(mlir::ModuleOp raised, int64_t microbatch,
                                                               int64_t ranks) {
  auto [it, fresh] = tensorSplits_.try_emplace({microbatch, ranks});
  TensorSplit &made = it->second;
  if (!fresh)
    return made;
  made.module = raised.clone();
  made.reason =
      refusalOf(context_, [&] { return mlir::succeeded(partition::partitionTensorParallel(*made.module, ranks)); });
  if (made.reason.empty())
    made.graph = shapesOf(*made.module);
  return made;
}

std::optional<cost::GraphSharding> PartitionerSplits::split(const cost::Graph &whole, const cost::ModelAxis &axis,
                                                            std::string &error) {
  mlir::ModuleOp raised = models_.at(whole.microbatch, error);
  if (!raised)
    return std::nullopt;
  auto refused = [&](const std::string &reason) {
    error = "the partitioner cannot split the model as " + axis.str() + ": " + reason;
    return std::nullopt;
  };
  if (axis.onGrid()) {
    cost::Strategy grid;
    axis.applyTo(grid);
    auto [side, depth] = cost::tensorGrid(grid);
    mlir::OwningOpRef<mlir::ModuleOp> module = raised.clone();
    std::string reason = side > 0 ? refusalOf(context_,
                                              [&] {
                                                return mlir::succeeded(partition::partitionTensorGrid(
                                                    *module, side, depth, axis.grid == cost::TensorMode::ThreeD));
                                              })
                                  : "no grid of " + std::to_string(axis.tensor) + " ranks";
    if (!reason.empty())
      return refused(reason);
    return cost::replicatedSharding(whole);
  }
  TensorSplit *tensor = axis.tensor > 1 ? &tensorSplit(raised, whole.microbatch, axis.tensor) : nullptr;
  if (tensor && !tensor->reason.empty())
    return refused(tensor->reason);
  // The tensor split alone is read from the kept graph (a copy costs as
  // much as building it).
  std::optional<cost::Graph> sequenceSplit;
  const std::optional<cost::Graph> *split = &sequenceSplit;
  if (tensor && axis.mode == cost::SequenceMode::None) {
    split = &tensor->graph;
  } else {
    mlir::OwningOpRef<mlir::ModuleOp> module = tensor ? tensor->module->clone() : raised.clone();
    std::string reason = refusalOf(context_, [&] {
      if (axis.mode == cost::SequenceMode::Megatron)
        return mlir::succeeded(partition::applySequenceParallelism(*module));
      return mlir::succeeded(partition::applySequenceAxisParallelism(*module, axis.sequence,
                                                                     axis.mode == cost::SequenceMode::Ring
                                                                         ? partition::SequenceAlgorithm::Ring
                                                                         : partition::SequenceAlgorithm::AllToAll));
    });
    if (!reason.empty())
      return refused(reason);
    sequenceSplit = shapesOf(*module);
  }
  if (!*split || (tensor && !tensor->graph)) {
    error = "the cost model cannot represent the split model";
    return std::nullopt;
  }
  cost::Strategy strategy;
  axis.applyTo(strategy);
  return cost::appliedModelAxes(whole, tensor && axis.ownSequenceAxis() ? &*tensor->graph : nullptr, **split,
                                cost::buildMesh(strategy, cluster_), axis.tensor, axis.sequence, error);
}

} // namespace colossal
