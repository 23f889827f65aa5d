//===- ReportedGradients.h - the gradients the step hands over -------*- C++ -*-===//
//
// Each trainable gradient the step reports as it is made is taken at once:
// added to the step's sum (microbatches averaged), or staged for ZeRO's
// reduce-scatter, its bucket's all-reduce started during the last
// microbatch.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LIB_TRAIN_REPORTEDGRADIENTS_H
#define COLOSSAL_RUNTIME_LIB_TRAIN_REPORTEDGRADIENTS_H

#include "ModelState.h"
#include "colossal/runtime/train/GradientBuckets.h"

#include <vector>

namespace colossal::rt::trainer {

using host::Shape;
using host::Tensor;

/// Adds one microbatch's gradient to the step's (a mean loss's microbatch
/// gradients average into the batch's). Every path adds them the same way,
/// so a gradient reported early sums bit for bit like one returned.
void addMicrobatchGradient(const TrainingProgram &program, const State &s, size_t t, Floats &sum,
                           const Tensor &gradient, int64_t microbatches);

/// The gradients the step reports while its backward pass runs. Each is
/// taken at once, so the step frees it (GradientReady's contract): added to
/// the step's sum or, under ZeRO-2/3, staged for the microbatch's
/// reduce-scatter. During the last microbatch of a data-parallel step each
/// bucket's all-reduce also starts as soon as the bucket is complete,
/// overlapping the rest of the backward pass.
class ReportedGradients : public GradientReady {
public:
  ReportedGradients(const TrainingProgram &program, State &state, OverlappedGradientAverage &average,
                    int64_t microbatches);

  /// Starts a microbatch: `overlap`, whether each complete bucket's average
  /// starts during the step; `stage`, whether gradients go to ZeRO's
  /// reduce-scatter rather than the step's sum.
  void beginMicrobatch(bool overlap, bool stage);
  bool taken(size_t t) const;

  void operator()(size_t t, const Tensor &gradient) override;

  /// Gradient `t` of this microbatch, reported or returned: the same sum
  /// either way, so a gradient reported early adds bit for bit like one
  /// returned.
  void take(size_t t, const Tensor &gradient);

private:
  const TrainingProgram &program_;
  State &state_;
  OverlappedGradientAverage &average_;
  int64_t microbatches_;
  bool overlap_ = false, stage_ = false;
  std::vector<bool> taken_;
};

} // namespace colossal::rt::trainer

#endif // COLOSSAL_RUNTIME_LIB_TRAIN_REPORTEDGRADIENTS_H
