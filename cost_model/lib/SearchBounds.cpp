//===- SearchBounds.cpp ---------------------------------------------------===//

#include "SearchBounds.h"

#include <algorithm>
#include <cmath>

namespace colossal::cost {
namespace {

/// Sums of per-op times and bytes may round differently when grouped
/// otherwise: a bound gives up this much to stay below what it bounds.
constexpr double kRoundingSlack = 1 - 1e-9;

double leastOf(double known, double seen) { return known < 0 ? seen : std::min(known, seen); }

} // namespace

void MeasuredLayers::learn(const Estimate &e) {
  double other = 0, perLayer = -1;
  for (size_t st = 0; st < e.stageLayers.size(); ++st) {
    if (e.stageLayers[st] > 0)
      perLayer = leastOf(perLayer, e.stageLayerSeconds[st] / double(e.stageLayers[st]));
    other += e.stageOtherSeconds[st];
  }
  if (perLayer < 0)
    return; // no layers: nothing learned about them
  seconds = leastOf(seconds, perLayer);
  outside = leastOf(outside, other);
  keptBytes = leastOf(keptBytes, e.leastLayerActivations);
}

double MeasuredLayers::work(int64_t layers) const {
  return known() ? (double(layers) * seconds + outside) * kRoundingSlack : 0;
}

double MeasuredLayers::busiestRank(int64_t layers, int ranks) const {
  return known() ? double((layers + ranks - 1) / ranks) * seconds * kRoundingSlack : 0;
}

double pipelineLowerBound(const Strategy &s, double work, double busiestRankWork) {
  double m = s.microbatches, p = s.pp;
  if (s.schedule == Schedule::Interleaved && s.pp > 1)
    return std::max(m * busiestRankWork, std::max(m, p) * work / p);
  return std::max(m * busiestRankWork, work / (1 - std::pow(1 - 1 / m, p)));
}

double splitMemoryLowerBound(const Strategy &s, const std::vector<int64_t> &split, double keptBytes,
                             double layerParameters) {
  int chunks = s.schedule == Schedule::Interleaved ? s.virtualStages : 1;
  double share = s.tpMode == TensorMode::TwoPointFiveD ? double(s.tp) / s.tpDepth : double(s.tp);
  double most = 0;
  for (int r = 0; r < s.pp; ++r) {
    int64_t largest = 0, layers = 0;
    for (int c = 0; c < chunks; ++c) {
      int64_t n = split[size_t(c * s.pp + r)];
      largest = std::max(largest, n);
      layers += n;
    }
    ModelStateBytes states = zeroModelStates(double(layers) * layerParameters / share, s.dp, s.zero);
    double bytes = peakInFlight(s.pp > 1 ? s.schedule : Schedule::OneFOneB, r, s.pp, chunks, s.microbatches) *
                       double(largest) * keptBytes +
                   states.parameters + states.gradients + (s.offloadOptimizer ? 0 : states.optimizer);
    most = std::max(most, bytes);
  }
  return most * kRoundingSlack;
}

double balancedMemoryLowerBound(const Strategy &s, int64_t layers, double keptBytes, double layerParameters) {
  if (s.pp < 3)
    return 0;
  std::vector<int64_t> split(size_t(s.pp), 0);
  split[1] = layers / s.pp;
  return splitMemoryLowerBound(s, split, keptBytes, layerParameters);
}

} // namespace colossal::cost
