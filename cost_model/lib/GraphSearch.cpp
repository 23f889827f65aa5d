//===- GraphSearch.cpp - finding the plan for an imported model -----------===//

#include "colossal/cost/GraphSearch.h"
#include "colossal/cost/ShardingSolver.h"
#include "SearchBounds.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

namespace colossal::cost {
namespace {

std::string gibText(double bytes) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / double(1ull << 30));
  return buffer;
}

/// The fixed parts this search cannot honour, as a reason; empty if none.
std::string unsupportedFixedParts(const SearchOptions &o) {
  if (!o.fixedKeys.count("stage_layers") || o.fixed.stageLayers.empty())
    return "";
  return "the strategy fixes stage_layers; plans for an imported model search data, tensor (1D and the 2D, 2.5D "
         "and 3D grids), sequence (Megatron's, all-to-all, ring) and pipeline parallelism (equal stages), "
         "microbatches, ZeRO, offload and recomputation";
}

bool fixedMismatch(const SearchOptions &o, const char *key, bool differs) {
  return o.fixedKeys.count(key) && differs;
}

/// The trainable parameter elements of the smallest layer: what every layer
/// a pipeline rank holds adds to its model states at least.
double leastLayerTrainable(const Graph &graph) {
  std::vector<int64_t> layers = graph.layerTrainableElements();
  return layers.empty() ? 0 : double(*std::min_element(layers.begin(), layers.end()));
}

/// Whether the sharding solver places `axis`'s tensor ranks: the tensor
/// axis alone, or beside an all-to-all sequence axis whose tokens the
/// partitioner's split shows. Megatron's and the ring's sequence
/// parallelism are algorithms the solver's objective lacks; grids are
/// priced by their own.
bool solvable(const ModelAxis &axis, const ModelAxisSplit *split) {
  if (axis.onGrid())
    return false;
  return axis.mode == SequenceMode::None ||
         (axis.mode == SequenceMode::AllToAll && axis.tensor > 1 && split && split->sharding);
}

/// The solver's placement of the tensor axis on `graph`, on top of the
/// sequence axis as the partitioner's split cuts the tokens (the heads
/// inside attention). Both axes could be placed together (solveSharding
/// over two axes), but on GPT shapes the joint frontier made the whole
/// search 4 to 7 times slower (a 1.7B model's plan for 32 GPUs 0.7 -> 4.7 s,
/// 1T on 3072 GPUs 11 -> 28 s) for plans that are priced, not built.
/// Nullopt where the solver refuses, its reason in `why` when given.
std::optional<GraphSharding> solveModelAxes(const Graph &graph, const Mesh &mesh, const ModelAxisSplit *split,
                                            const Cluster &cluster, std::string *why, const std::string &plan) {
  GraphSharding sharding = replicatedSharding(graph);
  int tp = mesh.axisIndex("tp"), sp = mesh.axisIndex("sp");
  if (sp >= 0 && mesh.axes[size_t(sp)].size > 1 && split && split->sharding) {
    const GraphSharding &tokens = *split->sharding;
    for (size_t o = 0; o < sharding.size() && o < tokens.size(); ++o)
      for (size_t f = 0; f < sharding[o].size() && f < tokens[o].size(); ++f)
        if (std::find(tokens[o][f].begin(), tokens[o][f].end(), sp) != tokens[o][f].end())
          sharding[o][f].push_back(sp);
  }
  if (tp < 0 || mesh.axes[size_t(tp)].size <= 1)
    return sharding;
  std::string error;
  std::optional<ShardingSolution> solution = solveAxisSharding(graph, sharding, mesh, tp, cluster, error);
  if (!solution) {
    if (why)
      *why = plan + ": " + error;
    return std::nullopt;
  }
  return std::move(solution->sharding);
}

} // namespace

