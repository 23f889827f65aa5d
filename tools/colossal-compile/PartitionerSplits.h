//===- PartitionerSplits.h - the partitioner's splits, read back -*- C++ -*-===//
//
// The plans `-o DIR` builds place the model axes as the partitioner splits
// the model: Megatron's pairs, heads and vocabulary over the tensor ranks
// (TensorParallel.h, with its sequence parallelism under Megatron), then
// the tokens of what it made over a sequence axis of its own
// (SequenceAxisParallel.h, under all-to-all and ring), or a 2D, 2.5D or 3D
// grid (TensorGrid.h). The search prices those plans with the split read
// back as a sharding of the model's cost graph (AppliedSharding.h), so each
// axis is split once per graph structure, on a copy of the raised model.
//
// Every axis with tensor ranks starts from the same tensor split: it is
// made once per microbatch size and rank count and kept, and the axes with
// sequence parallelism split a copy of it. On a model of a hundred layers
// the splits are a third of planning.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TOOLS_COLOSSAL_COMPILE_PARTITIONERSPLITS_H
#define COLOSSAL_TOOLS_COLOSSAL_COMPILE_PARTITIONERSPLITS_H

#include "RaisedModels.h"

#include "colossal/cost/Cluster.h"
#include "colossal/cost/GraphSearch.h"

#include <optional>
#include <string>

namespace colossal {

class PartitionerSplits {
public:
  PartitionerSplits(mlir::MLIRContext &context, RaisedModels &models, const cost::Cluster &cluster)
      : context_(context), models_(models), cluster_(cluster) {}

  /// `axis`'s split of `whole` (the cost graph at its microbatch size) on
  /// the plan's mesh; nullopt with the partitioner's reason in `error` when
  /// it cannot split the model that way. A grid is split to learn whether
  /// it can be built; its sharding is `whole` replicated (the estimator
  /// prices the grid).
  std::optional<cost::GraphSharding> split(const cost::Graph &whole, const cost::ModelAxis &axis, std::string &error);

private:
  /// The tensor split alone at one microbatch size: the module, its cost
  /// graph, or the partitioner's reason it cannot be made.
  struct TensorSplit {
    mlir::OwningOpRef<mlir::ModuleOp> module;
    std::optional<cost::Graph> graph;
    std::string reason;
  };
  TensorSplit &tensorSplit(mlir::ModuleOp raised, int64_t microbatch, int64_t ranks);

  mlir::MLIRContext &context_;
  RaisedModels &models_;
  const cost::Cluster &cluster_;
  std::map<std::pair<int64_t, int64_t>, TensorSplit> tensorSplits_;
};

} // namespace colossal

#endif // COLOSSAL_TOOLS_COLOSSAL_COMPILE_PARTITIONERSPLITS_H
