//===- Search.h - finding the plan for a number of devices ----------*- C++ -*-===//
//
// Enumerates strategies for N devices: every factorisation of N into data,
// pipeline, tensor (1D up to a node, or a 2D / 2.5D / 3D grid) and sequence
// parallelism (Megatron on the tensor axis, all-to-all or ring on their own
// axis), every power-of-two microbatch size dividing the per-replica batch,
// the pipeline schedule (1F1B; interleaved with two chunks where the layers
// allow), and the memory options (ZeRO stage, optimizer offload,
// recomputation). The cost model evaluates each candidate; the fastest plan
// that fits in device memory wins.
//
// Pruning never changes the answer:
// - memory: a candidate whose model states alone (ZeRO formula, no
//   activations) exceed the device is skipped unevaluated;
// - time: a candidate is skipped when a lower bound on its step time (an
//   equal share of the replica's model FLOPs on each model-parallel rank at
//   the best GEMM rate) is no better than the k-th best plan kept; and ZeRO
//   and offload only add to the step after the pipeline, so once one variant
//   of a (mesh, microbatch, schedule, recomputation) group has been
//   evaluated, the group's other variants are skipped when that pipeline
//   time alone is no better than the k-th best plan kept.
// `exhaustive` turns pruning off; a test checks both give the same plans.
//
// Candidates are evaluated on condensed graphs (TransformerBuilder.h), and
// 1F1B pipelines both with an equal split and with the split balanceStages
// derives from the first evaluation's stage times.
//
// Limits: per-op shardings come from the strategy templates (Plan.h), not a
// per-op solver; interleaved pipelines use equal splits.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_SEARCH_H
#define COLOSSAL_COST_SEARCH_H

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace colossal::cost {

/// Which emitted program a model file's plans are priced as: the
/// host step hands each gradient to the trainer as its backward pass makes
/// it, so the trainer reduces buckets (and prefetches ZeRO-3's gathers) on
/// a second thread meanwhile, unless the step makes collectives of its own
/// (a tensor, sequence, grid or pipeline axis: one thread talks at a time);
/// the CUDA step hands them over at its end (gathers still prefetched).
enum class ProgramTarget { Host, Cuda };

/// How a plan's tensor axis is placed on the ops.
enum class Placement {
  /// The sharding solver's choice (ShardingSolver.h), or the strategy's
  /// templates: the cost model's optimum, not necessarily buildable.
  Solver,
  /// As the partitioner splits the model (Megatron's column-then-row pairs,
  /// heads, the vocabulary): what `-o DIR` builds.
  Partitioner,
};

struct SearchOptions {
  int devices = 1;
  /// Samples per optimizer step, over all data-parallel replicas.
  int64_t globalBatch = 1;
  /// Parts of the strategy the user fixed ("dp", "tp", "pp", "sp", "tp_mode",
  /// "sp_mode", "microbatches", "schedule", "zero", "offload", "recompute"),
  /// taken from `fixed`.
  Strategy fixed;
  std::set<std::string> fixedKeys;
  /// Turn pruning off (tests compare both).
  bool exhaustive = false;
  /// How many plans to keep: the winner and its closest alternatives.
  int keep = 6;
  /// When set, only strategies it admits are candidates (the imported-model
  /// search; for example, what the partitioner can build today).
  std::function<bool(const Strategy &)> admit;
  /// Called about once a second while the search runs.
  std::function<void(int64_t evaluated, int64_t candidates)> progress;
  /// Only tensor axes placed as the partitioner splits the model: the plans
  /// `-o DIR` can build.
  bool partitionerPlacementOnly = false;
  /// The imported-model search: which plans can be built; the fastest of
  /// them that fits is kept apart (SearchResult::bestBuildable), and
  /// pruning spares the candidates that could still beat it.
  std::function<bool(const Strategy &, Placement)> buildable;
  /// The program the partitioner's plans are priced as.
  ProgramTarget target = ProgramTarget::Host;
};


struct SearchCandidate {
  Strategy strategy;
  int64_t microbatchSize = 1;
  Estimate estimate;
  /// Per-op shardings the plan was evaluated with; empty when they come
  /// from the strategy's templates.
  GraphSharding sharding;
  Placement placement = Placement::Solver;
};

struct SearchResult {
  /// Fastest plans that fit, best first.
  std::vector<SearchCandidate> best;
  int64_t candidates = 0, evaluated = 0, prunedByTime = 0, prunedByMemory = 0, invalid = 0;
  double seconds = 0;
  /// The plan with the smallest per-rank memory seen (for the infeasible report).
  std::optional<SearchCandidate> leastMemory;
  /// The fastest plan that fits and SearchOptions::buildable admits.
  std::optional<SearchCandidate> bestBuildable;
  /// When nothing fits: why, and what would.
  std::string infeasible;
};

/// Searches plans for `shape` (its microbatch is chosen by the search) on
/// `cluster`, which must have at least `options.devices` devices.
SearchResult searchPlans(const TransformerShape &shape, const Cluster &cluster,
                         const SearchOptions &options);

/// Keeps `candidate` among the `keep` fastest plans that fit (best first),
/// or as the plan with the least memory when it does not fit.
void keepCandidate(SearchResult &result, SearchCandidate candidate, int keep);
/// Whether keepCandidate would keep a candidate of estimate `e`: a search
/// copies a plan's per-op shardings only into the candidates it keeps.
bool wouldKeep(const SearchResult &result, const Estimate &e, int keep);

/// Why `candidate` is slower than `winner`, in one line ("+12% step time:
/// exposed communication 0.8 s more, bubble 0.1 s less").
std::string explainLoss(const SearchCandidate &candidate, const SearchCandidate &winner);

} // namespace colossal::cost

#endif // COLOSSAL_COST_SEARCH_H