namespace {

/// Whether the fixed parts of the strategy allow the model axis.
bool admitsModelAxis(const SearchOptions &o, const ModelAxis &axis) {
  return !fixedMismatch(o, "tp", axis.tensor != o.fixed.tp) && !fixedMismatch(o, "sp", axis.sequence != o.fixed.sp) &&
         !fixedMismatch(o, "sp_mode", axis.mode != o.fixed.spMode) &&
         !fixedMismatch(o, "tp_mode", axis.grid != o.fixed.tpMode) &&
         !fixedMismatch(o, "tp_depth", axis.grid == TensorMode::TwoPointFiveD && axis.depth != o.fixed.tpDepth);
}

} // namespace

std::string ModelAxis::str() const {
  std::string text = "tp=" + std::to_string(tensor);
  if (onGrid())
    text += std::string(",tp_mode=") + nameOf(grid);
  if (grid == TensorMode::TwoPointFiveD)
    text += ",tp_depth=" + std::to_string(depth);
  if (ownSequenceAxis())
    text += ",sp=" + std::to_string(sequence);
  if (mode != SequenceMode::None)
    text += std::string(",sp_mode=") + nameOf(mode);
  return text;
}

void ModelAxis::applyTo(Strategy &strategy) const {
  strategy.tp = tensor;
  strategy.tpMode = grid;
  strategy.tpDepth = depth;
  strategy.sp = sequence;
  strategy.spMode = mode;
}

std::vector<ModelAxis> modelAxesOf(int ranks) {
  std::vector<ModelAxis> axes{{ranks, 1, SequenceMode::None}};
  if (ranks == 1)
    return axes;
  axes.push_back({ranks, 1, SequenceMode::Megatron});
  for (int tensor = 1; tensor < ranks; ++tensor)
    if (ranks % tensor == 0)
      for (SequenceMode mode : {SequenceMode::AllToAll, SequenceMode::Ring})
        axes.push_back({tensor, ranks / tensor, mode});
  for (int q = 2; q * q <= ranks; ++q) {
    if (q * q == ranks)
      axes.push_back({ranks, 1, SequenceMode::None, TensorMode::TwoD, 1});
    if (ranks % (q * q) == 0 && ranks / (q * q) >= 2)
      axes.push_back({ranks, 1, SequenceMode::None, TensorMode::TwoPointFiveD, ranks / (q * q)});
    if (q * q * q == ranks)
      axes.push_back({ranks, 1, SequenceMode::None, TensorMode::ThreeD, 1});
  }
  return axes;
}

std::vector<ModelAxis> modelAxesToSplit(const SearchOptions &options, const Cluster &cluster) {
  std::vector<ModelAxis> axes;
  const int n = options.devices;
  for (int ranks = 2; ranks <= n && ranks <= cluster.gpusPerNode; ++ranks)
    if (n % ranks == 0)
      for (const ModelAxis &axis : modelAxesOf(ranks))
        if (admitsModelAxis(options, axis))
          axes.push_back(axis);
  return axes;
}

EstimateOptions evaluationOf(const Strategy &strategy, Placement placement, ProgramTarget target) {
  EstimateOptions options;
  if (placement == Placement::Partitioner && strategy.tp * strategy.sp > 1 && strategy.tpMode == TensorMode::OneD) {
    options.layouts = SplitLayouts::Built;
    options.recomputeCollectives = false;
  }
  // Every plan of a model file is one the emitted program would run (the
  // solver's placements too, were they built): its trainer sets the overlap.
  bool stepMakesNone = strategy.tp * strategy.sp * strategy.pp == 1;
  options.overlapGradientBuckets = stepMakesNone && target == ProgramTarget::Host;
  options.prefetchGathers = stepMakesNone;
  return options;
}

std::vector<size_t> factorStructure(const Graph &graph) {
  std::vector<size_t> factors;
  for (const Op &op : graph.ops)
    factors.push_back(op.factors.size());
  return factors;
}

