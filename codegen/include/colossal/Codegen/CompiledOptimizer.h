//===- CompiledOptimizer.h - the optimizer the IR says to run ------*- C++ -*-===//
//
// An emitted program runs the optimizer of @optimizer_step (train-optimizer's
// output): its single `train.optimizer_update` gives the kind, the settings
// that become the program's defaults, and per trainable parameter whether it
// takes weight decay and a trust ratio. The update lowers to the runtime's
// fused multi-tensor kernels, which the trainer calls on whole tensors, or
// on a rank's shard of them under ZeRO.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_CODEGEN_COMPILEDOPTIMIZER_H
#define COLOSSAL_CODEGEN_COMPILEDOPTIMIZER_H

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <map>
#include <string>

namespace colossal::codegen {

struct CompiledOptimizer {
  train::OptimizerUpdateOp op;
  std::string kind;
  double beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0, momentum = 0, eta = 0;
  bool nesterov = false;
  struct Conventions {
    bool decay = true, trustRatio = true;
  };
  /// By parameter name.
  std::map<std::string, Conventions> conventions;
};

/// Reads @optimizer_step; an error names what is missing or inconsistent
/// (no such function, not exactly one update, a trainable parameter it does
/// not update, a value that is not a parameter).
mlir::FailureOr<CompiledOptimizer> readCompiledOptimizer(mlir::ModuleOp module);

} // namespace colossal::codegen

#endif // COLOSSAL_CODEGEN_COMPILEDOPTIMIZER_H
