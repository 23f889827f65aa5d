//===- CompiledOptimizer.cpp - the optimizer the IR says to run -----------===//

#include "colossal/Codegen/CompiledOptimizer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace colossal::codegen {

using namespace mlir;
using namespace colossal::train;

FailureOr<CompiledOptimizer> readCompiledOptimizer(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!step)
    return module.emitError() << "the module has no @optimizer_step (run train-optimizer first)";
  auto updates = llvm::to_vector(step.getOps<OptimizerUpdateOp>());
  if (updates.size() != 1)
    return step.emitError() << "@optimizer_step must hold exactly one train.optimizer_update, not "
                            << updates.size();
  OptimizerUpdateOp op = updates.front();
  CompiledOptimizer c;
  c.op = op;
  c.kind = op.getKind().str();
  c.beta1 = op.getBeta1().convertToDouble(), c.beta2 = op.getBeta2().convertToDouble();
  c.eps = op.getEps().convertToDouble(), c.weightDecay = op.getWeightDecay().convertToDouble();
  c.momentum = op.getMomentum().convertToDouble(), c.eta = op.getEta().convertToDouble();
  c.nesterov = op.getNesterov();
  for (auto [i, param] : llvm::enumerate(op.getParams())) {
    auto read = param.getDefiningOp<ParamOp>();
    if (!read)
      return op.emitError() << "param " << i << " is not a train.param: emitted programs update model parameters";
    auto parameter = module.lookupSymbol<ParameterOp>(read.getName());
    if (!parameter || !parameter.getTrainable())
      return op.emitError() << "param " << i << " (@" << read.getName() << ") is not a trainable parameter";
    c.conventions[read.getName().str()] = {op.getDecay()[i], op.getTrustRatio()[i]};
  }
  for (ParameterOp p : module.getOps<ParameterOp>())
    if (p.getTrainable() && !c.conventions.count(p.getSymName().str()))
      return op.emitError() << "does not update trainable parameter @" << p.getSymName();
  return c;
}

} // namespace colossal::codegen
