//===- Optimizer.cpp - the optimizer step as an op of the IR --------------===//

#include "Optimizer.h"
#include "passes/autodiff/Passes.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <set>

namespace colossal::autodiff {

#define GEN_PASS_DEF_OPTIMIZERPASS
#include "passes/autodiff/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;

LogicalResult buildOptimizerStep(ModuleOp module, const OptimizerOptions &options) {
  const std::string &kind = options.kind;
  if (kind != "lamb" && kind != "adamw" && kind != "sgd" && kind != "lars")
    return module.emitError() << "optimizer: expected lamb, adamw, sgd or lars, not '" << kind << "'";
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step)
    return module.emitError("optimizer: the module has no @forward_backward (run train-autodiff first)");
  if (module.lookupSymbol("optimizer_step"))
    return module.emitError("optimizer: @optimizer_step already exists");

  std::set<std::string> gradients;
  for (unsigned r = 0; r < step.getNumResults(); ++r)
    if (auto name = step.getResultAttrOfType<StringAttr>(r, "train.name"))
      gradients.insert(name.getValue().str());
  SmallVector<ParameterOp> trainable;
  for (ParameterOp p : module.getOps<ParameterOp>()) {
    if (!p.getTrainable())
      continue;
    if (!gradients.count("grad:" + p.getSymName().str()))
      return p.emitError() << "optimizer: @forward_backward returns no gradient for trainable parameter @"
                           << p.getSymName();
    trainable.push_back(p);
  }
  if (trainable.empty())
    return module.emitError("optimizer: the model has no trainable parameter");

  MLIRContext *context = module.getContext();
  OpBuilder builder(context);
  Location loc = step.getLoc();
  auto f32 = RankedTensorType::get({}, builder.getF32Type());
  auto i64 = RankedTensorType::get({}, builder.getI64Type());
  bool secondMoment = OptimizerUpdateOp::hasSecondMoment(kind);

  SmallVector<Type> argumentTypes{f32, i64, f32}, resultTypes;
  SmallVector<std::string> argumentNames{"lr", "step", "grad_scale"}, resultNames;
  auto addGroup = [&](StringRef prefix, bool argument, bool result) {
    for (ParameterOp p : trainable) {
      std::string name = (prefix + p.getSymName()).str();
      if (argument)
        argumentTypes.push_back(p.getTensorType()), argumentNames.push_back(name);
      if (result)
        resultTypes.push_back(p.getTensorType()), resultNames.push_back(name);
    }
  };
  addGroup("", /*argument=*/false, /*result=*/true);
  addGroup("grad:", true, false);
  addGroup("optimizer.m:", true, true);
  if (secondMoment)
    addGroup("optimizer.v:", true, true);

  builder.setInsertionPointAfter(step);
  auto function = func::FuncOp::create(builder, loc, "optimizer_step",
                                       builder.getFunctionType(argumentTypes, resultTypes));
  auto named = [&](const std::string &name) {
    return builder.getDictionaryAttr(builder.getNamedAttr("train.name", builder.getStringAttr(name)));
  };
  for (size_t a = 0; a < argumentNames.size(); ++a)
    function.setArgAttrs(unsigned(a), named(argumentNames[a]));
  for (size_t r = 0; r < resultNames.size(); ++r)
    function.setResultAttrs(unsigned(r), named(resultNames[r]));

  Block *body = function.addEntryBlock();
  builder.setInsertionPointToStart(body);
  size_t n = trainable.size();
  SmallVector<Value> params;
  for (ParameterOp p : trainable)
    params.push_back(ParamOp::create(builder, loc, p.getTensorType(), FlatSymbolRefAttr::get(p.getSymNameAttr())));
  auto arguments = body->getArguments();
  ValueRange grads = arguments.slice(3, n), moment1 = arguments.slice(3 + n, n),
             moment2 = secondMoment ? ValueRange(arguments.slice(3 + 2 * n, n)) : ValueRange();

  // The conventions of REFERENCE.md: torch.optim decays every tensor; the
  // layer-wise optimizers exempt biases and normalisation weights.
  SmallVector<bool> decay, trustRatio;
  for (ParameterOp p : trainable) {
    bool matrix = p.getTensorType().getRank() > 1;
    bool layerwise = kind == "lamb" || kind == "lars";
    decay.push_back(!layerwise || matrix);
    trustRatio.push_back(kind == "lamb" || (kind == "lars" && matrix));
  }
  double eps = options.eps >= 0 ? options.eps : kind == "adamw" ? 1e-8 : 1e-6;
  auto update = OptimizerUpdateOp::create(
      builder, loc, resultTypes, arguments[0], arguments[1], arguments[2], params, grads, moment1, moment2,
      builder.getStringAttr(kind), builder.getF64FloatAttr(options.beta1), builder.getF64FloatAttr(options.beta2),
      builder.getF64FloatAttr(eps), builder.getF64FloatAttr(options.weightDecay),
      builder.getF64FloatAttr(options.momentum), builder.getBoolAttr(options.nesterov),
      builder.getF64FloatAttr(options.eta), builder.getDenseBoolArrayAttr(decay),
      builder.getDenseBoolArrayAttr(trustRatio));
  func::ReturnOp::create(builder, loc, update.getResults());
  if (failed(mlir::verify(function))) {
    function.erase();
    return failure();
  }
  return success();
}

namespace {

struct OptimizerPass : impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;

  void runOnOperation() override {
    OptimizerOptions o;
    o.kind = kind, o.beta1 = beta1, o.beta2 = beta2, o.eps = eps, o.weightDecay = weightDecay;
    o.momentum = momentum, o.nesterov = nesterov, o.eta = eta;
    if (failed(buildOptimizerStep(getOperation(), o)))
      signalPassFailure();
  }
};

} // namespace

} // namespace colossal::autodiff
