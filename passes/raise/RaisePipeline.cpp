//===- RaisePipeline.cpp - the raising passes in order -----------*- C++ -*-===//

#include "passes/raise/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace colossal::train {

void buildRaisePipeline(mlir::OpPassManager &pm) {
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
}

void registerRaisePipeline() {
  mlir::PassPipelineRegistration<>(
      "train-raise", "raises ONNX-level op chains to named train ops (all raising passes)",
      buildRaisePipeline);
}

} // namespace colossal::train
