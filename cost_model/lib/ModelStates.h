//===- ModelStates.h - parameters, gradients and optimizer state per rank -*-
// C++ -*-===//
//
// What the plan stores per pipeline rank (parameters, gradients, optimizer
// state; ZeRO's shards; optimizer offload to the host), the data-parallel
// step that keeps them in sync (bucketed all-reduces or ZeRO's
// reduce-scatters and gathers, overlapped with the backward pass; the norm
// reductions over shards), the optimizer's time, and the rank's memory by
// category at its peak.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_MODELSTATES_H
#define COLOSSAL_COST_LIB_MODELSTATES_H

#include "ActivationMemory.h"
#include "EstimateContext.h"

#include <vector>

namespace colossal::cost {

/// Per pipeline rank, parameter elements.
struct RankParameters {
  /// All (stored, gathered), the trainable ones (reduced, updated, with
  /// optimizer state), one layer's (what ZeRO-3 gathers at a time), and the
  /// trainable tensors.
  std::vector<double> params, trainableParams, layerParams, trainableTensors;
  /// ZeRO-3 cuts every trainable tensor into dp chunks of ceil(n / dp) and
  /// gathers it whole (padded) for the forward pass, and again for the
  /// backward pass if the backward reads it (ShardedOptimizer.h).
  std::vector<double> gatheredForward, gatheredBackward;
  /// ... and how many tensors each pass gathers: one all-gather each.
  std::vector<double> gatheredForwardTensors, gatheredBackwardTensors;
  /// Trainable tensors the tensor axis splits (their norms are completed
  /// over it), and that axis (-1: none).
  std::vector<double> tensorSplitTensors;
  int tensorAxis = -1;
  /// Trainable elements a pipeline rank holds of weights that other
  /// pipeline ranks read too (a tied embedding and output layer): their
  /// gradients are summed over the pipeline axis.
  std::vector<double> sharedAcrossStages;
  /// Bytes per weight, and per trainable element of optimizer state.
  double weightBytes = 2, optimizerBytes = 12;
};

RankParameters countParameters(const EstimateContext &ctx);

/// Rank `r`'s data-parallel collectives (added to `comm`), optimizer and
/// offload times into `re`; returns what follows the pipeline's makespan on
/// that rank (exposed data-parallel time, optimizer, offload).
double dataParallelStep(const EstimateContext &ctx, int r, const RankParameters &p,
                        const std::vector<StageEstimate> &perStage, StageEstimate &re, std::vector<CommTotal> &comm);

/// Rank `r`'s memory at its peak (`peakInFlight`: the most microbatches
/// whose activations the pipeline schedule holds at once on it).
MemoryBreakdown rankMemory(const EstimateContext &ctx, int r, const RankParameters &p,
                           const StageActivations &activations, const WorkingBytes &working, int peakInFlight);

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_MODELSTATES_H
