//===- LowerResharding.h - dist.reshard to collectives -----------*- C++
//-*-===//
//
// `train-lower-resharding` replaces every `dist.reshard` (Resharding.h)
// with the single-axis collectives of the cost model's resharding plan
// (cost/Resharding.h): slices, all-reduces, reduce-scatters, all-gathers and
// all-to-alls, so the bytes the search priced are the bytes the program
// moves. Run after train-autodiff, which differentiates the reshardings.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_LOWERRESHARDING_H
#define COLOSSAL_PASSES_PARTITION_LOWERRESHARDING_H

#include "mlir/IR/BuiltinOps.h"

namespace colossal::partition {

/// Replaces every dist.reshard in `module` with its plan's collectives
/// (with `keepForward`, not @forward's: the model the cost model reads,
/// whose reshardings read alike stated or lowered, and where a pipeline
/// marks what it repeats op for op); fails naming the op when no plan
/// reaches its target layout.
mlir::LogicalResult lowerResharding(mlir::ModuleOp module, bool keepForward = false);

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_LOWERRESHARDING_H
