//===- StepRegions.h - the forward and backward halves of a step -*- C++ -*-===//
//
// @forward_backward computes the loss, then its gradients: the op computing
// the loss (the first result) divides the forward pass from the backward
// pass. The memory passes place reads and recomputation by that division.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_MEMORY_STEPREGIONS_H
#define COLOSSAL_PASSES_MEMORY_STEPREGIONS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"

namespace colossal::memory {

/// The op of `body` computing the loss (the first result), or null when the
/// loss is an argument.
inline mlir::Operation *lossOpOf(mlir::Block &body) { return body.getTerminator()->getOperand(0).getDefiningOp(); }

/// Whether `user` (or the op of `body` holding it) runs after the loss.
inline bool inBackward(mlir::Block &body, mlir::Operation *loss, mlir::Operation *user) {
  mlir::Operation *top = body.findAncestorOpInBlock(*user);
  return top && top != loss && loss->isBeforeInBlock(top);
}

} // namespace colossal::memory

#endif // COLOSSAL_PASSES_MEMORY_STEPREGIONS_H
