//===- Communication.h - collectives and resharding -----------------*- C++ -*-===//
//
// The alpha-beta model of nccl-tests (doc/PERFORMANCE.md): one collective of
// S bytes over n ranks at bus bandwidth B takes
//
//   alpha + (S / B) * factor(n)
//
// with factor 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter
// and all-to-all (S the full, gathered size), and 1 for broadcast and
// send/recv. B is the measured bus bandwidth of the link the group uses: a
// group inside a node runs on NVLink; a group with one rank per node on the
// network; a group spanning nodes with several ranks on each runs
// hierarchically (reduce-scatter inside the node, all-reduce across nodes on
// 1/k of the data, all-gather inside the node), as NCCL does.
//
// Resharding moves a tensor from the sharding its producer leaves to the one
// its consumer needs, by the steps of Resharding.h (reduce-scatters and
// all-reduces of pending partial sums, all-to-alls of splits that move,
// all-gathers of splits the consumer does not want, free local slices). The
// partitioner inserts exactly these collectives, so the bytes predicted here
// are the bytes the runtime counts (checked for every tensor-parallel
// program the tests build: AppliedSharding.h).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_COMMUNICATION_H
#define COLOSSAL_COST_COMMUNICATION_H

#include "colossal/cost/Cluster.h"
#include "colossal/cost/Plan.h"

#include <string>
#include <vector>

namespace colossal::cost {

enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };
const char *nameOf(Collective c);

/// nccl-tests' bus-bandwidth factor: busbw = algbw * factor(n).
double busFactor(Collective c, int n);

/// Seconds for one collective over a group of `n` ranks, `perNode` of them on
/// each node, moving `bytes` (the full size: the reduced or gathered tensor).
double collectiveTime(Collective c, double bytes, int n, int perNode, const Cluster &cluster);
double collectiveTime(Collective c, double bytes, const MeshAxis &axis, const Cluster &cluster);

/// One collective the plan implies: which, over which axis, on how many bytes
/// (full size, as above), and what it costs.
struct CommEvent {
  Collective collective;
  int axis;
  double bytes;
  double seconds;
};

/// How a tensor is laid out: for each dimension, the mesh axes splitting it
/// (major first); plus the axes over which it is a pending partial sum.
struct TensorSpec {
  std::vector<std::vector<int>> dims;
  std::vector<int> partial;
};

/// The collectives that turn `from` into `to` for a tensor of `fullBytes`
/// (its unsharded size), appended to `events`; returns the total seconds.
double reshard(const TensorSpec &from, const TensorSpec &to, double fullBytes, const Mesh &mesh,
               const Cluster &cluster, std::vector<CommEvent> &events);

} // namespace colossal::cost

#endif // COLOSSAL_COST_COMMUNICATION_H
