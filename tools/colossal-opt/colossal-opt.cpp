//===- colossal-opt.cpp - mlir-opt with the colossal dialects and passes ---===//

#include "colossal/Dialect/Train/TrainDialect.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/autodiff/MixedPrecision.h"
#include "passes/autodiff/Optimizer.h"
#include "passes/memory/ParameterReads.h"
#include "passes/memory/Regather.h"
#include "passes/memory/Recompute.h"
#include "passes/memory/TransposedOperands.h"
#include "passes/partition/Resharding.h"
#include "passes/partition/SequenceAxisParallel.h"
#include "passes/partition/SequenceParallel.h"
#include "passes/partition/TensorParallel.h"
#include "passes/plan/Passes.h"
#include "passes/raise/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<colossal::train::TrainDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  colossal::train::registerRaisePasses();
  colossal::train::registerRaisePipeline();
  colossal::plan::registerPlanPasses();
  colossal::autodiff::registerAutodiffPass();
  colossal::autodiff::registerMixedPrecisionPass();
  colossal::autodiff::registerOptimizerPass();
  colossal::memory::registerRereadParametersPass();
  colossal::memory::registerRegatherForBackwardPass();
  colossal::memory::registerRecomputeLayersPass();
  colossal::memory::registerFoldTransposesPass();
  colossal::partition::registerTensorParallelPass();
  colossal::partition::registerLowerReshardingPass();
  colossal::partition::registerSequenceParallelPass();
  colossal::partition::registerSequenceAxisParallelPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "colossal-opt: the colossal-compile pass driver\n", registry));
}
