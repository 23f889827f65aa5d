//===- PatternUtils.h - matching helpers for the raising passes --*- C++ -*-===//

#ifndef COLOSSAL_PASSES_RAISE_PATTERNUTILS_H
#define COLOSSAL_PASSES_RAISE_PATTERNUTILS_H

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <utility>

namespace colossal::train {

/// The value of a constant whose elements are all equal, looking through
/// reshapes and broadcasts; nullopt otherwise.
std::optional<double> splatValue(mlir::Value value);

/// True when `value` is a splat constant within `relTol` of `expected`.
bool isSplatNear(mlir::Value value, double expected, double relTol = 1e-4);

/// True for a splat constant at most -1e4: a mask's "minus infinity".
bool isLargeNegative(mlir::Value value);

/// For a binary op, returns (the operand matching `pred`, the other one),
/// trying both orders when the op is commutative.
template <typename Pred>
std::optional<std::pair<mlir::Value, mlir::Value>> matchOperands(mlir::Operation *op, Pred pred) {
  if (!op || op->getNumOperands() != 2)
    return std::nullopt;
  mlir::Value a = op->getOperand(0), b = op->getOperand(1);
  if (pred(a))
    return std::make_pair(a, b);
  if (op->hasTrait<mlir::OpTrait::IsCommutative>() && pred(b))
    return std::make_pair(b, a);
  return std::nullopt;
}

/// The op of type OpT defining `value`, if any.
template <typename OpT> OpT defining(mlir::Value value) {
  return value ? value.getDefiningOp<OpT>() : OpT();
}

/// True when `axes` (normalised against `rank`) are exactly [first, rank).
bool isTrailingAxes(llvm::ArrayRef<int64_t> axes, int64_t rank, int64_t &first);

/// True when the value comes from a parameter, possibly transposed.
bool isParameterDerived(mlir::Value value);

/// Applies `patterns` greedily to the function; used by every raising pass.
mlir::LogicalResult applyRaisingPatterns(mlir::Operation *function,
                                         mlir::RewritePatternSet &&patterns);

} // namespace colossal::train

#endif // COLOSSAL_PASSES_RAISE_PATTERNUTILS_H
