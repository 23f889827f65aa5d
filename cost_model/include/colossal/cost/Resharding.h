//===- Resharding.h - the collectives between two layouts of a value -*- C++ -*-===//
//
// A value on a mesh is laid out by a TensorSpec (Communication.h): for each
// dimension the mesh axes splitting it, major first, and the axes over which
// it is a pending partial sum; any other axis holds it whole (replicated).
// The split of a dimension by axes [a, b] gives the rank with coordinates
// (i along a, j along b) block i * |b| + j of that dimension.
//
// Five single-axis steps move between layouts, each acting on the minor-most
// split of a dimension so that every rank's local block stays contiguous:
//
//   all-reduce     a partial sum over `axis` becomes whole
//   reduce-scatter a partial sum over `axis` becomes split along `dim`
//   all-gather     the minor-most split `axis` of `dim` is gathered
//   all-to-all     the minor-most split `axis` of `fromDim` moves to `dim`
//   slice          a whole `axis` splits `dim` (local, no communication)
//
// These are the partitioner's collectives (dist.all_reduce, ...,
// dist.rank_slice), one per step, and the cost model charges the same
// steps, so what the search predicts is what the program moves.
//
// The plan is the cheapest in bus bytes (each step's size times its
// nccl-tests bus factor), fewest steps among equals: a shortest-path search
// over the value's layouts, whose steps touch only the axes that split or
// sum the value at either end (an axis that holds it whole at both ends is
// another parallelism's, on links the plan does not price here). It slices
// early when that shrinks what the collectives move, reduces pending sums
// while the block is small, moves splits by all-to-all rather than gather
// and re-slice, and gathers last. The steps do not depend on the value's
// size, so each pair of layouts is searched once per thread. Checked against
// a separate shortest-path search and by running every plan on simulated
// ranks (test/unit/cost_model/ReshardingTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_RESHARDING_H
#define COLOSSAL_COST_RESHARDING_H

#include "colossal/cost/Communication.h"

#include <string>
#include <vector>

namespace colossal::cost {

enum class ReshardKind { AllReduce, ReduceScatter, AllGather, AllToAll, Slice };

/// One step of a resharding: which, over which mesh axis, on which
/// dimension (`fromDim` for an all-to-all's source), and the collective's
/// size in bytes as Communication.h counts it (the reduced or gathered
/// tensor; an all-to-all's local block; zero for a slice).
struct ReshardStep {
  ReshardKind kind;
  int axis;
  int dim = -1;
  int fromDim = -1;
  double bytes = 0;
};

struct ReshardPlan {
  std::vector<ReshardStep> steps;
  /// Why there is no plan (a value cannot become a pending sum it was not;
  /// an axis used twice in a layout); empty when there is one.
  std::string error;
};

/// The steps from `from` to `to` for a value of `fullBytes` (unsharded) on
/// a mesh whose axis `a` has `axisSizes[a]` ranks. Axes of one rank are
/// ignored. The order of the axes splitting a dimension is the layouts'.
/// With the value's `shape` (its whole dimensions), no step splits a
/// dimension further than its size divides: a sum over several axes of a
/// value whose dimensions are all small (a [1, 1, s, d] table's gradient)
/// is then reduced whole rather than scattered along a dimension of one.
ReshardPlan planResharding(const TensorSpec &from, const TensorSpec &to, const std::vector<int> &axisSizes,
                           double fullBytes, const std::vector<int64_t> *shape = nullptr);

/// `to` with each dimension's axes reordered to keep `from`'s nesting where
/// both split it: for a consumer that needs only which axes split each
/// dimension (the cost model's view), the layout it is cheapest to reach.
TensorSpec alignedTo(const TensorSpec &from, const TensorSpec &to);

/// A plan's bus bytes: each step's bytes times its bus factor.
double busBytes(const ReshardPlan &plan, const std::vector<int> &axisSizes);

/// The collective a step runs (slices run none: returns false).
bool collectiveOf(ReshardKind kind, Collective &out);

} // namespace colossal::cost

#endif // COLOSSAL_COST_RESHARDING_H
