//===- colossal-opt.cpp - mlir-opt with the colossal dialects and passes ---===//

#include "colossal/Dialect/Train/TrainDialect.h"
#include "passes/autodiff/Passes.h"
#include "passes/memory/Passes.h"
#include "passes/partition/Passes.h"
#include "passes/pipeline/TrainingPipeline.h"
#include "passes/plan/Passes.h"
#include "passes/raise/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<colossal::train::TrainDialect, colossal::dist::DistDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  colossal::train::registerRaisePasses();
  colossal::train::registerRaisePipeline();
  colossal::plan::registerPlanPasses();
  colossal::autodiff::registerAutodiffPasses();
  colossal::memory::registerMemoryPasses();
  colossal::partition::registerPartitionPasses();
  colossal::pipeline::registerTrainingPipeline();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "colossal-opt: the colossal-compile pass driver\n", registry));
}
