//===- EstimateContext.h - what every part of an estimate reads ----*- C++
//-*-===//
//
// `estimate` (Estimator.cpp) evaluates one plan in parts, each its own file:
// the op costs (OpCost.cpp), the activation memory (ActivationMemory.cpp),
// the model states with data parallelism, ZeRO and offload
// (ModelStates.cpp), and the step assembled over the pipeline
// (Estimator.cpp). What they all read is computed once, here.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_ESTIMATECONTEXT_H
#define COLOSSAL_COST_LIB_ESTIMATECONTEXT_H

#include "ShardedCosts.h"
#include "colossal/cost/Estimator.h"

#include <vector>

namespace colossal::cost {

struct EstimateContext {
  const Graph &graph;
  const Strategy &strategy;
  const Cluster &cluster;
  const Mesh &mesh;
  const GraphSharding &sharding;
  const EstimateOptions &options;
  /// 2D/2.5D/3D tensor parallelism: every op's work and tensors are split
  /// over the whole grid (`gridShare` ways), weights over the q x q planes
  /// (`weightShare` ways).
  bool grid = false;
  int gridQ = 0, gridDepth = 0;
  double gridShare = 1.0, weightShare = 1.0;
  /// Pipeline ranks, chunks per rank, virtual stages, microbatches.
  int ranks = 1, chunks = 1, stages = 1, m = 1;
  /// Real layers per virtual stage.
  std::vector<int64_t> split;
  /// The virtual stage of every op.
  std::vector<int> opStage;
  /// Per value: made again by every stage that reads it, neither kept nor
  /// sent (StageRemade.h; none without a pipeline).
  std::vector<char> stageRemade;
  /// The first and last ops inside a layer (-1 and 0 without layers), and
  /// the first op after the layers (0 without layers).
  int firstLayerOp = -1;
  size_t lastLayerOp = 0, tailStart = 0;
  /// Mesh axis indices (-1 if absent).
  int pp = -1, dp = -1, sp = -1;

  /// This context for `s` and `o`, which differ from it in ZeRO and offload
  /// alone (EstimateReuse). A field added above is copied here too.
  EstimateContext withStrategy(const Strategy &s, const EstimateOptions &o) const {
    EstimateContext c{graph, s, cluster, mesh, sharding, o};
    c.grid = grid, c.gridQ = gridQ, c.gridDepth = gridDepth, c.gridShare = gridShare, c.weightShare = weightShare;
    c.ranks = ranks, c.chunks = chunks, c.stages = stages, c.m = m;
    c.split = split, c.opStage = opStage, c.stageRemade = stageRemade;
    c.firstLayerOp = firstLayerOp, c.lastLayerOp = lastLayerOp, c.tailStart = tailStart;
    c.pp = pp, c.dp = dp, c.sp = sp;
    return c;
  }

  /// How many copies of op `o` the graph stands for.
  double repeatOf(size_t o) const { return double(graph.repeatOf(graph.ops[o].layer)); }
};

/// Adds `times` occurrences of `e` to the per-collective, per-axis totals.
inline void addComm(std::vector<CommTotal> &totals, const Mesh &mesh, const CommEvent &e, double times) {
  for (CommTotal &t : totals)
    if (t.collective == e.collective && t.axis == mesh.axes[e.axis].name) {
      t.bytes += e.bytes * times;
      t.seconds += e.seconds * times;
      t.calls += int(times);
      return;
    }
  totals.push_back({e.collective, mesh.axes[e.axis].name, e.bytes * times, e.seconds * times, int(times)});
}

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_ESTIMATECONTEXT_H
