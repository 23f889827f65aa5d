//===- BuildLayout.h - what the program is built for ---------------*- C++
//-*-===//
//
// A strategy (--strategy, a plan file, or the search's choice) says how the
// step is split; the partitioner runs part of what the planner plans. This
// resolves the strategy and --gpus/--microbatches/--batch into what the
// build runs: the data-parallel ranks, the model axis (tensor or sequence,
// with Megatron-SP), microbatches, ZeRO, offload and recomputation, and
// refuses, naming it, what the partitioner cannot build or what the flags
// contradict.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TOOLS_COLOSSAL_COMPILE_BUILDLAYOUT_H
#define COLOSSAL_TOOLS_COLOSSAL_COMPILE_BUILDLAYOUT_H

#include "Flags.h"
#include "colossal/cost/Plan.h"
#include "passes/partition/SequenceAxisParallel.h"
#include "passes/pipeline/TrainingPipeline.h"

#include <optional>
#include <string>

namespace colossal::driver {

struct BuildLayout {
  /// Data-parallel ranks, microbatches per rank and step.
  int64_t ranks = 1, microbatches = 1;
  /// Ranks of the model axes: tensor (`tp`) and sequence (`sp`, with
  /// `sequenceAxis`'s algorithm; the two may be held together).
  int64_t tensorRanks = 1, sequenceRanks = 1;
  /// Megatron's sequence parallelism on the tensor axis.
  bool sequenceParallel = false;
  /// The tensor ranks as a square grid (2D, SUMMA) instead of 1D, in
  /// `tensorGridDepth` layers (2.5D) when more than one.
  bool tensorGrid = false;
  int64_t tensorGridDepth = 1;
  /// 3D: the tensor ranks as a cube.
  bool tensorCube = false;
  std::optional<partition::SequenceAlgorithm> sequenceAxis;

  /// The model axes' ranks together.
  int64_t modelRanks() const { return tensorRanks * sequenceRanks; }
  /// Pipeline parallelism: ranks of the pipeline axis, model chunks per
  /// rank, the schedule and the layers of each virtual stage (empty: equal
  /// shares).
  int64_t pipelineRanks = 1, virtualStages = 1;
  cost::Schedule schedule = cost::Schedule::OneFOneB;
  std::vector<int64_t> stageLayers;
  int64_t zero = 0;
  bool offloadOptimizer = false;
  /// "none", "selective" or "full".
  std::string recompute = "none";
  /// The batch one rank's microbatch computes (the compiled step's), if
  /// --batch was given.
  std::optional<int64_t> stepBatch;
};

/// The layout of `strategy` (a --strategy text, possibly the search's
/// choice) or of the plan file of `request`; prints why and returns nullopt
/// when it cannot be built.
std::optional<BuildLayout> resolveBuildLayout(const Request &request, const std::string &strategy);

/// The plan the build runs (written on the module by dist-apply-plan).
cost::Strategy strategyOf(const BuildLayout &layout);

/// The pipeline options of `request` built as `layout`.
void fillPipelineOptions(const Request &request, const BuildLayout &layout, pipeline::TrainingPipelineOptions &options);

} // namespace colossal::driver

#endif // COLOSSAL_TOOLS_COLOSSAL_COMPILE_BUILDLAYOUT_H
