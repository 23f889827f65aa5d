//===- TrainingPipeline.h - the compile as one pass pipeline ------*- C++
//-*-===//
//
// What colossal-compile does to an imported module, in order, as passes:
//
//   raised       train-raise (named ops: gelu, norms, attention, linear, ...)
//   partitioned  dist-apply-plan (the plan on the module as dist.plan), then
//                the model axis split of @forward the plan asks for:
//                train-sequence-axis-parallel (sp=N), train-tensor-parallel
//                (tp=N), train-sequence-parallel (Megatron-SP on the tensor
//                axis)
//   train        train-mixed-precision, train-pipeline-stages (pp > 1),
//                train-autodiff, train-optimizer, train-lower-resharding,
//                then the memory passes: train-recompute-layers,
//                train-regather-for-backward (with Megatron-SP),
//                train-reread-parameters, train-fold-transposes; last
//                train-split-stages (pp > 1)
//
// The splitting and memory passes read their settings from the plan and do
// nothing where it asks for nothing. `colossal-opt
// --training-pipeline='strategy=dp=2,tp=2,sp_mode=megatron'` reproduces
// `colossal-compile --emit=train --gpus 4 --strategy tp=2,sp_mode=megatron` on
// the same imported module; `stop-after=partitioned` reproduces
// `--emit=partitioned`.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PIPELINE_TRAININGPIPELINE_H
#define COLOSSAL_PASSES_PIPELINE_TRAININGPIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace colossal::pipeline {

/// The pipeline's stages, in order; each is a point the driver can stop
/// after (--emit=mlir|raised|partitioned|train).
enum class Stage { Imported, Raised, Partitioned, Train };

const char *nameOf(Stage stage);

struct TrainingPipelineOptions : mlir::PassPipelineOptions<TrainingPipelineOptions> {
  // The plan (dist-apply-plan writes it on the module; the passes read it).
  Option<std::string> strategy{*this, "strategy",
                               llvm::cl::desc("The plan: dp=2,tp=2,sp_mode=megatron,zero=1,recompute=selective,... "
                                              "(empty: one rank)"),
                               llvm::cl::init("")};
  Option<std::string> cluster{*this, "cluster",
                              llvm::cl::desc("The machine the plan is priced for: a preset or a cluster file"),
                              llvm::cl::init("dgx-a100")};
  // Numerics and the update.
  Option<std::string> precision{*this, "precision", llvm::cl::desc("fp32, bf16 or fp16"), llvm::cl::init("fp32")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("lamb, adamw, sgd or lars"), llvm::cl::init("lamb")};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("negative: the optimizer's default"), llvm::cl::init(-1.0)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.9)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::init(false)};
  // The pipeline.
  Option<Stage> stopAfter{*this, "stop-after", llvm::cl::desc("The last stage run"),
                          llvm::cl::values(clEnumValN(Stage::Raised, "raised", "named ops"),
                                           clEnumValN(Stage::Partitioned, "partitioned", "@forward split"),
                                           clEnumValN(Stage::Train, "train", "the whole step")),
                          llvm::cl::init(Stage::Train)};
  Option<bool> report{*this, "report", llvm::cl::desc("The splitting and memory passes say what they did (remarks)"),
                      llvm::cl::init(false)};
};

/// Adds the stages after `startAfter` up to and including `stopAfter`.
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineOptions &options, Stage stopAfter,
                           Stage startAfter = Stage::Imported);

/// Registers `training-pipeline` (options above, stop-after included) for
/// colossal-opt.
void registerTrainingPipeline();

} // namespace colossal::pipeline

#endif // COLOSSAL_PASSES_PIPELINE_TRAININGPIPELINE_H
