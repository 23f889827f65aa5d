//===- TrainingPipeline.cpp - the compile as one pass pipeline ------------===//

#include "passes/pipeline/TrainingPipeline.h"

#include "passes/autodiff/Passes.h"
#include "passes/memory/Passes.h"
#include "passes/partition/Passes.h"
#include "passes/plan/Passes.h"
#include "passes/raise/Passes.h"

#include "mlir/Pass/PassRegistry.h"

namespace colossal::pipeline {

const char *nameOf(Stage stage) {
  switch (stage) {
  case Stage::Imported:
    return "mlir";
  case Stage::Raised:
    return "raised";
  case Stage::Partitioned:
    return "partitioned";
  case Stage::Train:
    return "train";
  }
  return "?";
}

namespace {

void addPartitioning(mlir::OpPassManager &pm, const TrainingPipelineOptions &options) {
  pm.addPass(plan::createDistApplyPlan(plan::DistApplyPlanOptions{options.strategy, options.cluster}));
  // Each split reads its axis from the plan; one the plan does not ask for
  // leaves the module as it is. The tensor split first: the sequence axis
  // then cuts the tokens of what it made (weights it sliced, sums it
  // inserted) as of any other per-token op.
  partition::TensorParallelPassOptions tensor;
  tensor.report = options.report;
  pm.addPass(partition::createTensorParallelPass(tensor));
  partition::TensorGridPassOptions grid;
  grid.report = options.report;
  pm.addPass(partition::createTensorGridPass(grid));
  pm.addPass(partition::createSequenceParallelPass(partition::SequenceParallelPassOptions{options.report}));
  partition::SequenceAxisParallelPassOptions sequence;
  sequence.report = options.report;
  pm.addPass(partition::createSequenceAxisParallelPass(sequence));
}

void addTraining(mlir::OpPassManager &pm, const TrainingPipelineOptions &options) {
  pm.addPass(autodiff::createMixedPrecisionPass(autodiff::MixedPrecisionPassOptions{options.precision}));
  // A pipeline's stages, marked on the ops the step differentiates.
  pm.addPass(partition::createPipelineStagesPass(partition::PipelineStagesPassOptions{options.report}));
  pm.addPass(autodiff::createAutodiffPass(autodiff::AutodiffPassOptions{options.precision == "fp16"}));
  autodiff::OptimizerPassOptions update;
  update.kind = options.optimizer, update.beta1 = options.beta1, update.beta2 = options.beta2;
  update.eps = options.eps, update.weightDecay = options.weightDecay;
  update.momentum = options.momentum, update.nesterov = options.nesterov;
  pm.addPass(autodiff::createOptimizerPass(update));
  // The partitioning said how values lie on the mesh (dist.reshard);
  // differentiated, the reshardings become the collectives the cost model
  // priced.
  pm.addPass(partition::createLowerReshardingPass(partition::LowerReshardingPassOptions{/*keepForward=*/true}));
  // Recomputation (as the plan asks) first: the re-run layers read weights
  // too, and the second reads below serve them.
  memory::RecomputeLayersPassOptions recompute;
  recompute.report = options.report;
  pm.addPass(memory::createRecomputeLayersPass(recompute));
  // Megatron-SP keeps each block's input shard and gathers it again for the
  // weight gradients (after recomputation, whose re-run ops read the
  // gathered inputs too).
  pm.addPass(memory::createRegatherForBackwardPass(memory::RegatherForBackwardPassOptions{"tp", options.report}));
  // The backward pass reads each weight again rather than holding the
  // forward's read (and views) across the step; under ZeRO-3 a read is a
  // gather.
  pm.addPass(memory::createRereadParametersPass());
  // Weight gradients made as one product in the weight's layout.
  pm.addPass(memory::createFoldTransposesPass());
  // Last: every pass above works on the one step function.
  pm.addPass(partition::createSplitStagesPass());
}

} // namespace

void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineOptions &options, Stage stopAfter,
                           Stage startAfter) {
  auto runs = [&](Stage stage) { return startAfter < stage && stage <= stopAfter; };
  if (runs(Stage::Raised))
    train::buildRaisePipeline(pm);
  if (runs(Stage::Partitioned))
    addPartitioning(pm, options);
  if (runs(Stage::Train))
    addTraining(pm, options);
}

void registerTrainingPipeline() {
  mlir::PassPipelineRegistration<TrainingPipelineOptions>(
      "training-pipeline",
      "colossal-compile's pipeline: raising, the plan and the splits it asks "
      "for, differentiation, the optimizer step, "
      "collectives and the memory passes (stop-after=raised|partitioned|train)",
      [](mlir::OpPassManager &pm, const TrainingPipelineOptions &options) {
        buildTrainingPipeline(pm, options, options.stopAfter);
      });
}

} // namespace colossal::pipeline
