//===- HostSource.h - the training step as host C++ ---------------*- C++ -*-===//
//
// Turns a module with @forward_backward and @optimizer_step (train-autodiff's
// and train-optimizer's output) into one C++ translation unit: a step
// function with one statement per op, each a call into the runtime's host
// tensor ops (`colossal/runtime/kernels/HostTensor.h`), the optimizer update lowered
// to the runtime's fused optimizer (its settings and per-tensor conventions),
// and a `main` that hands both to the runtime's trainer. The source is
// meant to be read: every statement carries the op it came from.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_CODEGEN_HOSTSOURCE_H
#define COLOSSAL_CODEGEN_HOSTSOURCE_H

#include "colossal/cost/Estimator.h"
#include "colossal/runtime/train/StepInterface.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <string>

namespace colossal::codegen {

/// What the emitted program records besides the step: its defaults.
struct ProgramSettings {
  std::string model;
  /// "cpu": the step on host tensors; "cuda": the same statements on device
  /// tensors, inputs and parameters uploaded, loss and gradients downloaded.
  std::string target = "cpu";
  /// The peak learning rate of the schedule. The optimizer and its other
  /// settings are @optimizer_step's (CompiledOptimizer.h).
  double lr = 1e-3;
  double clipGradNorm = 0;
  int64_t warmupSteps = 0;
  std::string schedule = "constant";
  int64_t steps = 10;
  /// --init: trainable parameters start from values the program draws
  /// (N(0, initStd^2) for matrices and embeddings, 1 for norm scales, 0 for
  /// biases and other vectors) instead of the weights file; negative: the
  /// file's.
  double initStd = -1;
  // The plan: writePackage reads these from the module's dist.plan.
  int64_t microbatches = 1;
  /// Data-parallel ranks.
  int64_t ranks = 1;
  /// Ranks of the tensor axis (passes/partition/TensorParallel.h has split
  /// the module for them) and of the sequence axis of its own
  /// (SequenceAxisParallel.h); the program runs on ranks x sequenceRanks x
  /// tensorRanks processes, the tensor axis inside.
  int64_t tensorRanks = 1, sequenceRanks = 1;
  /// ZeRO stage over the data-parallel ranks (0: replicated; 1: optimizer
  /// state sharded; 2: gradients too; 3: weights too).
  int64_t zero = 0;
  /// The optimizer's state and update on the host (ZeRO-Offload).
  bool offloadOptimizer = false;
  /// Pipeline parallelism: ranks of the pipeline axis, model chunks per rank
  /// and the schedule (the module holds per-stage functions,
  /// passes/partition/SplitStages.h).
  int64_t pipelineRanks = 1;
  int64_t virtualStages = 1;
  std::string pipelineSchedule = "1f1b";
  /// Recomputation, "none", "selective" or "full": the step re-runs each
  /// layer's forward ops (all, or all but the contractions) in the backward
  /// pass (passes/memory/RecomputeLayers.h has done it to the IR).
  std::string recompute = "none";
  /// The data-parallel gradient bucket: the cost model's, so the program
  /// makes the all-reduces the plan predicts.
  int64_t gradientBucketBytes = int64_t(cost::EstimateOptions().bucketBytes);
  /// ZeRO-3: bytes of weights gathered ahead of the step's reads (0: each
  /// gathered where it is read). writePackage sets one layer's weights,
  /// what the cost model's ZeRO-3 holds in flight.
  int64_t prefetchBytes = 0;
  /// The model axes: the model's cost graph before the partitioner split
  /// it and one rank's after (its @forward, before differentiation), and
  /// with both axes the graph after the tensor split alone. The package
  /// reads the split back from them (cost/AppliedSharding.h) and has the
  /// cost model predict the model axes' collectives from it.
  std::optional<cost::Graph> unsplitGraph, tensorSplitGraph, splitGraph;
  /// How the sequence is split: Megatron's on the tensor axis between its
  /// blocks, all-to-all or ring on an axis of its own (`sequenceRanks`), or
  /// not at all.
  cost::SequenceMode sequenceMode = cost::SequenceMode::None;
};

/// What the emitted step will hold: every value is freed after the
/// statement of its last use, so its peak is the live values' (the step
/// log's `activations` peak must equal it), not all of them.
struct StepMemoryPlan {
  int64_t peakBytes = 0;
  /// Every value the step defines, summed: what it would hold without freeing.
  int64_t valueBytes = 0;
};

/// Constants of more values than this are not written into the source
/// (the C++ compiler would parse them as literals) but beside the program.
constexpr int64_t kInlineConstantElements = 512;

/// A constant the step reads by name from constants.safetensors beside the
/// program (runtime/io/ProgramFiles.h): float32, or int64 for integers and
/// booleans.
struct ExternalConstant {
  std::string name;
  mlir::DenseElementsAttr value;
};

/// How --init starts each parameter, by name: trainable ones by the role
/// their reads play in @forward (Normal, Ones, Zeros), frozen ones from the
/// file.
std::map<std::string, rt::ParameterInit::Kind> initKinds(mlir::ModuleOp module);

/// Writes the program; on failure emits an error at the op that cannot be
/// lowered (its name, location and why) and returns failure. With
/// `external`, constants of more than kInlineConstantElements values go
/// there instead of into the source.
mlir::LogicalResult emitHostSource(mlir::ModuleOp module, const ProgramSettings &settings, llvm::raw_ostream &os,
                                   StepMemoryPlan *memory = nullptr, std::vector<ExternalConstant> *external = nullptr);

} // namespace colossal::codegen

#endif // COLOSSAL_CODEGEN_HOSTSOURCE_H
