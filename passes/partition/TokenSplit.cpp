//===- TokenSplit.cpp -----------------------------------------------------===//

#include "passes/partition/TokenSplit.h"

#include "passes/partition/ParameterSlices.h"

#include "colossal/Dialect/Dist/DistDialect.h"
#include "colossal/Dialect/Train/TrainDialect.h"

namespace colossal::partition {

using namespace mlir;
using namespace colossal::train;

bool isPerToken(Operation *op, int64_t dim) {
  if (isSliceWise(op) ||
      isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, SqrtOp, ReciprocalOp, LogOp, CastOp, SinOp, CosOp,
          WhereOp, EqualOp, LessOp, GreaterOp, DropoutOp>(op))
    return true;
  int64_t rank = op->getNumResults() ? cast<ShapedType>(op->getResult(0).getType()).getRank() : 0;
  auto other = [&](int64_t axis) { return (axis < 0 ? axis + rank : axis) != dim; };
  auto after = [&](int64_t axis) { return (axis < 0 ? axis + rank : axis) > dim; };
  if (auto norm = dyn_cast<LayerNormOp>(op))
    return after(int64_t(norm.getAxis()));
  if (auto norm = dyn_cast<RmsNormOp>(op))
    return after(int64_t(norm.getAxis()));
  if (auto softmax = dyn_cast<SoftmaxOp>(op))
    return other(int64_t(softmax.getAxis()));
  if (auto softmax = dyn_cast<LogSoftmaxOp>(op))
    return other(int64_t(softmax.getAxis()));
  if (auto linear = dyn_cast<LinearOp>(op))
    return dim < rank - 1;
  if (auto split = dyn_cast<SplitOp>(op))
    return other(int64_t(split.getAxis()));
  if (auto concat = dyn_cast<ConcatOp>(op))
    return other(int64_t(concat.getAxis()));
  if (auto reshard = dyn_cast<dist::ReshardOp>(op)) {
    // Another axis's resharding (a tensor split's copies and sums) that
    // keeps the tokens' dimension whole on both sides.
    dist::Layout from = reshard.getFromLayout(), to = reshard.getToLayout();
    return size_t(dim) < from.dims.size() && from.dims[size_t(dim)].empty() && to.dims[size_t(dim)].empty();
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    // Whole along the tokens.
    auto input = cast<ShapedType>(slice.getInput().getType());
    return slice.getStarts()[size_t(dim)] == 0 && slice.getSteps()[size_t(dim)] == 1 &&
           slice.getLimits()[size_t(dim)] >= input.getDimSize(dim);
  }
  return false;
}

void narrowToTokens(Operation *op, int64_t dim, int64_t tokens) {
  auto slice = dyn_cast<SliceOp>(op);
  if (!slice)
    return;
  SmallVector<int64_t> limits(slice.getLimits());
  limits[size_t(dim)] = tokens;
  slice.setLimits(limits);
}

} // namespace colossal::partition
