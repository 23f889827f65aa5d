//===- MixedPrecision.cpp - 16-bit compute over float32 master weights ----===//

#include "MixedPrecision.h"
#include "passes/autodiff/Passes.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace colossal::autodiff {

#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "passes/autodiff/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;

namespace {

enum class Policy { Low, Float32, Widest };

Policy policyOf(Operation *op) {
  if (isa<MatMulOp, GemmOp, LinearOp, ConvOp, EinsumOp, AttentionOp>(op))
    return Policy::Low;
  if (isa<SoftmaxOp, LogSoftmaxOp, LayerNormOp, RmsNormOp, CrossEntropyOp, NegativeLogLikelihoodLossOp, ReduceSumOp,
          ReduceMeanOp, ReduceMaxOp, ExpOp, LogOp, PowOp, SqrtOp, ReciprocalOp>(op))
    return Policy::Float32;
  return Policy::Widest;
}

FloatType floatElement(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type ? dyn_cast<FloatType>(type.getElementType()) : FloatType();
}

Value castTo(OpBuilder &builder, Location loc, Value v, FloatType element) {
  auto type = cast<RankedTensorType>(v.getType());
  return CastOp::create(builder, loc, RankedTensorType::get(type.getShape(), element), v, TypeAttr::get(element));
}

} // namespace

LogicalResult applyMixedPrecision(ModuleOp module, const std::string &precision) {
  if (precision == "fp32")
    return success();
  if (precision != "bf16" && precision != "fp16")
    return module.emitError() << "mixed precision: expected bf16 or fp16, not '" << precision << "'";
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError("mixed precision: the module has no @forward function");
  if (module.lookupSymbol("forward_backward"))
    return module.emitError("mixed precision: run it before train-autodiff (@forward_backward exists)");
  if (module->hasAttr("train.precision"))
    return module.emitError("mixed precision: the module is already ")
           << module->getAttr("train.precision");
  MLIRContext *context = module.getContext();
  FloatType low = precision == "bf16" ? FloatType(BFloat16Type::get(context)) : FloatType(Float16Type::get(context));
  FloatType f32 = Float32Type::get(context);

  OpBuilder builder(context);
  Block &body = forward.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    // Constants and parameters keep their float32 values; casts say their type.
    if (isa<ConstantOp, ParamOp, CastOp>(op))
      continue;
    bool anyFloat = false, anyWide = false;
    for (Value operand : op.getOperands())
      if (FloatType element = floatElement(operand)) {
        anyFloat = true;
        anyWide |= element.getWidth() > 16;
      }
    if (!anyFloat)
      continue;
    Policy policy = policyOf(&op);
    FloatType compute = policy == Policy::Low ? low : policy == Policy::Float32 || anyWide ? f32 : low;
    builder.setInsertionPoint(&op);
    for (OpOperand &operand : op.getOpOperands())
      if (FloatType element = floatElement(operand.get()); element && element != compute)
        operand.set(castTo(builder, op.getLoc(), operand.get(), compute));
    for (Value result : op.getResults())
      if (floatElement(result))
        result.setType(RankedTensorType::get(cast<RankedTensorType>(result.getType()).getShape(), compute));
  }
  // @forward returns float32 whatever computed its results.
  Operation *terminator = body.getTerminator();
  builder.setInsertionPoint(terminator);
  for (OpOperand &operand : terminator->getOpOperands())
    if (FloatType element = floatElement(operand.get()); element && element != f32)
      operand.set(castTo(builder, terminator->getLoc(), operand.get(), f32));
  forward.setFunctionType(builder.getFunctionType(forward.getArgumentTypes(), terminator->getOperandTypes()));
  module->setAttr("train.precision", builder.getStringAttr(precision));
  return mlir::verify(forward);
}

namespace {

struct MixedPrecisionPass : impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override {
    if (failed(applyMixedPrecision(getOperation(), precision)))
      signalPassFailure();
  }
};

} // namespace

} // namespace colossal::autodiff
