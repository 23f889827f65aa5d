//===- KernelTime.h - how long one op's kernels take on one rank -*- C++ -*-===//
//
// An op's forward and backward kernels on its local shard. With measured
// kernel rates (KernelRates.h), a contraction is priced by its GEMM shapes
// (the forward's [m, k] x [k, n], the backward's two products), the fused
// attention by its own curve, and memory-bound ops by a call plus bytes
// over their kind's achieved rate; without them, by the roofline at the
// cluster's peaks and memory bandwidth. The estimator and the per-op
// sharding solver both call this, so the solver minimises what the
// estimator reports.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_KERNELTIME_H
#define COLOSSAL_COST_LIB_KERNELTIME_H

#include "colossal/cost/Cluster.h"
#include "colossal/cost/Graph.h"
#include "colossal/cost/Plan.h"

namespace colossal::cost {

struct KernelSeconds {
  double forward = 0, backward = 0;
};

/// `bytes`: the op's local inputs and outputs; `rowShare`: how many more
/// ways than its sharding says a tensor grid splits its rows; `ringRanks`:
/// the ranks of the ring an attention op runs on (0: none).
KernelSeconds kernelSeconds(const Graph &graph, const Op &op, const OpSharding &s, const Mesh &mesh,
                            const Cluster &cluster, double bytes, double rowShare, int ringRanks = 0);

/// The kind of memory-bound kernel an op runs (not for contractions).
KernelKind kernelKindOf(const Op &op);

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_KERNELTIME_H
