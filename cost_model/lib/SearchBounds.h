//===- SearchBounds.h - what a candidate plan costs at least --------*- C++ -*-===//
//
// Both searches (Search.h on transformer shapes, GraphSearch.h on model
// files) skip a candidate when a lower bound on its step time cannot beat the
// plans kept, or a lower bound on its busiest rank's memory exceeds the
// device: the answer is the same as evaluating everything (SearchTest and
// GraphSearchTest compare them), only faster. Evaluating a pipeline costs
// time in proportion to its stages and microbatches, so the bounds matter
// most for deep pipelines of deep models, which is what keeps the search's
// time from growing with depth.
//
// The bounds rest on what the plans already evaluated measured per layer
// (MeasuredLayers): a layer's forward and backward time, with its tensor-
// and sequence-axis communication, and the activations it keeps per
// microbatch depend on the microbatch size, the tensor and sequence split,
// the placement of the tensor axis and the recomputation; not on the data
// or pipeline size, ZeRO or offload (those add to the step after the
// pipeline and to the model states). So the least seen of each holds the
// achieved GEMM efficiency, the collectives and the kept tensors, where a
// FLOP bound assumes the best rate and a model-state bound no activations.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_SEARCHBOUNDS_H
#define COLOSSAL_COST_LIB_SEARCHBOUNDS_H

#include "colossal/cost/Estimator.h"

#include <cstdint>
#include <vector>

namespace colossal::cost {

/// The least time and kept activations per layer seen in evaluated plans
/// that share the per-layer work, and the least time outside the layers.
struct MeasuredLayers {
  double seconds = -1;   // per layer, per microbatch (forward and backward)
  double outside = -1;   // the ops outside the layers, per microbatch
  double keptBytes = -1; // per layer, per microbatch, per rank

  void learn(const Estimate &e);
  bool known() const { return seconds >= 0 && outside >= 0 && keptBytes >= 0; }
  /// A lower bound on one microbatch's work W over `layers` layers and the
  /// ops outside them (0 before anything was learned).
  double work(int64_t layers) const;
  /// The same for the pipeline rank that holds the most of `layers` over
  /// `ranks`: whatever the split, at least its share rounded up.
  double busiestRank(int64_t layers, int ranks) const;
};

/// A lower bound on the pipeline's makespan for one microbatch's work W and
/// the busiest rank's work per microbatch `busiestRankWork`. In a pipeline of
/// p stages that take T_s per microbatch (sum W), stage s cannot start before
/// the first microbatch's forward has passed the stages before it, does m
/// microbatches, and is followed by the last microbatch's backward through
/// those stages: the step takes at least sum_{s' < s} T_s' + m T_s for every
/// s. The least possible maximum of these over all splits of W is
/// W / (1 - (1 - 1/m)^p) (each constraint tight: a geometric split), which is
/// m W without a pipeline and at least W. An interleaved schedule's ranks
/// start on their first chunk, so for it only the looser max(m, p) W / p
/// holds. Every schedule runs the busiest rank's work m times.
double pipelineLowerBound(const Strategy &s, double work, double busiestRankWork);

/// A lower bound on the device memory of the busiest rank of `s` with the
/// layers split as `split` (virtual stage c * pp + r on rank r): rank r keeps
/// its peak in flight (Pipeline.h) times its largest chunk's layers' kept
/// activations, and the model states of its layers' `layerParameters`
/// trainable elements each (what it holds outside the layers, buffers and
/// workspace only add).
double splitMemoryLowerBound(const Strategy &s, const std::vector<int64_t> &split, double keptBytes,
                             double layerParameters);

/// The same bound for the split that balances a 1F1B pipeline's stage times
/// (StageBalance.h), before those times are known: with work outside the
/// layers only on the first and last stages, every stage between them holds
/// at least layers / pp layers (rounded down; StageBalanceTest checks it), so
/// the second rank, which keeps min(m, pp - 1) microbatches, does. 0 (no
/// bound) for fewer than three stages.
double balancedMemoryLowerBound(const Strategy &s, int64_t layers, double keptBytes, double layerParameters);

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_SEARCHBOUNDS_H
