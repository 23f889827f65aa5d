//===- BuildLayout.cpp - what the program is built for --------------------===//

#include "BuildLayout.h"

#include "Planning.h"
#include "colossal/runtime/train/PipelineSchedule.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

namespace colossal::driver {

namespace {

using cost::SequenceMode;

/// Moves the strategy's model axes into `layout`: tp=N (Megatron's split of
/// the MLP and attention blocks and the vocabulary, with sp_mode=megatron
/// riding on it) and sp=N with all-to-all or ring attention on an axis of
/// its own, alone or beside tp. What moved is cleared from the strategy, so what is left is what
/// the partitioner must still be asked about.
bool takeModelAxis(cost::Strategy &strategy, BuildLayout &layout) {
  if (strategy.tp == 1 && strategy.tpMode != cost::TensorMode::OneD) {
    // Not silently a data-parallel build: the grid's ranks are the user's
    // to give, or the search's (--emit=plan --strategy tp_mode=..., then
    // --plan).
    printError(std::string("--strategy: tp_mode=") + cost::nameOf(strategy.tpMode) +
               " needs its tensor ranks (tp=4 for a 2 x 2 grid, tp=8 for 2.5D's two layers of one or a 2 x 2 x 2 "
               "cube); or let the search choose them: --emit=plan --strategy tp_mode=" +
               cost::nameOf(strategy.tpMode) + " -o PLAN.json, then -o DIR --plan PLAN.json");
    return false;
  }
  if (strategy.tp > 1) {
    bool layered = strategy.tpMode == cost::TensorMode::TwoPointFiveD;
    bool cube = strategy.tpMode == cost::TensorMode::ThreeD;
    if (strategy.tpMode != cost::TensorMode::OneD) {
      std::string mode = cube ? "3d" : layered ? "2.5d" : "2d";
      if (strategy.sp > 1 || strategy.spMode != SequenceMode::None) {
        printError("--strategy: tp=" + std::to_string(strategy.tp) + ",tp_mode=" + mode +
                   " runs alone on the model axes; a sequence split beside the grid is not built yet");
        return false;
      }
      layout.tensorGrid = true;
      layout.tensorGridDepth = layered ? strategy.tpDepth : 1;
      layout.tensorCube = cube;
    }
    layout.tensorRanks = strategy.tp;
    strategy.tpMode = cost::TensorMode::OneD;
    strategy.tp = 1;
    if (strategy.spMode == SequenceMode::Megatron && strategy.sp == 1) {
      layout.sequenceParallel = true;
      strategy.spMode = SequenceMode::None;
    }
  }
  if (strategy.sp > 1 && (strategy.spMode == SequenceMode::AllToAll || strategy.spMode == SequenceMode::Ring)) {
    layout.sequenceAxis = strategy.spMode == SequenceMode::Ring ? partition::SequenceAlgorithm::Ring
                                                                : partition::SequenceAlgorithm::AllToAll;
    layout.sequenceRanks = strategy.sp;
    strategy.sp = 1;
    strategy.spMode = SequenceMode::None;
  }
  return true;
}

/// Moves the strategy's pipeline (pp, schedule, virtual stages, stage
/// layers) into `layout`, as takeModelAxis does the model axis.
bool takePipeline(cost::Strategy &strategy, BuildLayout &layout) {
  if (strategy.pp == 1)
    return true;
  if (strategy.zero > 1) {
    // As DeepSpeed: each stage accumulates its gradients over the
    // microbatches, which ZeRO-2 would reduce-scatter per microbatch and
    // ZeRO-3 gather weights for per call.
    printError("--strategy: pp=" + std::to_string(strategy.pp) +
               " runs with zero=1, not zero=" + std::to_string(strategy.zero) +
               " (ZeRO-2 and 3 would reduce gradients and gather weights once per microbatch of every stage)");
    return false;
  }
  layout.pipelineRanks = strategy.pp, layout.virtualStages = strategy.virtualStages;
  layout.schedule = strategy.schedule, layout.stageLayers = strategy.stageLayers;
  strategy.pp = 1, strategy.virtualStages = 1, strategy.schedule = cost::Schedule::OneFOneB;
  strategy.stageLayers.clear();
  return true;
}

/// The ranks of one data-parallel replica: the model axis's times the
/// pipeline's.
int64_t replicaRanks(const BuildLayout &layout) { return layout.modelRanks() * layout.pipelineRanks; }

std::string axisText(const BuildLayout &layout) {
  std::string text;
  auto add = [&](const char *axis, int64_t ranks) {
    if (ranks > 1)
      text += (text.empty() ? "" : " x ") + std::string(axis) + "=" + std::to_string(ranks);
  };
  add("tp", layout.tensorRanks);
  add("sp", layout.sequenceRanks);
  add("pp", layout.pipelineRanks);
  return text;
}

/// The data-parallel ranks and microbatches: the strategy's where it names
/// them (a plan always does), else --gpus over the model axis and
/// --microbatches; a flag that contradicts the strategy is an error.
bool takeRanks(const Request &request, const cost::Strategy &strategy, const std::set<std::string> &keys,
               BuildLayout &layout) {
  bool fromPlan = !request.planFile.empty();
  const char *source = fromPlan ? "plan" : "strategy";
  if (fromPlan || keys.count("dp")) {
    if (request.gpusGiven && request.gpus != strategy.dp * replicaRanks(layout)) {
      printError("--gpus " + std::to_string(request.gpus) + " but the " + source + " has dp=" +
                 std::to_string(strategy.dp) + (replicaRanks(layout) > 1 ? " x " + axisText(layout) : std::string()));
      return false;
    }
    layout.ranks = strategy.dp;
  } else if (replicaRanks(layout) > 1) {
    // The GPUs the model and pipeline axes leave are data-parallel ranks.
    if (request.gpusGiven && request.gpus % replicaRanks(layout) != 0) {
      printError("--gpus " + std::to_string(request.gpus) + " does not divide into " + axisText(layout));
      return false;
    }
    layout.ranks = request.gpusGiven ? request.gpus / replicaRanks(layout) : 1;
  }
  if (fromPlan || keys.count("microbatches")) {
    if (request.microbatchesGiven && request.microbatches != strategy.microbatches) {
      printError("--microbatches " + std::to_string(request.microbatches) + " but the " + source +
                 " has microbatches=" + std::to_string(strategy.microbatches));
      return false;
    }
    layout.microbatches = strategy.microbatches;
  }
  return true;
}

/// Says which keys that matter for this build --strategy left at their
/// defaults: --emit=plan with the same --strategy searches them, so its
/// prediction can be another plan than the one built.
void noteDefaultedKeys(const std::set<std::string> &keys, const BuildLayout &layout) {
  std::string defaulted;
  auto add = [&](bool matters, const char *key, const char *value) {
    if (matters && !keys.count(key))
      defaulted += std::string(defaulted.empty() ? "" : ", ") + key + "=" + value;
  };
  add(layout.tensorRanks > 1 && !layout.tensorGrid, "sp_mode", "none");
  add(layout.pipelineRanks > 1, "schedule", "1f1b");
  add(layout.ranks > 1, "zero", "0");
  if (!defaulted.empty())
    llvm::errs() << "colossal-compile: building with " << defaulted
                 << " (left out of --strategy; --emit=plan --strategy searches what it leaves out)\n";
}

bool takeStrategy(const Request &request, const std::string &text, BuildLayout &layout) {
  std::string error;
  std::set<std::string> keys;
  bool fromPlan = !request.planFile.empty();
  std::optional<cost::Strategy> strategy =
      fromPlan ? readExecutablePlan(request.planFile, error) : cost::Strategy::parse(text, error, &keys);
  if (strategy && (!takeModelAxis(*strategy, layout) || !takePipeline(*strategy, layout)))
    return false;
  if (strategy && !fromPlan) {
    if (std::string lacks = partitionerLacks(*strategy); !lacks.empty()) {
      error = "the partitioner runs data parallelism, 1D tensor parallelism "
              "(tp=N, with Megatron's sequence "
              "parallelism: sp_mode=megatron), 2D, 2.5D and 3D grids (tp_mode=2d|2.5d|3d), sequence "
              "parallelism on its own "
              "axis (sp=N,sp_mode=all-to-all|ring, alone or beside tp=N), pipelines (pp=N, "
              "schedule=gpipe|1f1b|interleaved), "
              "microbatches, ZeRO 1, 2 and 3, optimizer offload and "
              "recomputation (full or selective) only; "
              "--strategy asks for " +
              lacks;
      if (strategy->spMode == SequenceMode::Megatron && strategy->tp == 1 && layout.tensorRanks == 1)
        error += " (sp_mode=megatron splits the tokens over the tensor axis: "
                 "add tp=N)";
      strategy.reset();
    }
  }
  if (!strategy) {
    printError((fromPlan ? "--plan " : "--strategy: ") + error);
    return false;
  }
  if (!takeRanks(request, *strategy, keys, layout))
    return false;
  if (!fromPlan && !request.quiet)
    noteDefaultedKeys(keys, layout);
  layout.zero = strategy->zero;
  layout.offloadOptimizer = strategy->offloadOptimizer;
  layout.recompute = strategy->recompute == cost::Recompute::Full        ? "full"
                     : strategy->recompute == cost::Recompute::Selective ? "selective"
                                                                         : "none";
  if (layout.offloadOptimizer && layout.zero == 0 && layout.ranks > 1) {
    // Each rank offloads its ZeRO shard; replicated state would be updated
    // N times on N hosts.
    printError("--strategy: optimizer offload on " + std::to_string(layout.ranks) +
               " ranks moves each rank's ZeRO shard of the optimizer to its "
               "host; add zero=1, 2 or 3");
    return false;
  }
  return true;
}

} // namespace

std::optional<BuildLayout> resolveBuildLayout(const Request &request, const std::string &strategy) {
  BuildLayout layout;
  layout.ranks = request.gpus;
  layout.microbatches = request.microbatches;
  if ((!request.planFile.empty() || !strategy.empty()) && !takeStrategy(request, strategy, layout))
    return std::nullopt;
  if (layout.pipelineRanks > 1) {
    // The trainer's own rules for a schedule's shape: what it would refuse
    // is refused here, before anything is built.
    rt::PipelineShape shape{*rt::pipelineScheduleNamed(cost::nameOf(layout.schedule)), int(layout.pipelineRanks),
                            int(layout.virtualStages), int(layout.microbatches)};
    if (std::string error = rt::pipelineShapeError(shape); !error.empty()) {
      printError("--strategy: " + error);
      return std::nullopt;
    }
  }
  if (request.batch) {
    int64_t batch = *request.batch;
    if (batch % (layout.microbatches * layout.ranks) != 0) {
      printError("--batch " + std::to_string(batch) + " does not divide into " + std::to_string(layout.ranks) +
                 " rank(s) x " + std::to_string(layout.microbatches) + " microbatch(es)");
      return std::nullopt;
    }
    // The step is compiled for one microbatch of one rank; each of the N
    // data-parallel ranks runs M of them.
    layout.stepBatch = batch / (layout.microbatches * layout.ranks);
  }
  return layout;
}

cost::Strategy strategyOf(const BuildLayout &layout) {
  cost::Strategy s;
  s.dp = int(layout.ranks), s.microbatches = int(layout.microbatches);
  s.tp = int(layout.tensorRanks);
  s.tpMode = !layout.tensorGrid           ? cost::TensorMode::OneD
             : layout.tensorCube          ? cost::TensorMode::ThreeD
             : layout.tensorGridDepth > 1 ? cost::TensorMode::TwoPointFiveD
                                          : cost::TensorMode::TwoD;
  s.tpDepth = s.tpMode == cost::TensorMode::TwoPointFiveD ? int(layout.tensorGridDepth) : 1;
  s.spMode = layout.sequenceParallel ? SequenceMode::Megatron : SequenceMode::None;
  if (layout.sequenceAxis) {
    s.sp = int(layout.sequenceRanks);
    s.spMode = *layout.sequenceAxis == partition::SequenceAlgorithm::Ring ? SequenceMode::Ring : SequenceMode::AllToAll;
  }
  s.pp = int(layout.pipelineRanks), s.virtualStages = int(layout.virtualStages);
  s.schedule = layout.schedule, s.stageLayers = layout.stageLayers;
  s.zero = int(layout.zero), s.offloadOptimizer = layout.offloadOptimizer;
  s.recompute = layout.recompute == "full"        ? cost::Recompute::Full
                : layout.recompute == "selective" ? cost::Recompute::Selective
                                                  : cost::Recompute::None;
  return s;
}

void fillPipelineOptions(const Request &request, const BuildLayout &layout,
                         pipeline::TrainingPipelineOptions &options) {
  options.strategy = strategyOf(layout).str();
  options.cluster = request.cluster;
  options.precision = request.precision;
  options.optimizer = request.optimizer;
  options.beta1 = request.beta1, options.beta2 = request.beta2, options.eps = request.eps;
  options.weightDecay = request.weightDecay, options.momentum = request.momentum;
  options.nesterov = request.nesterov;
  options.report = !request.quiet;
}

} // namespace colossal::driver