SearchResult searchGraphPlans(const GraphAtMicrobatch &graphAt, const Cluster &cluster,
                              const SearchOptions &options) {
  auto start = std::chrono::steady_clock::now(), lastProgress = start;
  const SearchOptions &o = options;
  const int n = o.devices;
  SearchResult result;
  if (n < 1 || cluster.devices() < n) {
    result.infeasible = "the cluster has " + std::to_string(cluster.devices()) +
                        " devices; the search was asked for " + std::to_string(n);
    return result;
  }
  if (std::string reason = unsupportedFixedParts(o); !reason.empty()) {
    result.infeasible = reason;
    return result;
  }
  std::map<int64_t, std::optional<SearchGraph>> graphs;
  std::map<int64_t, std::string> graphErrors;
  auto graphFor = [&](int64_t b) -> const SearchGraph * {
    auto it = graphs.find(b);
    if (it == graphs.end()) {
      std::string error;
      it = graphs.emplace(b, graphAt(b, error)).first;
      if (!it->second)
        graphErrors[b] = error;
    }
    return it->second ? &*it->second : nullptr;
  };
  std::string firstInvalid;
  auto bestBuildableTime = [&] {
    return result.bestBuildable ? result.bestBuildable->estimate.stepTime : std::numeric_limits<double>::infinity();
  };
  auto kthBest = [&] {
    return int(result.best.size()) < o.keep ? std::numeric_limits<double>::infinity()
                                            : result.best.back().estimate.stepTime;
  };
  // The model axes' placement depends on the graph (the microbatch) and
  // the axes alone: solved once per pair.
  std::map<std::pair<int64_t, ModelAxis>, std::optional<GraphSharding>> solved;
  bool layersMissing = false;
  // Per microbatch size, tensor or sequence split, placement and
  // recomputation: what the evaluated plans measured per layer, which
  // bounds the deeper pipelines' time and memory before they are simulated
  // (SearchBounds.h).
  std::map<std::tuple<int64_t, ModelAxis, int, int>, MeasuredLayers> measured;
  std::map<int64_t, double> layerTrainable;
  // `tp` is the model axes' ranks: tensor x sequence.
  for (int tp = 1; tp <= n && tp <= cluster.gpusPerNode; ++tp) {
    if (n % tp != 0)
      continue;
    for (int pp = 1; pp <= n / tp; ++pp) {
      if ((n / tp) % pp != 0 || fixedMismatch(o, "pp", pp != o.fixed.pp))
        continue;
      int dp = n / (tp * pp);
      if (fixedMismatch(o, "dp", dp != o.fixed.dp))
        continue;
      if (o.globalBatch % dp != 0) {
        ++result.invalid;
        continue;
      }
      int64_t perReplica = o.globalBatch / dp;
      for (int64_t b = 1; b <= perReplica && b <= 16; b *= 2) {
        if (perReplica % b != 0)
          continue;
        int m = int(perReplica / b);
        if (fixedMismatch(o, "microbatches", m != o.fixed.microbatches))
          continue;
        const SearchGraph *given = graphFor(b);
        const Graph *graph = given ? &given->graph : nullptr;
        if (!graph) {
          ++result.invalid;
          if (firstInvalid.empty())
            firstInvalid = "microbatch size " + std::to_string(b) + ": " + graphErrors[b];
          continue;
        }
        // Pipelines and recomputation need layers; stages split them equally.
        int layers = graph->numLayers;
        if (pp > 1 && (layers == 0 || layers % pp != 0)) {
          layersMissing |= layers == 0;
          continue;
        }
        bool selective = std::any_of(graph->ops.begin(), graph->ops.end(),
                                     [](const Op &op) { return op.recomputedWhenSelective; });
        // The model axis: tensor parallelism (1D, or with Megatron's
        // sequence parallelism on it), or sequence parallelism on its own
        // axis (all-to-all, ring), alone or beside a tensor axis; only the
        // partitioner places the ones with sequence parallelism.
        const std::map<ModelAxis, ModelAxisSplit> &splits = given->partitionerSplits;
        std::vector<ModelAxis> axes{{tp, 1, SequenceMode::None}};
        if (tp > 1 && !splits.empty())
          axes = modelAxesOf(tp);
        for (const ModelAxis &axis : axes) {
          SequenceMode mode = axis.mode;
          Strategy s;
          s.dp = dp;
          axis.applyTo(s);
          s.pp = pp;
          s.microbatches = m;
          if (!admitsModelAxis(o, axis))
            continue;
          Mesh mesh = buildMesh(s, cluster);
          auto key = std::make_pair(b, axis);
          const ModelAxisSplit *split = nullptr;
          if (auto found = splits.find(axis); found != splits.end())
            split = &found->second;
          if (!solved.count(key) && solvable(axis, split))
            solved[key] =
                solveModelAxes(*graph, mesh, split, cluster, firstInvalid.empty() ? &firstInvalid : nullptr, s.str());
          // The placements to evaluate: the solver's, and the partitioner's
          // split where it can make one.
          std::vector<std::pair<const GraphSharding *, Placement>> placements;
          auto solution = solved.find(key);
          if (tp == 1) {
            placements.push_back({&*solution->second, Placement::Partitioner});
          } else {
            if (solution != solved.end() && solution->second && !o.partitionerPlacementOnly)
              placements.push_back({&*solution->second, Placement::Solver});
            if (split) {
              if (!split->sharding && firstInvalid.empty())
                firstInvalid = s.str() + ": " + split->error;
              // A grid the partitioner builds is priced by the estimator's
              // grid algorithms (no explicit sharding).
              if (split->sharding)
                placements.push_back({axis.onGrid() ? nullptr : &*split->sharding, Placement::Partitioner});
            }
          }
          if (placements.empty()) {
            ++result.invalid;
            continue;
          }
          for (auto [placed, placement] : placements) {
            EstimateOptions options = evaluationOf(s, placement, o.target);
            options.recordPipelineTasks = false;
            std::vector<std::pair<Schedule, int>> schedules{{Schedule::OneFOneB, 1}};
            if (pp > 1 && layers % (2 * pp) == 0 && m % pp == 0)
              schedules.push_back({Schedule::Interleaved, 2});
            std::vector<Recompute> recomputes{Recompute::None};
            if (layers > 0) {
              if (selective)
                recomputes.push_back(Recompute::Selective);
              recomputes.push_back(Recompute::Full);
            } else if (fixedMismatch(o, "recompute", o.fixed.recompute != Recompute::None)) {
              layersMissing = true;
            }
            for (auto [schedule, chunks] : schedules) {
              if (pp > 1 && fixedMismatch(o, "schedule", schedule != o.fixed.schedule))
                continue;
              for (Recompute recompute : recomputes) {
                if (fixedMismatch(o, "recompute", recompute != o.fixed.recompute))
                  continue;
                // ZeRO and offload only add to the step after the pipeline
                // (as in Search.h): once one variant is evaluated, the others
                // cannot beat the k-th best plan if its pipeline does not.
                double groupPipeline = -1;
                // The variants share all but their model states.
                EstimateReuse reuse;
                for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
                  if (fixedMismatch(o, "zero", zero != o.fixed.zero))
                    continue;
                  for (bool offload : {false, true}) {
                    if (fixedMismatch(o, "offload", offload != o.fixed.offloadOptimizer) ||
                        (offload && zero == 0 && !o.fixedKeys.count("offload")))
                      continue;
                    s.schedule = schedule;
                    s.virtualStages = chunks;
                    s.recompute = recompute;
                    s.zero = zero;
                    s.offloadOptimizer = offload;
                    if (o.admit && !o.admit(s))
                      continue;
                    ++result.candidates;
                    bool buildable = o.buildable && o.buildable(s, placement);
                    if (!o.exhaustive && groupPipeline >= 0 && groupPipeline >= kthBest() &&
                        !(buildable && groupPipeline < bestBuildableTime())) {
                      ++result.prunedByTime;
                      continue;
                    }
                    MeasuredLayers &layer = measured[std::make_tuple(b, axis, int(placement), int(recompute))];
                    if (!o.exhaustive && layer.known() && layers > 0) {
                      double time = pipelineLowerBound(s, layer.work(layers), layer.busiestRank(layers, pp));
                      if (time >= kthBest() && !(buildable && time < bestBuildableTime())) {
                        ++result.prunedByTime;
                        continue;
                      }
                      if (!layerTrainable.count(b))
                        layerTrainable[b] = leastLayerTrainable(*graph);
                      std::vector<int64_t> split(size_t(pp * chunks), layers / (pp * chunks));
                      double memory = splitMemoryLowerBound(s, split, layer.keptBytes, layerTrainable[b]);
                      // Unless nothing fits yet and this could be the
                      // closest miss the report names.
                      if (memory > cluster.memoryBytes &&
                          (!result.best.empty() ||
                           (result.leastMemory && memory >= result.leastMemory->estimate.memory.total()))) {
                        ++result.prunedByMemory;
                        continue;
                      }
                    }
                    std::string error;
                    std::optional<Estimate> e = estimate(*graph, s, cluster, error, placed, options, &reuse);
                    if (!e) {
                      ++result.invalid;
                      if (firstInvalid.empty())
                        firstInvalid = s.str() + ": " + error;
                      continue;
                    }
                    ++result.evaluated;
                    layer.learn(*e);
                    groupPipeline = e->pipeline.makespan;
                    SearchCandidate candidate{s, b, std::move(*e), GraphSharding{}, placement};
                    bool bestBuildable =
                        buildable && candidate.estimate.fits() && candidate.estimate.stepTime < bestBuildableTime();
                    // The per-op shardings (a graph's size) only where kept.
                    if (tp > 1 && placed && (bestBuildable || wouldKeep(result, candidate.estimate, o.keep)))
                      candidate.sharding = *placed;
                    if (bestBuildable)
                      result.bestBuildable = candidate;
                    keepCandidate(result, std::move(candidate), o.keep);
                    if (o.progress &&
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - lastProgress).count() >= 1) {
                      lastProgress = std::chrono::steady_clock::now();
                      o.progress(result.evaluated, result.candidates);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result.best.empty()) {
    if (result.leastMemory) {
      const Estimate &e = result.leastMemory->estimate;
      result.infeasible =
          "no plan fits in " + gibText(cluster.memoryBytes) + " per device; the smallest found needs " +
          gibText(e.memory.total()) + " (" + result.leastMemory->strategy.str() + ", microbatch size " +
          std::to_string(result.leastMemory->microbatchSize) + "): activations " + gibText(e.memory.activations) +
          ", model states " + gibText(e.memory.parameters + e.memory.gradients + e.memory.optimizer) + ". About " +
          std::to_string(int64_t(std::ceil(n * e.memory.total() / cluster.memoryBytes))) +
          " devices would hold it; or allow ZeRO-3 and offload, or a smaller global batch";
    } else if (!firstInvalid.empty()) {
      result.infeasible = "none of the candidate plans can run; for example " + firstInvalid;
    } else {
      result.infeasible = std::string(layersMissing ? "no repeated layers were found in the model, so it has no "
                                                      "pipeline or recomputation plans; " : "") +
                          "no candidate plan for " + std::to_string(n) + " devices and a global batch of " +
                          std::to_string(o.globalBatch) +
                          " matches the fixed parts (dp x tp x pp must equal the devices, tp at most " +
                          std::to_string(cluster.gpusPerNode) +
                          " (one node), pp dividing the layers, and the batch dividing over the data-parallel replicas)";
    }
  }
  return result;
}

} // namespace colossal::cost
