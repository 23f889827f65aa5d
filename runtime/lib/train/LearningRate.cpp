//===- LearningRate.cpp ---------------------------------------------------===//

#include "colossal/runtime/train/LearningRate.h"

#include <algorithm>
#include <cmath>

namespace colossal::rt {

const char *nameOf(Decay decay) {
  switch (decay) {
  case Decay::Constant:
    return "constant";
  case Decay::Cosine:
    return "cosine";
  case Decay::Linear:
    return "linear";
  case Decay::Polynomial:
    return "polynomial";
  }
  return "?";
}

std::optional<Decay> parseDecay(const std::string &name) {
  for (Decay d : {Decay::Constant, Decay::Cosine, Decay::Linear, Decay::Polynomial})
    if (name == nameOf(d))
      return d;
  return std::nullopt;
}

double LearningRateSchedule::at(int64_t step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return base * double(std::max<int64_t>(step, 0)) / double(warmupSteps);
  if (decay == Decay::Constant)
    return base;
  double span = double(std::max<int64_t>(1, totalSteps - warmupSteps));
  double p = std::clamp(double(step - warmupSteps) / span, 0.0, 1.0);
  double floor = minRatio * base, factor = 1.0;
  switch (decay) {
  case Decay::Cosine:
    factor = 0.5 * (1.0 + std::cos(M_PI * p));
    break;
  case Decay::Linear:
    factor = 1.0 - p;
    break;
  case Decay::Polynomial:
    factor = std::pow(1.0 - p, power);
    break;
  case Decay::Constant:
    break;
  }
  return floor + (base - floor) * factor;
}

} // namespace colossal::rt
