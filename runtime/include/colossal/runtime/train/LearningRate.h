//===- LearningRate.h - learning-rate schedules --------------------*- C++ -*-===//
//
// The learning rate at optimizer step t (1 for the first step) of T:
//
//   warm-up (t <= W):  base * t / W
//   then, with progress p = (t - W) / (T - W) clamped to [0, 1] and the
//   floor m = minRatio * base:
//     constant:    base
//     cosine:      m + (base - m) * (1 + cos(pi p)) / 2
//     linear:      m + (base - m) * (1 - p)
//     polynomial:  m + (base - m) * (1 - p)^power
//
// Linear warm-up followed by cosine decay is what large-batch LAMB and GPT
// training use; the emitted program evaluates the schedule on the host each
// step and passes the rate to the optimizer.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LEARNINGRATE_H
#define COLOSSAL_RUNTIME_LEARNINGRATE_H

#include <cstdint>
#include <optional>
#include <string>

namespace colossal::rt {

enum class Decay { Constant, Cosine, Linear, Polynomial };
const char *nameOf(Decay decay);
std::optional<Decay> parseDecay(const std::string &name);

struct LearningRateSchedule {
  double base = 1e-3;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 1;
  Decay decay = Decay::Constant;
  /// The rate decays to minRatio * base.
  double minRatio = 0.0;
  /// Exponent of the polynomial decay.
  double power = 1.0;

  double at(int64_t step) const;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_LEARNINGRATE_H
