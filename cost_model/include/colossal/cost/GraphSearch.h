//===- GraphSearch.h - finding the plan for an imported model -------*- C++ -*-===//
//
// The search for a graph that comes from a model file rather than from
// transformer hyper-parameters: every split of N devices into data x model
// axis x pipeline parallelism (the model axis inside a node). The model axis
// is a 1D tensor axis placed op by op by the sharding solver
// (ShardingSolver.h, exact under the cost model) or, where the caller gives
// it with the graph, as the partitioner splits the model (SearchGraph::
// partitionerSplits: the plans `-o DIR` builds), with or without
// Megatron's sequence parallelism on it; or a sequence axis of its own
// (all-to-all, ring), as the partitioner splits the tokens, alone or beside
// a tensor axis (tp x sp: the tensor split first, then the tokens of what
// it made);
// every power-of-two microbatch size up to 16 that divides
// the per-replica batch, the pipeline schedule (1F1B; interleaved with two
// chunks where the layers allow), recomputation, ZeRO stages and optimizer
// offload. Each candidate is evaluated by the estimator; the fastest that
// fits wins. ZeRO and offload only add to the step after the pipeline, so
// once one of a group's variants is evaluated, the others are skipped when
// its pipeline alone is no better than the k-th best plan kept (as
// Search.h does; `exhaustive` turns it off and a test checks both agree).
//
// Pipelines and recomputation need the graph's layers (LayerDetection.h);
// stages hold equal numbers of them. 2D/2.5D/3D grids are searched only on
// transformer shapes (Search.h): a fixed strategy asking for them is refused
// with that reason.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_GRAPHSEARCH_H
#define COLOSSAL_COST_GRAPHSEARCH_H

#include "colossal/cost/Search.h"

#include <functional>
#include <map>
#include <tuple>
#include <utility>

namespace colossal::cost {

/// The model axes the search places inside a node: a tensor axis of
/// `tensor` ranks and what runs on it (None: the tensor axis alone;
/// Megatron: with Megatron's sequence parallelism), or a sequence axis of
/// its own of `sequence` ranks (AllToAll, Ring), beside a tensor axis when
/// `tensor` > 1.
struct ModelAxis {
  int tensor = 1;
  int sequence = 1;
  SequenceMode mode = SequenceMode::None;

  /// The ranks of one model-parallel group: tensor x sequence.
  int ranks() const { return tensor * sequence; }
  bool ownSequenceAxis() const { return mode == SequenceMode::AllToAll || mode == SequenceMode::Ring; }
  /// The strategy's model-axis part ("tp=2,sp=2,sp_mode=ring").
  std::string str() const;
  /// Sets `strategy`'s tp, sp and sp_mode to this axis's.
  void applyTo(Strategy &strategy) const;
  bool operator<(const ModelAxis &other) const {
    return std::tie(tensor, sequence, mode) < std::tie(other.tensor, other.sequence, other.mode);
  }
  bool operator==(const ModelAxis &other) const {
    return tensor == other.tensor && sequence == other.sequence && mode == other.mode;
  }
};

/// The model axes of `ranks` ranks in a node: the tensor axis alone and with
/// Megatron's sequence parallelism, and every split into tensor x sequence
/// ranks (sequence > 1) for each of all-to-all and ring.
std::vector<ModelAxis> modelAxesOf(int ranks);

/// How the partitioner splits a graph over a model axis, read back as a
/// sharding of the whole graph (AppliedSharding.h), or why it cannot.
struct ModelAxisSplit {
  std::optional<GraphSharding> sharding;
  std::string error;
};

/// The model's graph at one microbatch size, as the caller imports it, and
/// the partitioner's splits of it where the caller makes them: data, so the
/// search knows nothing of the partitioner.
struct SearchGraph {
  Graph graph;
  /// Per model axis of `modelAxesToSplit`; empty: the tensor axis is placed
  /// by the sharding solver alone.
  std::map<ModelAxis, ModelAxisSplit> partitionerSplits;
};

/// The model's graph for `microbatch` samples per microbatch; nullopt with
/// `error` when it cannot be built at that size.
using GraphAtMicrobatch = std::function<std::optional<SearchGraph>(int64_t microbatch, std::string &error)>;

/// The model axes (of more than one rank) the search with `options` places
/// on `cluster` (the axis inside a node, as the fixed parts allow): what a
/// caller giving the partitioner's splits splits each graph over.
std::vector<ModelAxis> modelAxesToSplit(const SearchOptions &options, const Cluster &cluster);

/// Graphs at different microbatch sizes share their factor structure
/// (GraphScaling.h) except where a size-1 factor drops out: one split per
/// structure and model axis serves every graph of that structure.
std::vector<size_t> factorStructure(const Graph &graph);

SearchResult searchGraphPlans(const GraphAtMicrobatch &graphAt, const Cluster &cluster,
                              const SearchOptions &options);

} // namespace colossal::cost

#endif // COLOSSAL_COST_GRAPHSEARCH_H
