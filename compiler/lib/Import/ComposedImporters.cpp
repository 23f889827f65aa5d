//===- ComposedImporters.cpp - ONNX ops spelled with other train ops -----===//
//
// ONNX ops the train dialect has no op of its own for, built from ops it has:
// LessOrEqual and GreaterOrEqual as the strict comparison or equality, Tile
// as a broadcast between two reshapes. Hugging Face's T5 decoder makes its causal
// mask with both (positions repeated over the batch, compared with <=).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "colossal/Dialect/Train/TrainDialect.h"

using namespace mlir;

namespace colossal::import {

LogicalResult importComparisonOrEqual(NodeContext &ctx, bool less) {
  const HostTensor *lhs = ctx.constantInput(0), *rhs = ctx.constantInput(1);
  std::optional<std::vector<int64_t>> shape = lhs && rhs ? broadcastShape(lhs->shape, rhs->shape) : std::nullopt;
  if (lhs && rhs && shape && numElementsOf(*shape) <= kMaxFoldedElements) {
    Folded<HostTensor> strict = foldBinary(less ? BinaryFn::Less : BinaryFn::Greater, *lhs, *rhs);
    Folded<HostTensor> equal = foldBinary(BinaryFn::Equal, *lhs, *rhs);
    if (!strict.value || !equal.value)
      return ctx.fail(strict.value ? equal.error : strict.error);
    Folded<HostTensor> either = foldBinary(BinaryFn::Or, *strict.value, *equal.value);
    if (!either.value)
      return ctx.fail(either.error);
    ctx.setOutputConstant(0, std::move(*either.value));
    return success();
  }
  // a <= b as where(a < b, true, a == b): exact for NaN too (false), which
  // not(a > b) is not.
  Operation *strict = ctx.create(less ? train::LessOp::getOperationName() : train::GreaterOp::getOperationName(),
                                 {ctx.input(0), ctx.input(1)});
  Operation *equal = strict ? ctx.create(train::EqualOp::getOperationName(), {ctx.input(0), ctx.input(1)}) : nullptr;
  if (!equal)
    return failure();
  auto boolean = RankedTensorType::get({}, ctx.builder().getI1Type());
  Value yes = train::ConstantOp::create(ctx.builder(), ctx.loc, DenseElementsAttr::get(boolean, true));
  Operation *either = ctx.create(train::WhereOp::getOperationName(), {strict->getResult(0), yes, equal->getResult(0)});
  if (!either)
    return failure();
  ctx.setOutput(0, either->getResult(0));
  return success();
}

LogicalResult importTile(NodeContext &ctx) {
  const HostTensor *repeatsInput = ctx.requireConstant(1, "repeats");
  if (!repeatsInput)
    return failure();
  std::vector<int64_t> shape;
  if (const HostTensor *c = ctx.constantInput(0))
    shape = c->shape;
  else if (RankedTensorType type = ctx.inputType(0))
    shape.assign(type.getShape().begin(), type.getShape().end());
  else
    return failure();
  if (repeatsInput->numElements() != int64_t(shape.size()))
    return ctx.fail("repeats has " + std::to_string(repeatsInput->numElements()) + " entries for an input of rank " +
                    std::to_string(shape.size()));
  // [d0, d1, ...] -> [1, d0, 1, d1, ...] -> [r0, d0, r1, d1, ...] -> [r0 d0, r1 d1, ...]
  std::vector<int64_t> spaced, wide, out;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t r = repeatsInput->asInt(int64_t(d));
    if (r < 0)
      return ctx.fail("repeats[" + std::to_string(d) + "] is negative");
    spaced.insert(spaced.end(), {1, shape[d]});
    wide.insert(wide.end(), {r, shape[d]});
    out.push_back(saturatingMul(r, shape[d]));
  }
  if (numElementsOf(wide) > kMaxTensorElements)
    return ctx.fail("tiling makes " + std::to_string(numElementsOf(wide)) + " elements, more than a tensor may hold");
  if (const HostTensor *c = ctx.constantInput(0); c && numElementsOf(out) <= kMaxFoldedElements) {
    ctx.setOutputConstant(0, foldReshape(foldBroadcast(foldReshape(*c, spaced), wide), out));
    return success();
  }
  Type element = ctx.inputType(0).getElementType();
  Operation *step =
      ctx.createTyped(train::ReshapeOp::getOperationName(), ctx.input(0), RankedTensorType::get(spaced, element));
  if (step)
    step = ctx.createTyped(train::BroadcastOp::getOperationName(), step->getResult(0),
                           RankedTensorType::get(wide, element));
  if (step)
    step =
        ctx.createTyped(train::ReshapeOp::getOperationName(), step->getResult(0), RankedTensorType::get(out, element));
  if (!step)
    return failure();
  ctx.setOutput(0, step->getResult(0));
  return success();
}

} // namespace colossal::import
