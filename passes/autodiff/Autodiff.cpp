//===- Autodiff.cpp - reverse-mode differentiation of @forward ------------===//

#include "Autodiff.h"
#include "passes/autodiff/Passes.h"

#include "GradientRules.h"
#include "colossal/Dialect/Dist/Stages.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>

namespace colossal::autodiff {

#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/autodiff/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

std::optional<int64_t> stageOfValue(Value v) {
  Operation *def = v.getDefiningOp();
  return def ? dist::stageOf(def) : std::nullopt;
}

} // namespace

FailureOr<func::FuncOp> buildForwardBackward(ModuleOp module, bool lossScaleArgument) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError("autodiff: the module has no @forward function"), failure();
  if (module.lookupSymbol("forward_backward"))
    return module.emitError("autodiff: @forward_backward already exists"), failure();
  if (forward.getNumResults() < 1)
    return forward.emitError("autodiff: @forward returns nothing to differentiate"), failure();
  auto lossType = dyn_cast<RankedTensorType>(forward.getResultTypes()[0]);
  if (!lossType || lossType.getRank() != 0 || !isa<FloatType>(lossType.getElementType()))
    return forward.emitError("autodiff: the first result of @forward must be a floating-point scalar loss, not ")
               << forward.getResultTypes()[0],
           failure();

  SmallVector<ParameterOp> trainable;
  for (ParameterOp p : module.getOps<ParameterOp>())
    if (p.getTrainable())
      trainable.push_back(p);
  if (trainable.empty())
    return module.emitError("autodiff: no trainable parameter (mark some with --trainable, or unfreeze them)"),
           failure();

  OpBuilder builder(module.getContext());
  builder.setInsertionPointAfter(forward);
  auto function = cast<func::FuncOp>(builder.clone(*forward));
  function.setSymName("forward_backward");
  Block &body = function.getBody().front();
  Operation *terminator = body.getTerminator();
  Value loss = terminator->getOperand(0);

  // Active values: floating-point values that depend on a trainable parameter.
  llvm::DenseSet<StringRef> trainableNames;
  for (ParameterOp p : trainable)
    trainableNames.insert(p.getSymName());
  llvm::DenseSet<Value> active;
  for (Operation &op : body.without_terminator()) {
    bool depends = false;
    if (auto param = dyn_cast<ParamOp>(op))
      depends = trainableNames.contains(param.getName());
    for (Value operand : op.getOperands())
      depends |= active.contains(operand);
    if (depends)
      for (Value result : op.getResults())
        if (isFloatTensor(result))
          active.insert(result);
  }

  // Backward, in reverse order, accumulating gradients. On a pipelined
  // module each op's gradient ops run on its stage, and a value's gradient
  // is summed on the stage that made the value unless every part of it is
  // from one stage.
  llvm::DenseMap<Value, Value> grads;
  dist::StageMarker marker;
  builder.setListener(&marker);
  marker.setStage(stageOfValue(loss));
  builder.setInsertionPoint(terminator);
  Location loc = terminator->getLoc();
  auto scalar = RankedTensorType::get({}, lossType.getElementType());
  if (lossScaleArgument) {
    // The scale changes from step to step (dynamic loss scaling): an argument.
    auto f32 = RankedTensorType::get({}, builder.getF32Type());
    unsigned index = function.getNumArguments();
    if (failed(function.insertArgument(
            index, f32,
            builder.getDictionaryAttr(builder.getNamedAttr("train.name", builder.getStringAttr("loss_scale"))), loc)))
      return failure();
    Value scale = body.getArgument(index);
    if (scalar != f32)
      scale = CastOp::create(builder, loc, scalar, scale, TypeAttr::get(lossType.getElementType()));
    grads[loss] = scale;
  } else {
    grads[loss] = ConstantOp::create(
        builder, loc, cast<ElementsAttr>(DenseElementsAttr::get(scalar, builder.getFloatAttr(lossType.getElementType(), 1.0))));
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      Value g = grads.lookup(result);
      resultGrads.push_back(g);
      any |= bool(g);
    }
    if (!any)
      continue;
    builder.setInsertionPoint(terminator);
    SmallVector<Value> operandGrads;
    marker.setStage(dist::stageOf(op));
    if (failed(gradientOf(op, resultGrads, operandGrads, builder)))
      return failure();
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!g || !active.contains(operand))
        continue;
      Value &slot = grads[operand];
      if (slot) {
        std::optional<int64_t> stage = stageOfValue(slot);
        marker.setStage(stage == stageOfValue(g) ? stage : stageOfValue(operand));
      }
      slot = slot ? Value(AddOp::create(builder, loc, slot.getType(), slot, g)) : g;
    }
  }
  marker.setStage(std::nullopt);

  // One gradient per trainable parameter: the sum over its reads (tied
  // weights). On a pipeline, each stage sums its reads' parts, and the sum
  // of the stages' parts is marked: the stages holding the weight make it.
  SmallVector<Value> results{loss};
  SmallVector<Type> resultTypes{loss.getType()};
  for (ParameterOp p : trainable) {
    std::map<std::optional<int64_t>, Value> parts;
    for (Operation &op : body.without_terminator())
      if (auto read = dyn_cast<ParamOp>(op); read && read.getName() == p.getSymName())
        if (Value g = grads.lookup(read.getResult())) {
          Value &part = parts[dist::stageOf(read)];
          marker.setStage(dist::stageOf(read));
          part = part ? Value(AddOp::create(builder, loc, g.getType(), part, g)) : g;
        }
    marker.setStage(std::nullopt);
    Value total;
    for (auto &[stage, part] : parts) {
      if (!total) {
        total = part;
        continue;
      }
      auto sum = AddOp::create(builder, loc, part.getType(), total, part);
      sum->setAttr(dist::kStageSumAttrName, builder.getUnitAttr());
      total = sum;
    }
    if (!total)
      total = zerosLike(builder, loc, p.getType());
    results.push_back(total);
    resultTypes.push_back(total.getType());
  }
  builder.setListener(nullptr);
  func::ReturnOp::create(builder, loc, results);
  terminator->erase();
  // Rules build every operand's gradient; drop those nothing uses (inputs
  // and frozen weights).
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator())
    all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (isOpTriviallyDead(op))
      op->erase();
  function.setFunctionType(builder.getFunctionType(function.getArgumentTypes(), resultTypes));
  SmallVector<Attribute> resultAttrs{
      builder.getDictionaryAttr(builder.getNamedAttr("train.name", builder.getStringAttr("loss")))};
  for (ParameterOp p : trainable)
    resultAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("train.name", builder.getStringAttr("grad:" + p.getSymName().str()))));
  function.setAllResultAttrs(resultAttrs);
  return function;
}

namespace {

struct AutodiffPass : impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    if (failed(buildForwardBackward(getOperation(), lossScaleArgument)))
      signalPassFailure();
  }
};

} // namespace

} // namespace colossal::autodiff
