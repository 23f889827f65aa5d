//===- ReportedGradients.cpp ------------------------------------------------===//

#include "ReportedGradients.h"

#include "colossal/runtime/Error.h"

#include <algorithm>

namespace colossal::rt::trainer {

void addMicrobatchGradient(const TrainingProgram &program, const State &s, size_t t, Floats &sum,
                           const Tensor &gradient, int64_t microbatches) {
  if (gradient.integer || gradient.floats.size() != sum.size())
    fail(program.model, "the gradient of '" + program.parameters[s.trainable[t]].name + "' has " +
                            std::to_string(gradient.floats.size()) + " elements");
  if (microbatches == 1)
    std::copy(gradient.floats.begin(), gradient.floats.end(), sum.begin());
  else
    for (size_t k = 0; k < sum.size(); ++k)
      sum[k] += gradient.floats[k] / float(microbatches);
}

ReportedGradients::ReportedGradients(const TrainingProgram &program, State &state, OverlappedGradientAverage &average,
                                     int64_t microbatches)
    : program_(program), state_(state), average_(average), microbatches_(microbatches),
      taken_(state.grads.size(), false) {}

void ReportedGradients::beginMicrobatch(bool overlap, bool stage) {
  overlap_ = overlap, stage_ = stage;
  std::fill(taken_.begin(), taken_.end(), false);
}

bool ReportedGradients::taken(size_t t) const {
  return taken_[t];
}

void ReportedGradients::operator()(size_t t, const Tensor &gradient) {
  if (t >= taken_.size() || taken_[t])
    fail(program_.model, "the step reported gradient " + std::to_string(t) + " of " + std::to_string(taken_.size()) +
                             (t < taken_.size() ? " twice" : ""));
  take(t, gradient);
  taken_[t] = true;
}

void ReportedGradients::take(size_t t, const Tensor &gradient) {
  if (stage_) {
    if (gradient.integer)
      fail(program_.model, "the gradient of '" + program_.parameters[state_.trainable[t]].name + "' is integer");
    state_.sharded->stageGradient(t, gradient.floats.data(), int64_t(gradient.floats.size()),
                                  1.0f / float(microbatches_));
    return;
  }
  addMicrobatchGradient(program_, state_, t, state_.grads[t], gradient, microbatches_);
  if (overlap_)
    average_.add(t);
}

} // namespace colossal::rt::trainer
