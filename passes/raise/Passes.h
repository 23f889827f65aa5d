//===- Passes.h - raising and test passes -----------------------*- C++ -*-===//

#ifndef COLOSSAL_PASSES_RAISE_PASSES_H
#define COLOSSAL_PASSES_RAISE_PASSES_H

#include "colossal/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace colossal::train {

#define GEN_PASS_DECL
#include "passes/raise/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/raise/Passes.h.inc"

/// Adds the raising passes in the order that lets each see the named ops of
/// the previous ones (gelu and norms before linear, attention before
/// cross-entropy), followed by canonicalisation.
void buildRaisePipeline(mlir::OpPassManager &pm);

/// Registers `train-raise`, the pipeline above, for colossal-opt.
void registerRaisePipeline();

} // namespace colossal::train

#endif // COLOSSAL_PASSES_RAISE_PASSES_H
