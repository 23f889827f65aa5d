//===- PatternUtils.cpp - matching helpers for the raising passes --------===//

#include "PatternUtils.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

using namespace mlir;

namespace colossal::train {

std::optional<double> splatValue(Value value) {
  while (value) {
    if (auto reshape = value.getDefiningOp<ReshapeOp>())
      value = reshape.getInput();
    else if (auto broadcast = value.getDefiningOp<BroadcastOp>())
      value = broadcast.getInput();
    else
      break;
  }
  DenseElementsAttr attr;
  if (!value || !matchPattern(value, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  if (llvm::isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (attr.getElementType().isInteger(1))
    return attr.getSplatValue<bool>() ? 1.0 : 0.0;
  return double(attr.getSplatValue<APInt>().getSExtValue());
}

bool isSplatNear(Value value, double expected, double relTol) {
  std::optional<double> v = splatValue(value);
  return v && std::fabs(*v - expected) <= relTol * std::max(1.0, std::fabs(expected));
}

bool isLargeNegative(Value value) {
  std::optional<double> v = splatValue(value);
  return v && *v <= -1e4;
}

bool isTrailingAxes(ArrayRef<int64_t> axes, int64_t rank, int64_t &first) {
  if (axes.empty())
    return false;
  SmallVector<int64_t> normalized;
  for (int64_t a : axes)
    normalized.push_back(normalizeAxis(a, rank));
  llvm::sort(normalized);
  first = normalized.front();
  for (auto [i, a] : llvm::enumerate(normalized))
    if (a != first + int64_t(i))
      return false;
  return normalized.back() == rank - 1;
}

bool isParameterDerived(Value value) {
  if (auto transpose = value.getDefiningOp<TransposeOp>())
    value = transpose.getInput();
  return value.getDefiningOp<ParamOp>() != nullptr;
}

LogicalResult applyRaisingPatterns(Operation *function, RewritePatternSet &&patterns) {
  return applyPatternsGreedily(function, std::move(patterns));
}

} // namespace colossal::train
