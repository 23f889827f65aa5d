//===- StepInterface.h - what an emitted step and the trainer agree on -*- C++ -*-===//
//
// An emitted program hands the trainer a `TrainingProgram`: its inputs, its
// parameters and how they are split, the settings it was compiled with, and
// the step function. The step reads weights through `StepParameters`, draws
// its masks from `StepRandomness`, reports each gradient to `GradientReady`
// as it is made, and makes its own collectives through `StepCollectives`.
// Kernels that communicate inside an op (ring attention, the
// vocabulary-parallel loss) take the last; nothing here depends on the
// trainer's loop.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TRAIN_STEPINTERFACE_H
#define COLOSSAL_RUNTIME_TRAIN_STEPINTERFACE_H

#include "colossal/runtime/kernels/HostTensor.h"
#include "colossal/runtime/train/LearningRate.h"
#include "colossal/runtime/train/OptimizerStep.h"

#include <functional>
#include <string>
#include <vector>

namespace colossal::rt {

struct ProgramInput {
  std::string name;
  host::Shape shape;
  bool integer = false;
  /// Synthetic integer data is drawn from [0, range): the compiler sets it
  /// from the input's uses (a table's rows, a loss's classes).
  int64_t range = 2;
};

/// Where a parameter's initial value comes from: the weights file, or drawn
/// by the program (compiled with --init; InitialValues.h).
struct ParameterInit {
  enum Kind { File, Normal, Ones, Zeros };
  Kind kind = File;
  /// Normal: the standard deviation (the mean is 0).
  double std = 0;
};

struct ProgramParameter {
  std::string name;
  host::Shape shape;
  bool trainable = true;
  /// Weight decay and trust ratio under the compiled optimizer
  /// (train.optimizer_update's `decay` and `trust_ratio`); a run that picks
  /// another optimizer by flag takes that optimizer's conventions instead.
  TensorConventions conventions;
  /// Tensor parallelism: `shape` is one rank's slice, and the weights file
  /// holds the whole tensor, `tensorRanks` slices along this dimension
  /// (rank t of the tensor axis keeps the t-th); -1: whole on every rank.
  int64_t splitDim = -1;
  /// A grouped split (a fused QKV projection): the dimension is this many
  /// equal groups, and the rank keeps its slice of each, side by side.
  int64_t splitGroups = 1;
  /// The whole tensor's last `padding` rows along `splitDim` are zeros the
  /// split added (a vocabulary the tensor ranks do not divide).
  int64_t padding = 0;
  /// Drawn by the program unless the run names a weights file.
  ParameterInit init;
  /// A block of a tensor grid (2D tensor parallelism; `TrainingSettings::
  /// tensorGrid`): for each dimension, the grid axes splitting it, major
  /// first ("tp_row": the rank's row, "tp_col": its column); `shape` is the
  /// block. Empty: not on a grid.
  std::vector<std::vector<std::string>> gridSplit;
  /// A grid block whose dimension `gridGroupDim` is `gridGroups` equal
  /// groups, each cut into the blocks (a fused QKV projection's output
  /// features): the block holds its block of every group, side by side.
  int64_t gridGroupDim = -1, gridGroups = 1;
};

/// Dynamic loss scaling for fp16 gradients (the rules of PyTorch's
/// GradScaler): the loss gradient is seeded with `scale`; a step whose
/// gradients are not finite is skipped (no optimizer update) and the scale
/// multiplied by `backoff`; after `window` finite steps in a row it is
/// multiplied by `growth`.
struct LossScaling {
  bool dynamic = false;
  double initial = 65536.0;
  double growth = 2.0, backoff = 0.5;
  int64_t window = 2000;
};

/// The settings the program was compiled with; flags override them.
struct TrainingSettings {
  OptimizerConfig optimizer;
  int64_t warmupSteps = 0;
  Decay schedule = Decay::Constant;
  double minLrRatio = 0.0;
  int64_t steps = 10;
  int64_t microbatches = 1;
  /// Data-parallel ranks the program was compiled for; more than one runs
  /// under mpirun with ranks x tensorRanks processes.
  int64_t ranks = 1;
  /// Ranks of the model axes inside the data-parallel one: the mesh is
  /// dp x sp x tp, tp innermost (neighbouring ranks). "tp" is tensor
  /// parallelism (Megatron's split of the MLP and attention blocks and the
  /// vocabulary, with or without its sequence parallelism; the split
  /// parameters are sliced over it), "sp" sequence parallelism on an axis
  /// of its own (all-to-all or ring attention; every rank of it holds the
  /// same weights).
  int64_t tensorRanks = 1;
  /// The tensor ranks as a tensorGrid x tensorGrid grid (2D tensor
  /// parallelism: mesh axes tp_row and tp_col inside tp); 0: one axis.
  int64_t tensorGrid = 0;
  /// 2.5D: the grid's layers (mesh axis tp_depth, outside tp_row and
  /// tp_col), each holding the same weight blocks; 1: one layer (2D).
  int64_t tensorGridDepth = 1;
  /// 3D: the tensor ranks as a tensorGrid^3 cube (mesh axes tp_in, tp_w,
  /// tp_out inside tp).
  bool tensorCube = false;
  int64_t sequenceRanks = 1;
  /// ZeRO stage over those ranks: 1 shards the optimizer state, 2 the
  /// gradients too, 3 the weights too (ShardedOptimizer.h); 0 replicates
  /// everything.
  int64_t zero = 0;
  /// Optimizer offload: the ZeRO shard's optimizer state (the whole state on
  /// one rank) lives in pinned host memory and the host runs the update.
  bool offloadOptimizer = false;
  /// Capacity of a data-parallel gradient bucket (GradientBuckets.h): one
  /// all-reduce per bucket, without ZeRO or under ZeRO-1. The compiler
  /// writes its cost model's; `--bucket-mb` overrides it.
  int64_t gradientBucketBytes = 25 << 20;
  /// ZeRO-3: bytes of weights gathered ahead of the step's reads on a
  /// communication thread (ParameterPrefetch.h); 0 gathers each where the
  /// step reads it. The compiler writes one layer's weights;
  /// `--prefetch-mb` overrides it.
  int64_t prefetchBytes = 0;
  LossScaling lossScaling;
  /// Pipeline parallelism: ranks of the pipeline axis (outermost: each holds
  /// `virtualStages` chunks of the layers), the schedule ("gpipe", "1f1b",
  /// "interleaved"; PipelineSchedule.h) and its microbatches (above).
  int64_t pipelineRanks = 1;
  int64_t virtualStages = 1;
  std::string pipelineSchedule = "1f1b";
};

/// Where a step reads the parameters (by index in the program's list). It
/// fetches one before its first read and releases it after its last; a
/// parameter fetched twice is released twice. With replicated weights both
/// are free; under ZeRO-3 `fetch` all-gathers the tensor from every rank's
/// shard (a collective: every rank's step fetches in the same order) and the
/// last `release` frees it, so only the tensors in use are whole.
class StepParameters {
public:
  virtual ~StepParameters();
  virtual const host::Tensor &fetch(size_t index) = 0;
  virtual void release(size_t index) = 0;
};

/// Where one microbatch sits in the run, for the step's random masks: the
/// run's seed, the (1-based) step, and which block of the step's global
/// batch the microbatch is (rank * microbatches + m). A dropout mask is a
/// function of these and of the site alone, so N ranks draw the single
/// rank's masks, a resumed run draws the uninterrupted run's, and a
/// recomputed op draws its forward's.
struct StepRandomness {
  uint64_t seed = 0;
  uint64_t step = 0;
  int64_t block = 0;

