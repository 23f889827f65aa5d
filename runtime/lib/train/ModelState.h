//===- ModelState.h - a rank's weights and optimizer state -----------*- C++ -*-===//
//
// The weights a rank holds (its slices of the split ones), each trainable
// tensor's gradient and moments, the sharded optimizer and the offload
// engine when there are any, the loss scale; loaded from the weights file,
// saved to and resumed from checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LIB_TRAIN_MODELSTATE_H
#define COLOSSAL_RUNTIME_LIB_TRAIN_MODELSTATE_H

#include "TrainerOptions.h"
#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/train/Offload.h"
#include "colossal/runtime/train/OptimizerStep.h"
#include "colossal/runtime/train/ShardedOptimizer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt::trainer {

using host::Shape;
using host::Tensor;

/// A rank's weights and optimizer state, and the loss scale.
struct State {
  std::vector<Tensor> parameters;
  /// Per trainable parameter (in program order): gradient and moments (no
  /// second moment for SGD and LARS).
  std::vector<size_t> trainable;
  /// Each allocated in its category's scope: the memory tracker the step
  /// log reports (and the plan's memory prediction is checked against)
  /// counts what they hold.
  std::vector<Floats> grads, m, v;
  std::vector<OptimizerTensor> tensors;
  std::vector<TensorConventions> conventions;
  /// Optimizer offload: the engine moving the shard between device and host
  /// (declared first: the sharded optimizer uses it until destroyed).
  std::unique_ptr<CopyEngine> offload;
  /// Under ZeRO with more than one rank, or with offload: the shard's
  /// optimizer (then m, v and scratch above are released, and grads too
  /// under stage 2).
  std::unique_ptr<ShardedOptimizer> sharded;
  /// Optimizer updates applied: the step count less the steps skipped for
  /// non-finite fp16 gradients (bias correction counts updates).
  int64_t updates = 0;
  /// Dynamic loss scaling: the scale and the finite steps since it changed.
  double lossScale = 1.0;
  int64_t finiteSteps = 0;
};

/// The program's weights from a safetensors file: rank `tensorRank` of
/// `tensorRanks` keeps its slices of the split ones. With `drawSeed`, the
/// parameters the program draws (--init) are drawn from it instead
/// (InitialValues.h), and the file is read only if others remain. Charged
/// as parameters.
State loadWeights(const TrainingProgram &program, const std::string &path, int64_t tensorRank = 0,
                  int64_t tensorRanks = 1, std::optional<uint64_t> drawSeed = std::nullopt);
/// Each trainable tensor's gradient and moments (charged as such) and the
/// optimizer's view of them, under `config`'s conventions.
void prepareOptimizer(const TrainingProgram &program, const OptimizerConfig &config, State &s);
/// Collective over every rank: each writes its weights and optimizer state
/// (replicated over the data axis, its slices of the tensor-parallel ones)
/// as its own shard file; with --save-every, into a folder of checkpoints.
void saveState(Communicator &world, const std::string &dir, const TrainingProgram &program, const Options &o, State &s,
               int64_t step, int64_t tensorRank = 0, int64_t tensorRanks = 1);
/// Collective: the trained weights as DIR/model.safetensors, whole, under
/// the ONNX initializers' names and shapes (padding removed), written by
/// rank 0: what PyTorch's load_state_dict and --weights take. `exported`
/// lists the model's parameters (a pipeline rank's `program` holds its
/// stages' only).
void exportWeights(Communicator &world, const std::string &dir, const TrainingProgram &program,
                   const std::vector<ProgramParameter> &exported, const Options &o, State &s, int64_t step,
                   int64_t tensorRank = 0, int64_t tensorRanks = 1);
/// Continues from a checkpoint of this model, optimizer and seed (refused
/// otherwise, naming which), written under any plan and number of ranks:
/// rank `tensorRank` of `tensorRanks` keeps its slices. Returns its step.
int64_t resumeState(Communicator &world, const std::string &dir, const TrainingProgram &program, const Options &o,
                    State &s, int64_t tensorRank = 0, int64_t tensorRanks = 1);

} // namespace colossal::rt::trainer

#endif // COLOSSAL_RUNTIME_LIB_TRAIN_MODELSTATE_H
