//===- StageBalance.h - how many layers each pipeline stage holds ---*- C++ -*-===//
//
// Alpa's inter-operator pass splits a chain of layers into pipeline stages
// so that the slowest stage is as fast as possible (it sets the pace of every
// microbatch after the first). With identical layers the chain is described
// by one number per layer (its time) and one per stage (what else it runs:
// the embedding on the first, the head and loss on the last), so the
// dynamic program over layer boundaries collapses to this: find the
// smallest T such that every stage s can hold n_s >= 1 layers with
// extra_s + n_s t <= T and the n_s add up to the layer count. Feasibility is
// monotone in T, so a bisection over T finds the optimum exactly; a test
// compares it with enumeration of every split on small cases. Its cost does
// not depend on the number of layers.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_STAGEBALANCE_H
#define COLOSSAL_COST_STAGEBALANCE_H

#include <cstdint>
#include <vector>

namespace colossal::cost {

/// Layers per stage (each at least 1, summing to `layers`; requires layers
/// >= stages) minimising max_s extraSeconds[s] + n_s * layerSeconds; among
/// optimal splits, excess layers are taken from the slowest stages first.
std::vector<int64_t> balanceStages(int64_t layers, const std::vector<double> &extraSeconds, double layerSeconds);

/// The slowest stage's time under a split.
double slowestStage(const std::vector<int64_t> &split, const std::vector<double> &extraSeconds,
                    double layerSeconds);

} // namespace colossal::cost

#endif // COLOSSAL_COST_STAGEBALANCE_H
