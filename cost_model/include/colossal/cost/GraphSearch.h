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
// stages hold equal numbers of them.
//
// The model axis may also be a tensor grid (2D, 2.5D with any depth, 3D:
// Colossal-AI's N-dimensional modes) where the caller gives the
// partitioner's split for it: a grid's blocks span several mesh axes, so
// they do not read back as one factor split; the partitioner's success is
// the proof that the program can be built, and the estimator prices the
// grid by its algorithms (TensorGrid.h), as the transformer search does.
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
/// `tensor` > 1; or the `tensor` ranks as a grid (`grid` other than OneD,
/// 2.5D's layers `depth`), alone on the model axes.
struct ModelAxis {
  int tensor = 1;
  int sequence = 1;
  SequenceMode mode = SequenceMode::None;
  TensorMode grid = TensorMode::OneD;
  int depth = 1;

  /// The ranks of one model-parallel group: tensor x sequence.
  int ranks() const { return tensor * sequence; }
  bool ownSequenceAxis() const { return mode == SequenceMode::AllToAll || mode == SequenceMode::Ring; }
  bool onGrid() const { return grid != TensorMode::OneD; }
  /// The strategy's model-axis part ("tp=2,sp=2,sp_mode=ring",
  /// "tp=8,tp_mode=2.5d,tp_depth=2").
  std::string str() const;
  /// Sets `strategy`'s tp, tp_mode, tp_depth, sp and sp_mode to this axis's.
  void applyTo(Strategy &strategy) const;
  bool operator<(const ModelAxis &other) const {
    return std::tie(tensor, sequence, mode, grid, depth) <
           std::tie(other.tensor, other.sequence, other.mode, other.grid, other.depth);
  }
  bool operator==(const ModelAxis &other) const { return !(*this < other) && !(other < *this); }
};

/// The model axes of `ranks` ranks in a node: the tensor axis alone and with
/// Megatron's sequence parallelism, every split into tensor x sequence
/// ranks (sequence > 1) for each of all-to-all and ring, and the grids the
/// ranks make: a q x q square (2D), d layers of one (2.5D, d >= 2) and a
/// q x q x q cube (3D), q >= 2.
std::vector<ModelAxis> modelAxesOf(int ranks);

/// How the partitioner splits a graph over a model axis, read back as a
/// sharding of the whole graph (AppliedSharding.h), or why it cannot. On a
/// grid the sharding only records that the partitioner built the split
/// (every op replicated): the estimator prices the grid itself.
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

/// How a plan with `placement` is evaluated: the partitioner's split of
/// the model axes (1D tensor, sequence or both; tp x sp ranks) as
/// it is built (its grouped and padded layouts, and recomputation that
/// keeps the collectives' results); anything else, grids included, as the
/// estimator's defaults; every plan overlaps the data axis as `target`'s
/// trainer does.
EstimateOptions evaluationOf(const Strategy &strategy, Placement placement, ProgramTarget target = ProgramTarget::Host);

SearchResult searchGraphPlans(const GraphAtMicrobatch &graphAt, const Cluster &cluster,
                              const SearchOptions &options);

} // namespace colossal::cost

#endif // COLOSSAL_COST_GRAPHSEARCH_H
