//===- PipelineStages.h - which pipeline stage each op of @forward runs on -*- C++ -*-===//
//
// A pipeline runs a model's layers on `pp` x `virtual_stages` virtual stages
// (the plan's `stage_layers` per stage, else equal shares), the ops before
// the first layer on the first stage and those after the last layer (the
// head and the loss) on the last: the cost model's placement
// (cost_model/lib/Estimator.cpp). The layers are the repeated blocks the
// cost graph finds. What reads only the program's inputs and constants
// (masks, position tables) or only weights and constants (parameter reads,
// their views and casts) is made again on every stage that reads it rather
// than sent: a weight used on two stages (GPT's tied embedding and output
// layer) is then read on both, and each gets its stage's part
// of the gradient.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_PIPELINESTAGES_H
#define COLOSSAL_PASSES_PARTITION_PIPELINESTAGES_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <vector>

namespace colossal::partition {

struct StageSummary {
  int64_t layers = 0;
  /// Layers on each virtual stage.
  std::vector<int64_t> stageLayers;
  /// Ops made again on a second (third, ...) stage.
  int64_t repeatedOps = 0;
};

/// Marks every op of @forward with its virtual stage (dist.stage) for
/// `stages` stages holding `stageLayers` layers each (empty: equal shares).
/// Fails with a diagnostic naming the cause when the model has fewer layers
/// than stages, no repeated layers, or a split that does not cover them.
mlir::FailureOr<StageSummary> assignPipelineStages(mlir::ModuleOp module, int64_t stages,
                                                   const std::vector<int64_t> &stageLayers);

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_PIPELINESTAGES_H
