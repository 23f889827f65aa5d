//===- StageBalance.cpp ---------------------------------------------------===//

#include "colossal/cost/StageBalance.h"

#include <algorithm>
#include <cmath>

namespace colossal::cost {

double slowestStage(const std::vector<int64_t> &split, const std::vector<double> &extraSeconds,
                    double layerSeconds) {
  double slowest = 0;
  for (size_t s = 0; s < split.size(); ++s)
    slowest = std::max(slowest, extraSeconds[s] + double(split[s]) * layerSeconds);
  return slowest;
}

std::vector<int64_t> balanceStages(int64_t layers, const std::vector<double> &extraSeconds, double layerSeconds) {
  const int64_t stages = int64_t(extraSeconds.size());
  if (stages == 0)
    return {};
  if (layers < stages || !(layerSeconds > 0)) {
    // Nothing to balance: an equal split, the remainder on the first stages.
    std::vector<int64_t> split(size_t(stages), layers / std::max<int64_t>(1, stages));
    for (int64_t s = 0; s < layers - split[0] * stages; ++s)
      ++split[size_t(s)];
    return split;
  }
  // How many layers each stage can hold within T.
  auto capacity = [&](double T, std::vector<int64_t> &caps) {
    int64_t total = 0;
    for (int64_t s = 0; s < stages; ++s) {
      double room = (T - extraSeconds[size_t(s)]) / layerSeconds;
      int64_t cap = room >= double(layers) ? layers : int64_t(std::floor(room + 1e-9));
      if (cap < 1)
        return false;
      caps[size_t(s)] = cap;
      total += cap;
    }
    return total >= layers;
  };
  double extraMax = *std::max_element(extraSeconds.begin(), extraSeconds.end());
  double low = 0, high = extraMax + double(layers) * layerSeconds;
  std::vector<int64_t> caps(static_cast<size_t>(stages));
  for (int i = 0; i < 200 && high - low > 1e-12 * std::max(1.0, high); ++i) {
    double mid = 0.5 * (low + high);
    if (capacity(mid, caps))
      high = mid;
    else
      low = mid;
  }
  capacity(high, caps);
  // Give back the excess from the slowest stages.
  int64_t excess = -layers;
  for (int64_t c : caps)
    excess += c;
  while (excess > 0) {
    int64_t slowest = -1;
    for (int64_t s = 0; s < stages; ++s)
      if (caps[size_t(s)] > 1 &&
          (slowest < 0 || extraSeconds[size_t(s)] + double(caps[size_t(s)]) * layerSeconds >
                              extraSeconds[size_t(slowest)] + double(caps[size_t(slowest)]) * layerSeconds))
        slowest = s;
    --caps[size_t(slowest)];
    --excess;
  }
  return caps;
}

} // namespace colossal::cost
