//===- AppliedSharding.h - the split a partitioner made, read back -*- C++ -*-===//
//
// The partitioner rewrites the model into each rank's program; the cost
// model predicts what a sharding of the whole model costs. To check one
// against the other, the sharding the partitioner applied is read back by
// comparing the two graphs op by op: a factor one rank's op iterates over
// a part of (its size, times the axis's ranks, covers the whole one's) is
// split over that axis. The estimator then derives the collectives from
// that sharding with its own resharding rules, independently of the
// collectives the partitioner inserted; the emitted programs check that the
// two agree byte for byte.
//
// A vocabulary the ranks do not divide is padded by the partitioner: a
// factor whose rank's share, times the ranks, exceeds the whole by less
// than one share is split too.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_APPLIEDSHARDING_H
#define COLOSSAL_COST_APPLIEDSHARDING_H

#include "colossal/cost/Graph.h"
#include "colossal/cost/Plan.h"

#include <optional>
#include <string>

namespace colossal::cost {

/// The sharding of `whole` that turns its ops into those of `perRank`, one
/// rank's graph of the same model under `ranks`-way splits over mesh axis
/// `axis`. Every op of `whole` must appear in `perRank` in the same order
/// (the partitioner's collectives are not ops of a cost graph; ops it adds
/// in between, such as a row-parallel layer's bias added after the sum,
/// are skipped); nullopt with `error` naming the first op without a
/// counterpart or a factor that is not a split over the ranks.
std::optional<GraphSharding> appliedAxisSharding(const Graph &whole, const Graph &perRank, int axis,
                                                 int64_t ranks, std::string &error);

/// One split of a chain the partitioner applies: the rank's graph after it,
/// and the mesh axis and ranks it splits over.
struct AppliedSplit {
  const Graph *perRank = nullptr;
  int axis = 0;
  int64_t ranks = 1;
};

/// The sharding of `whole` made by `splits` in order (the tensor axis's,
/// then the sequence axis's cut of what it made), each read back from the
/// graph before it as appliedAxisSharding does; a factor split by several
/// lists their axes in that order.
std::optional<GraphSharding> appliedSharding(const Graph &whole, const std::vector<AppliedSplit> &splits,
                                             std::string &error);

/// The partitioner's model axes read back: `tensorRanks` over mesh axis
/// "tp", then `sequenceRanks` over "sp" (either may be 1), from `whole`,
/// one rank's graph after both (`split`) and, when both split, after the
/// tensor split alone (`tensorSplit`; null is an error then).
std::optional<GraphSharding> appliedModelAxes(const Graph &whole, const Graph *tensorSplit, const Graph &split,
                                              const Mesh &mesh, int64_t tensorRanks, int64_t sequenceRanks,
                                              std::string &error);

} // namespace colossal::cost

#endif // COLOSSAL_COST_APPLIEDSHARDING_H
