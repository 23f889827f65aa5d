//===- TrainingPipeline.h - the compile as one pass pipeline ------*- C++
//-*-===//
//
// What colossal-compile does to an imported module, in order, as passes:
//
//   raised       train-raise (named ops: gelu, norms, attention, linear, ...)
//   partitioned  the model axis split of @forward: train-sequence-axis-parallel
//                (sp=N) or train-tensor-parallel (tp=N), then
//                train-sequence-parallel (Megatron-SP on the tensor axis)
//   train        train-mixed-precision, train-autodiff, train-optimizer,
//                train-lower-resharding, then the memory passes:
//                train-recompute-layers, train-regather-for-backward (with
//                Megatron-SP), train-reread-parameters, train-fold-transposes
//
// `colossal-opt --training-pipeline='tensor-ranks=2 sequence-parallel=true'`
// reproduces `colossal-compile --emit=train --strategy tp=2,sp_mode=megatron`
// on the same imported module; `stop-after=partitioned` reproduces
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
  // The model axis (one of the two).
  Option<int64_t> tensorRanks{*this, "tensor-ranks", llvm::cl::desc("Ranks of the tensor axis (1: no split)"),
                              llvm::cl::init(1)};
  Option<bool> sequenceParallel{*this, "sequence-parallel",
                                llvm::cl::desc("Megatron's sequence parallelism on the tensor axis"),
                                llvm::cl::init(false)};
  Option<int64_t> sequenceRanks{*this, "sequence-ranks",
                                llvm::cl::desc("Ranks of the sequence axis of its own (1: no split)"),
                                llvm::cl::init(1)};
  Option<std::string> sequenceAlgorithm{*this, "sequence-algorithm",
                                        llvm::cl::desc("all-to-all or ring, on the sequence axis"),
                                        llvm::cl::init("all-to-all")};
  // Numerics and the update.
  Option<std::string> precision{*this, "precision", llvm::cl::desc("fp32, bf16 or fp16"), llvm::cl::init("fp32")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("lamb, adamw, sgd or lars"), llvm::cl::init("lamb")};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("negative: the optimizer's default"), llvm::cl::init(-1.0)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.9)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::init(false)};
  // Memory.
  Option<std::string> recompute{*this, "recompute", llvm::cl::desc("none, selective or full"), llvm::cl::init("none")};
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
/// Stages whose settings ask for nothing (tensor-ranks=1, recompute=none)
/// add no passes.
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineOptions &options, Stage stopAfter,
                           Stage startAfter = Stage::Imported);

/// Registers `training-pipeline` (options above, stop-after included) for
/// colossal-opt.
void registerTrainingPipeline();

} // namespace colossal::pipeline

#endif // COLOSSAL_PASSES_PIPELINE_TRAININGPIPELINE_H
