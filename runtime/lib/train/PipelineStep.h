//===- PipelineStep.h - one step of a pipeline rank ------------------*- C++ -*-===//
//
// A pipelined program (TrainingProgram::stages) runs on the pipeline axis:
// rank r holds the virtual stages r, r + ranks, ... and the parameters they
// read. The trainer trains the rank's part as a model of its own (its
// weights, gradients and optimizer state only); this file makes that part
// and runs one step of it: the rank's forward and backward calls in the
// schedule's order (PipelineSchedule.h), each call's received values from
// the stage that sent them, its saved ones from the stage's forward of the
// same microbatch, its results sent on without waiting for the receiver.
// Weights several ranks hold (a tied embedding and output layer) get the
// sum of the ranks' gradients.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LIB_TRAIN_PIPELINESTEP_H
#define COLOSSAL_RUNTIME_LIB_TRAIN_PIPELINESTEP_H

#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/comm/CommTimeline.h"
#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/train/OptimizerStep.h"
#include "colossal/runtime/train/PipelineSchedule.h"
#include "colossal/runtime/train/StepInterface.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace colossal::rt::trainer {

/// Rank `rank`'s part of a pipelined program.
struct PipelineRank {
  int rank = 0;
  PipelineShape shape;
  /// The program the rank trains: the parameters its stages read, in the
  /// program's order.
  TrainingProgram program;
  /// The whole program's parameters (what an export writes).
  std::vector<ProgramParameter> allParameters;
  /// Program index to the rank's (-1: another rank's), and the same among
  /// the trainable parameters.
  std::vector<int64_t> localParameter, localTrainable;
  /// Per trainable parameter of the rank: on how many pipeline ranks it is.
  std::vector<int> holders;
  /// The trainable parameters on several pipeline ranks, the same list on
  /// every rank: the rank's index (-1: not held here) and elements.
  struct Shared {
    int64_t local = -1;
    int64_t elements = 0;
  };
  std::vector<Shared> shared;
};

/// Fails naming the cause when the program's stages do not make a pipeline
/// of `ranks` ranks under its settings.
PipelineRank pipelineRankOf(const TrainingProgram &program, int rank, int ranks);

/// What a rank did in one step, in seconds from its start: each call and
/// each wait for a received value.
struct PipelineTimeline {
  struct Span {
    std::string name; // "F3" (forward of microbatch 3), "B3.1" (chunk 1), "wait"
    double start = 0, end = 0;
    bool compute = true;
  };
  std::vector<Span> spans;
  double seconds = 0;
  /// When the step began: the spans' and the collectives' times count from it.
  std::chrono::steady_clock::time_point origin;
  /// The share of the step the rank spent outside its calls (waiting for its
  /// peers: the bubble, and its transfers).
  double idleFraction() const;
  /// The spans as a Chrome trace (chrome://tracing, Perfetto) of `rank`,
  /// with the collectives `comm` kept (if any) as the communication streams.
  std::string chromeTrace(int rank, const CommTimeline *comm = nullptr) const;
};

/// Runs the rank's tasks of one step. `inputs(m)` gives microbatch m's
/// program inputs; `parameters` and `gradients` are the rank's (the rank's
/// indices); `block` is the data-parallel rank's first microbatch block
/// (StepRandomness). Before each backward call `beforeBackward` runs (the
/// trainer starts a microbatch's gradient intake). Returns the sum of the
/// losses this rank computed (the last stage's), each divided by the
/// microbatches.
float runPipelineStep(const PipelineRank &rank, Communicator &pp,
                      const std::function<std::vector<host::Tensor>(int64_t m)> &inputs, StepParameters &parameters,
                      GradientReady &gradients, StepCollectives &collectives, uint64_t seed, uint64_t step,
                      int64_t block, float lossScale, const std::function<void()> &beforeBackward,
                      PipelineTimeline *timeline = nullptr);

/// Sums the gradients of the weights several pipeline ranks hold over the
/// pipeline axis (ranks without one add zeros), so every copy takes the
/// same update.
void sumSharedGradients(const PipelineRank &rank, Communicator &pp, std::vector<Floats> &grads);

/// The global norm's sum of squared gradients from this rank's per-tensor
/// `squares` (as tensorSquares gives them, complete over the tensor axis): a
/// weight held by k ranks counted 1/k on each, summed over the pipeline axis.
double pipelineTotalSquares(const PipelineRank &rank, Communicator &pp, const std::vector<float> &squares);

/// The global gradient norm of a pipeline's replicated optimizer.
double pipelineGradientNorm(const PipelineRank &rank, Communicator &pp, const std::vector<OptimizerTensor> &tensors,
                            const CompleteSquares &complete);

} // namespace colossal::rt::trainer

#endif // COLOSSAL_RUNTIME_LIB_TRAIN_PIPELINESTEP_H
