//===- GraphSearch.h - finding the plan for an imported model -------*- C++ -*-===//
//
// The search for a graph that comes from a model file rather than from
// transformer hyper-parameters: every split of N devices into data x model
// axis x pipeline parallelism (the model axis inside a node). The model axis
// is a 1D tensor axis placed op by op by the sharding solver
// (ShardingSolver.h, exact under the cost model) or, where the caller gives
// it, as the partitioner splits the model (SearchOptions::
// partitionerSharding: the plans `-o DIR` builds), with or without
// Megatron's sequence parallelism on it; or a sequence axis of its own
// (all-to-all, ring), as the partitioner splits the tokens;
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

namespace colossal::cost {

/// The model's graph for `microbatch` samples per microbatch; nullopt with
/// `error` when it cannot be built at that size.
using GraphAtMicrobatch = std::function<std::optional<Graph>(int64_t microbatch, std::string &error)>;

SearchResult searchGraphPlans(const GraphAtMicrobatch &graphAt, const Cluster &cluster,
                              const SearchOptions &options);

} // namespace colossal::cost

#endif // COLOSSAL_COST_GRAPHSEARCH_H
