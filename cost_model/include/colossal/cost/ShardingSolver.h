//===- ShardingSolver.h - the best per-op sharding over mesh axes -*- C++ -*-===//
//
// Chooses, for every op of a graph, which of its factors each of one or
// more mesh axes splits (or none), so that the sum over ops of forward and
// backward compute plus the resharding on every edge (activations forward,
// their gradients back where a gradient flows, parameter gradients to the
// parameter's storage layout) is least. That sum is what the estimator
// charges the ops of a plan with no pipeline, grid, ring or Megatron
// sequence algorithm (shardingSeconds; tests check the two agree on random
// graphs and GPT and BERT layers, over a tensor axis and over a tensor and
// an all-to-all sequence axis), so the choice is optimal under the cost
// model, not under a proxy, with one difference: where several ops read one
// value in one layout (LLaMA's gate and up projections) the estimator
// reshards it once and the solver charges each read (a bound 5% over the
// estimate on a LLaMA layer pair). Sharing exactly would keep every earlier
// reader in the frontier; on LLaMA's rotary tables, read by every layer,
// that frontier outgrows the solver's limit.
//
// Exact by dynamic programming over the ops in order: the state is the
// choice of every op that a later op's cost still depends on (the producers
// of what it reads, its parameters' owners), the "frontier". Since an op's
// cost depends only on its own choice and theirs, keeping the cheapest
// history per frontier state is exact. The frontier of a layered model is a
// few values wide (the residual stream, the branches of attention, tied
// weights), so the work is linear in the number of ops; a graph whose
// frontier would exceed `maxStates` states is refused rather than
// approximated.
//
// Candidate splits are the factors that are not "whole", divide evenly, and
// are the major factor of every dimension they index (a block split of each
// tensor, which a partitioner lays out without strides). Several axes are
// placed together, not one after the other: an op's choices are every
// combination of its axes' candidates (the axes taken in the order given,
// so a factor two axes split lists them in that order), and the frontier
// holds combinations, so the joint optimum is found, not the best second
// axis given the first one's best placement alone.
//
// Memory is not a constraint here: the search evaluates the result with the
// estimator and reports whether it fits.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_SHARDINGSOLVER_H
#define COLOSSAL_COST_SHARDINGSOLVER_H

#include "colossal/cost/Plan.h"

#include <functional>
#include <optional>
#include <string>

namespace colossal::cost {

struct ShardingSolution {
  /// `base` with the axes appended to each op's chosen factors.
  GraphSharding sharding;
  /// shardingSeconds of `sharding` for one microbatch.
  double seconds = 0;
  /// The most frontier states one step held (the solver's work per op).
  int64_t widestFrontier = 0;
  /// The ops whose choices were priced; the others took the tables of the
  /// op at their place in the previous, identical layer.
  int64_t opsPriced = 0;
  /// The layers whose choices were copied from the layer before, once the
  /// costs had settled to growing by a constant per layer.
  int64_t layersCopied = 0;
};

/// The factors of `op` that `axis` may split on top of `base`.
std::vector<int> splittableFactors(const Op &op, const OpSharding &base, const Mesh &mesh, int axis);

/// A mesh axis for the solver to place, and the factors it may split
/// besides splittableFactors' rules (unset: any of those), such as a
/// sequence axis kept to the tokens.
struct AxisToPlace {
  int axis = -1;
  std::function<bool(size_t op, int factor)> admits;
};

/// Every sharding of `op` the solver weighs: `base` with each of `axes`, in
/// order, unused or splitting one of its admitted splittable factors.
std::vector<OpSharding> candidateShardings(const Graph &graph, size_t op, const OpSharding &base, const Mesh &mesh,
                                           const std::vector<AxisToPlace> &axes);

/// The optimal joint placement of `axes` over the ops of `graph`, whose
/// ops must be in topological order. `base` gives the other axes' splits
/// (empty: none).
std::optional<ShardingSolution> solveSharding(const Graph &graph, const GraphSharding &base, const Mesh &mesh,
                                              const std::vector<AxisToPlace> &axes, const Cluster &cluster,
                                              std::string &error, int64_t maxStates = int64_t(1) << 22);

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
