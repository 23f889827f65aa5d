//===- ShardingSolver.h - the best per-op sharding over one mesh axis -*- C++ -*-===//
//
// Chooses, for every op of a graph, which of its factors one mesh axis
// splits (or none), so that the sum over ops of forward and backward
// compute plus the resharding on every edge (activations forward, their
// gradients back, parameter gradients to the parameter's storage layout) is
// least. That sum is exactly what the estimator charges the ops of a plan
// with no pipeline, grid or sequence algorithm (shardingSeconds; a test
// checks the two agree), so the choice is optimal under the cost model, not
// under a proxy.
//
// Exact by dynamic programming over the ops in order: the state is the
// choice of every op whose result (or whose parameter layout) a later op
// still reads, the "frontier". An op's cost depends only on its own choice
// and its producers', so keeping the cheapest history per frontier state is
// exact. The frontier of a layered model is a few values wide (the residual
// stream, the branches of attention, tied weights), so the work is linear
// in the number of ops; a graph whose frontier would exceed `maxStates`
// states is refused rather than approximated.
//
// Candidate splits are the factors that are not "whole", divide evenly, and
// are the major factor of every dimension they index (a block split of each
// tensor, which a partitioner lays out without strides).
//
// Memory is not a constraint here: the search evaluates the result with the
// estimator and reports whether it fits.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_SHARDINGSOLVER_H
#define COLOSSAL_COST_SHARDINGSOLVER_H

#include "colossal/cost/Plan.h"

#include <optional>
#include <string>

namespace colossal::cost {

struct ShardingSolution {
  /// `base` with the axis appended to each op's chosen factor.
  GraphSharding sharding;
  /// shardingSeconds of `sharding` for one microbatch.
  double seconds = 0;
  /// The most frontier states one step held (the solver's work per op).
  int64_t widestFrontier = 0;
};

/// The factors of `op` that `axis` may split on top of `base`.
std::vector<int> splittableFactors(const Op &op, const OpSharding &base, const Mesh &mesh, int axis);

/// The optimal placement of mesh axis `axis` over the ops of `graph`,
/// whose ops must be in topological order. `base` gives the other axes'
/// splits (empty: none).
std::optional<ShardingSolution> solveAxisSharding(const Graph &graph, const GraphSharding &base,
                                                  const Mesh &mesh, int axis,
                                                  const Cluster &cluster, std::string &error,
                                                  int64_t maxStates = int64_t(1) << 22);

/// Seconds of compute and resharding of one microbatch's forward and
/// backward pass under `sharding`: the solver's objective.
double shardingSeconds(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                       const Cluster &cluster);

} // namespace colossal::cost

#endif // COLOSSAL_COST_SHARDINGSOLVER_H
