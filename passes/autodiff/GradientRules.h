//===- GradientRules.h - one gradient rule per train op ---------*- C++ -*-===//

#ifndef COLOSSAL_PASSES_AUTODIFF_GRADIENTRULES_H
#define COLOSSAL_PASSES_AUTODIFF_GRADIENTRULES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace colossal::autodiff {

/// Given the gradients of `op`'s results (null where a result has none),
/// builds the gradients of its operands at the builder's insertion point
/// (null for an operand that gets none). Fails when `op` has no rule.
mlir::LogicalResult gradientOf(mlir::Operation *op, mlir::ArrayRef<mlir::Value> resultGrads,
                               llvm::SmallVectorImpl<mlir::Value> &operandGrads, mlir::OpBuilder &builder);

/// Zeros of `type` (a constant).
mlir::Value zerosLike(mlir::OpBuilder &builder, mlir::Location loc, mlir::Type type);

} // namespace colossal::autodiff

#endif // COLOSSAL_PASSES_AUTODIFF_GRADIENTRULES_H
