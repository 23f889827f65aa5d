//===- RaisePipeline.cpp - the raising passes in order -----------*- C++ -*-===//

#include "passes/raise/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace colossal::train {

void buildRaisePipeline(mlir::OpPassManager &pm) {
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
  // Activations and norms first: their chains contain the multiplications
  // and additions that linear and attention raising would otherwise claim.
  fn.addPass(createRaiseGelu());
  fn.addPass(createRaiseSilu());
  fn.addPass(createRaiseLayerNorm());
  fn.addPass(createRaiseRmsNorm());
  fn.addPass(createRaiseAttention());
  fn.addPass(createRaiseCrossEntropy());
  fn.addPass(createRaiseLinear());
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
}

void registerRaisePipeline() {
  mlir::PassPipelineRegistration<>(
      "train-raise", "raises ONNX-level op chains to named train ops (all raising passes)",
      buildRaisePipeline);
}

} // namespace colossal::train
