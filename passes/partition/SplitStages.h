//===- SplitStages.h - one forward and one backward function per stage -*- C++ -*-===//
//
// A pipeline rank runs, for each microbatch, its stage's forward when the
// previous stage's activations arrive and its backward when the next
// stage's gradients do, in the schedule's order (PipelineSchedule.h). So
// the differentiated step is cut by the ops' `dist.stage` into
// `@stage<s>_forward` and `@stage<s>_backward`; what crosses a cut becomes
// the functions' results and arguments, named so that the runtime pairs
// them:
//
//   send:<k> / recv:<k>   a value made on one stage and read on a later one
//                         (activations forward, their gradients backward);
//                         the result carries `dist.to`, the argument
//                         `dist.from`
//   save:<k>              what a stage's backward reads of its forward: a
//                         result of the forward, an argument of the backward
//                         (held per microbatch in flight)
//   loss, grad:<name>     the loss (the last stage's forward) and each
//                         backward's part of the weight gradients
//
// Program inputs (`train.name` as in @forward_backward) are arguments of
// every function that reads them; constants, parameter reads and what reads
// only them (a weight's views and casts) are made in each function that
// reads them, neither sent nor saved.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_SPLITSTAGES_H
#define COLOSSAL_PASSES_PARTITION_SPLITSTAGES_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace colossal::partition {

struct SplitSummary {
  int64_t stages = 0;
  /// Values sent between stages (each direction), and values saved for a
  /// stage's backward.
  int64_t sends = 0;
  int64_t saves = 0;
};

/// Names of the two functions of virtual stage `stage`.
std::string stageFunctionName(int64_t stage, bool backward);

/// Replaces @forward_backward by the stage functions. Fails with a
/// diagnostic naming the op when an op has no stage or reads a value a
/// stage cannot have (a later stage's forward, an earlier stage's
/// backward).
mlir::FailureOr<SplitSummary> splitStages(mlir::ModuleOp module, int64_t stages);

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_SPLITSTAGES_H