  DropoutKey dropoutKey(int64_t site, int64_t elements) const {
    return dropoutKeyFor(seed, step, block, site, elements);
  }
};

/// Told of each trainable gradient (by its index among the trainable
/// parameters) as soon as the step has computed it, while the rest of the
/// backward pass still runs: the trainer takes it then (adds it to the
/// step's sum, stages it for ZeRO's reduce-scatter, starts its bucket's
/// all-reduce), so the step frees it at once instead of holding every
/// gradient to its end. A reported gradient's place in the step's returned
/// list may be empty; one never reported is returned whole.
class GradientReady {
public:
  virtual ~GradientReady();
  virtual void operator()(size_t trainable, const host::Tensor &gradient) = 0;
};

/// The collectives the step itself makes (tensor parallelism's sums), over
/// the ranks of a mesh axis; every rank's step makes them in one order.
class StepCollectives {
public:
  virtual ~StepCollectives();
  /// The sum of every rank's `x` over mesh axis `axis`.
  virtual host::Tensor allReduce(const host::Tensor &x, const std::string &axis) = 0;
  /// The same sum made in `x`'s storage (the step's last read of `x`): no
  /// second tensor of its size.
  virtual host::Tensor allReduceInPlace(host::Tensor &&x, const std::string &axis);
  /// The elementwise largest of every rank's `x` over mesh axis `axis`.
  virtual host::Tensor allReduceMax(const host::Tensor &x, const std::string &axis) = 0;
  /// The ranks' `x`, slices of a value along `dim`, put side by side.
  virtual host::Tensor allGather(const host::Tensor &x, const std::string &axis, int64_t dim) = 0;
  /// The sum of the ranks' `x`, this rank keeping its slice along `dim`.
  virtual host::Tensor reduceScatter(const host::Tensor &x, const std::string &axis, int64_t dim) = 0;
  /// `x`, this rank's slice along `concatDim` of a value, traded for its
  /// slice along `splitDim` (an all-to-all: sequence split to heads split).
  virtual host::Tensor allToAll(const host::Tensor &x, const std::string &axis, int64_t splitDim,
                                int64_t concatDim) = 0;
  /// `x` sent to the next rank of mesh axis `axis` (rank + 1, around the
  /// ring), the previous rank's received (ring self-attention).
  virtual host::Tensor ringShift(const host::Tensor &x, const std::string &axis) = 0;
  /// Rank `root`'s `x` on every rank of mesh axis `axis` (the others' `x`
  /// gives its shape): a grid layer's block handed along its row or column.
  /// Backends without it refuse, naming the axis.
  virtual host::Tensor broadcast(const host::Tensor &x, const std::string &axis, int64_t root);
  /// The sum of the ranks' `x` at rank `root` of mesh axis `axis`; the
  /// other ranks get their own `x` back.
  virtual host::Tensor reduceTo(const host::Tensor &x, const std::string &axis, int64_t root);
  /// This rank's index on mesh axis `axis`, and the axis's ranks: which
  /// slice of a split tensor the rank holds.
  virtual int64_t rankOn(const std::string &axis) = 0;
  virtual int64_t ranksOn(const std::string &axis) = 0;
};

/// Computes the loss and the gradients of the trainable parameters (in the
/// order of the program's parameters, skipping frozen ones) from the inputs
/// and the parameters; the gradients are of `lossScale` times the loss (1
/// unless the program scales its loss).
using StepFunction =
    std::function<void(const std::vector<host::Tensor> &inputs, StepParameters &parameters,
                       const StepRandomness &random, float lossScale, host::Tensor &loss,
                       std::vector<host::Tensor> &gradients, GradientReady &gradientReady,
                       StepCollectives &collectives)>;

/// One call of a pipeline stage's forward or backward function on one
/// microbatch.
struct StageCall {
  /// The microbatch's program inputs, in the program's order.
  const std::vector<host::Tensor> &inputs;
  /// The function's received and saved arguments, in its order; it takes
  /// them (frees each after its last use).
  std::vector<host::Tensor> arguments;
  /// Filled by the function, one per result; a gradient is handed to
  /// `gradientReady` as soon as it is made and its place left empty.
  std::vector<host::Tensor> results;
  StepParameters &parameters;
  const StepRandomness &random;
  float lossScale;
  GradientReady &gradientReady;
  StepCollectives &collectives;
};

/// Where an argument of a stage function comes from, or a result goes.
struct StageValue {
  enum Kind {
    /// A program input (`index` in the program's inputs).
    Input,
    /// The loss scale (fp16).
    LossScale,
    /// Sent by stage `peer` (transfer `index`).
    Received,
    /// What the stage's forward kept for its backward (`index`).
    Saved,
    /// The microbatch's loss (the last stage's forward).
    Loss,
    /// To stage `peer` (transfer `index`).
    Sent,
    /// The stage's part of trainable parameter `index`'s gradient
    /// (`index` among the trainable parameters).
    Gradient,
  };
  Kind kind = Input;
  int64_t index = 0;
  int64_t peer = -1;
  host::Shape shape;
  bool integer = false;
};

/// The forward or the backward of one virtual stage
/// (passes/partition/SplitStages.h).
struct StageFunction {
  int64_t stage = 0;
  bool backward = false;
  std::vector<StageValue> arguments, results;
  /// The parameters it reads (indices in the program's list).
  std::vector<int64_t> parameters;
  std::function<void(StageCall &)> run;
};

struct TrainingProgram {
  std::string model;
  std::vector<ProgramInput> inputs;
  std::vector<ProgramParameter> parameters;
  TrainingSettings settings;
  /// The step, or (a pipelined program) its stages: stage s's forward at
  /// 2s, its backward at 2s + 1.
  StepFunction step;
  std::vector<StageFunction> stages;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_TRAIN_STEPINTERFACE_H
