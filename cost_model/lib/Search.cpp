//===- Search.cpp - finding the plan for a number of devices --------------===//

#include "colossal/cost/Search.h"

#include "colossal/cost/StageBalance.h"
#include "SearchBounds.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace colossal::cost {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

struct TensorChoice {
  int tp;
  TensorMode mode;
  int depth;
};

std::vector<TensorChoice> tensorChoices(int devices, const Cluster &cluster) {
  std::vector<TensorChoice> out;
  // 1D tensor parallelism stays inside a node, on NVLink (Megatron's rule).
  for (int t : divisors(devices))
    if (t <= cluster.gpusPerNode)
      out.push_back({t, TensorMode::OneD, 1});
  constexpr int kMaxGrid = 64;
  for (int q = 2; q * q <= kMaxGrid; ++q) {
    if (devices % (q * q) == 0)
      out.push_back({q * q, TensorMode::TwoD, 1});
    if (2 * q * q <= kMaxGrid && devices % (2 * q * q) == 0)
      out.push_back({2 * q * q, TensorMode::TwoPointFiveD, 2});
    if (q * q * q <= kMaxGrid && devices % (q * q * q) == 0)
      out.push_back({q * q * q, TensorMode::ThreeD, q});
  }
  return out;
}

/// Model-state bytes on the rank that holds the most, without activations:
/// a lower bound on the plan's memory.
double modelStateLowerBound(double parameters, const Strategy &s) {
  double share = s.tp;
  if (s.tpMode == TensorMode::TwoPointFiveD)
    share = double(s.tp) / s.tpDepth;
  double local = parameters / (share * s.pp);
  ModelStateBytes states = zeroModelStates(local, s.dp, s.zero);
  return states.parameters + states.gradients + (s.offloadOptimizer ? 0 : states.optimizer);
}

/// A lower bound on the step time: the pipeline bound (SearchBounds.h) with
/// W at least the model FLOPs (plus the recomputed forward under full
/// recomputation) over the tensor and sequence ranks at the best GEMM rate,
/// or the measured work when that is larger; under ZeRO-2/3, plus the
/// reduce-scatters of the fewest layers' gradients a stage holds, which the
/// trainer makes after each microbatch with nothing to hide behind.
double computeLowerBound(const Graph &graph, const Strategy &s, const Cluster &cluster, double measuredWork,
                         double busiestRankWork, int64_t layers, double layerParameters) {
  double bestEfficiency = 1;
  if (!cluster.gemmEfficiency.empty() || !cluster.kernels.gemm.empty()) {
    bestEfficiency = 0;
    for (const CurvePoint &p : cluster.gemmEfficiency)
      bestEfficiency = std::max(bestEfficiency, p.value);
    for (const GemmShapePoint &p : cluster.kernels.gemm)
      bestEfficiency = std::max(bestEfficiency, p.efficiency);
  }
  // A fused attention kernel has its own rate (a causal one above 1 in the
  // whole matrix's FLOPs): the score and context products are bounded by
  // the best of it. A causal ring's busiest rank does at least half a
  // rank's share (KernelTime.cpp), hence twice the ring's rates.
  const KernelRates &k = cluster.kernels;
  double bestAttention = 0;
  for (const auto *curve :
       {&k.attentionForward, &k.attentionBackward, &k.causalAttentionForward, &k.causalAttentionBackward})
    for (const CurvePoint &p : *curve)
      bestAttention = std::max(bestAttention, p.value);
  for (const auto *curve : {&k.ringAttentionForward, &k.ringAttentionBackward})
    for (const CurvePoint &p : *curve)
      bestAttention = std::max(bestAttention, 2 * p.value);
  DType dtype = DType::BF16;
  for (const Value &v : graph.values)
    if (v.isParameter)
      dtype = v.dtype;
  // The model FLOPs (Graph::modelFlops), the attention products' apart.
  double otherFlops = 0, attentionFlops = 0;
  for (const Op &op : graph.ops)
    if (op.kind == OpKind::MatMul)
      (bestAttention > 0 && op.attentionCore ? attentionFlops : otherFlops) +=
          (op.forwardFlops + op.backwardFlops) * double(graph.repeatOf(op.layer));
  double scale = s.recompute == Recompute::Full ? 4.0 / 3.0 : 1.0;
  double peak = cluster.peak(dtype) * double(s.tp) * s.sp;
  double flopsTime = scale * (otherFlops / (peak * bestEfficiency) +
                              (bestAttention > 0 ? attentionFlops / (peak * bestAttention) : 0));
  double work = std::max(measuredWork, flopsTime);
  double bound = pipelineLowerBound(s, work, busiestRankWork);
  if (s.zero >= 2 && s.dp > 1) {
    double share = s.tpMode == TensorMode::TwoPointFiveD ? double(s.tp) / s.tpDepth : double(s.tp);
    double fewest = double(layers / (int64_t(s.pp) * s.virtualStages)) * s.virtualStages;
    Mesh mesh = buildMesh(s, cluster);
    if (const MeshAxis *dp = mesh.axis("dp"))
      bound += s.microbatches * collectiveTime(Collective::ReduceScatter,
                                               fewest * layerParameters / share * bytesOf(dtype), *dp, cluster);
  }
  return bound;
}

/// A count rounded up, as text, for any magnitude.
std::string whole(double x) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.0f", std::ceil(x));
  return buffer;
}

/// Bytes as GiB with one decimal.
std::string gibText(double bytes) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.1f GiB", bytes / double(1ull << 30));
  return buffer;
}

bool fixedMismatch(const SearchOptions &o, const char *key, bool differs) {
  return o.fixedKeys.count(key) && differs;
}

} // namespace

SearchResult searchPlans(const TransformerShape &shape, const Cluster &cluster,
                         const SearchOptions &options) {
  auto start = Clock::now(), lastProgress = start;
  SearchResult result;
  const int n = options.devices;
  const SearchOptions &o = options;
  if (n < 1 || cluster.devices() < n) {
    result.infeasible = "the cluster has " + std::to_string(cluster.devices()) +
                        " devices; the search was asked for " + std::to_string(n);
    return result;
  }
  // Condensed graphs (per stage, its first layer and one standing for the
  // rest) estimate exactly like the full model and cost the same whatever
  // its depth; one per (microbatch, stage split).
  // Graphs with the same stages (and the same stages holding one layer)
  // differ only in how many layers each condensed layer stands for, so one
  // graph per shape serves every split: its layerRepeat is set per use.
  std::map<std::pair<int64_t, std::vector<bool>>, Graph> graphs;
  auto graphFor = [&](int64_t microbatch, const std::vector<int64_t> &split) -> const Graph & {
    std::vector<bool> single;
    std::vector<int64_t> repeats;
    for (int64_t n : split) {
      single.push_back(n == 1);
      repeats.push_back(1);
      if (n > 1)
        repeats.push_back(n - 1);
    }
    auto key = std::make_pair(microbatch, single);
    auto it = graphs.find(key);
    if (it == graphs.end()) {
      TransformerShape s = shape;
      s.microbatch = microbatch;
      it = graphs.emplace(key, buildCondensedTransformer(s, split)).first;
    }
    it->second.layerRepeat = repeats;
    return it->second;
  };
  std::map<int, std::vector<int64_t>> equalSplits;
  auto equalSplit = [&](int stages) -> const std::vector<int64_t> & {
    auto it = equalSplits.find(stages);
    if (it == equalSplits.end())
      it = equalSplits.emplace(stages, balanceStages(shape.layers, std::vector<double>(size_t(stages), 0.0), 1.0))
               .first;
    return it->second;
  };
  double parameters = double(graphFor(1, {shape.layers}).parameterCount());
  double layerParameters = double(graphFor(1, {2}).parameterCount() - graphFor(1, {1}).parameterCount());
  // Shardings depend on the graph and the mesh, not on the memory options
  // or the microbatch count: computed once per group of candidates.
  std::map<std::tuple<const Graph *, int, int, int, int, int, int>, GraphSharding> shardings;
  auto shardingFor = [&](const Graph &graph, const Strategy &s) -> const GraphSharding & {
    auto key = std::make_tuple(&graph, s.dp, s.tp, int(s.tpMode), s.sp, int(s.spMode), s.pp);
    auto it = shardings.find(key);
    if (it == shardings.end())
      it = shardings.emplace(key, shardGraph(graph, s, buildMesh(s, cluster))).first;
    return it->second;
  };
  EstimateOptions untraced;
  untraced.recordPipelineTasks = false;
  std::map<std::tuple<int64_t, int, int, int, int, int>, MeasuredLayers> measured;
  const std::vector<int64_t> fixedSplit =
      o.fixedKeys.count("stage_layers") ? o.fixed.stageLayers : std::vector<int64_t>{};
  double smallestStates = std::numeric_limits<double>::infinity();
  std::string smallestStatesPlan, firstInvalid;
  auto kthBest = [&] {
    return int(result.best.size()) < o.keep ? std::numeric_limits<double>::infinity()
                                            : result.best.back().estimate.stepTime;
  };

  for (const TensorChoice &t : tensorChoices(n, cluster)) {
    if (fixedMismatch(o, "tp", t.tp != o.fixed.tp) ||
        fixedMismatch(o, "tp_mode", t.mode != o.fixed.tpMode))
      continue;
    int afterTensor = n / t.tp;
    std::vector<std::pair<int, SequenceMode>> sequences{{1, SequenceMode::None}};
    if (t.mode == TensorMode::OneD && t.tp > 1)
      sequences.push_back({1, SequenceMode::Megatron});
    for (int s : {2, 4, 8})
      if (afterTensor % s == 0 && shape.seq % s == 0) {
        sequences.push_back({s, SequenceMode::AllToAll});
        sequences.push_back({s, SequenceMode::Ring});
      }
    for (auto [sp, spMode] : sequences) {
      if (fixedMismatch(o, "sp", sp != o.fixed.sp) ||
          fixedMismatch(o, "sp_mode", spMode != o.fixed.spMode))
        continue;
      int afterSequence = afterTensor / sp;
      for (int pp : divisors(afterSequence)) {
        if (shape.layers < pp || fixedMismatch(o, "pp", pp != o.fixed.pp))
          continue;
        int dp = afterSequence / pp;
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
          std::vector<std::pair<Schedule, int>> schedules{{Schedule::OneFOneB, 1}};
          if (pp > 1 && shape.layers % (2 * pp) == 0 && m % pp == 0)
            schedules.push_back({Schedule::Interleaved, 2});
          for (auto [schedule, chunks] : schedules) {
            if (pp > 1 && fixedMismatch(o, "schedule", schedule != o.fixed.schedule))
              continue;
            for (Recompute recompute : {Recompute::None, Recompute::Selective, Recompute::Full}) {
              if (fixedMismatch(o, "recompute", recompute != o.fixed.recompute))
                continue;
              // One pipeline per group; ZeRO and offload only add after it.
              double groupPipeline = -1;
              for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
                if (fixedMismatch(o, "zero", zero != o.fixed.zero))
                  continue;
                for (bool offload : {false, true}) {
                  if (fixedMismatch(o, "offload", offload != o.fixed.offloadOptimizer) ||
                      (offload && zero == 0 && !o.fixedKeys.count("offload")))
                    continue;
                  Strategy s;
                  s.dp = dp;
                  s.tp = t.tp;
                  s.tpMode = t.mode;
                  s.tpDepth = t.mode == TensorMode::TwoPointFiveD ? t.depth : 1;
                  s.sp = sp;
                  s.spMode = spMode;
                  s.pp = pp;
                  s.microbatches = m;
                  s.schedule = schedule;
                  s.virtualStages = chunks;
                  s.zero = zero;
                  s.offloadOptimizer = offload;
                  s.recompute = recompute;
                  ++result.candidates;
                  double stateBound = modelStateLowerBound(parameters, s);
                  if (stateBound < smallestStates) {
                    smallestStates = stateBound;
                    smallestStatesPlan = s.str();
                  }
                  if (!o.exhaustive && stateBound > cluster.memoryBytes) {
                    ++result.prunedByMemory;
                    continue;
                  }
                  if (!fixedSplit.empty() && int(fixedSplit.size()) != pp * chunks) {
                    ++result.invalid;
                    continue;
                  }
                  const Graph &whole = graphFor(b, {shape.layers});
                  MeasuredLayers &layer =
                      measured[std::make_tuple(b, t.tp, int(t.mode), sp, int(spMode), int(recompute))];
                  if (!o.exhaustive && !layer.known()) {
                    // Learn the layer's cost from the same layers on one
                    // pipeline stage and one replica (a graph of two
                    // layers), before a deep pipeline is the first to pay
                    // for it.
                    Strategy probe = s;
                    probe.dp = 1;
                    probe.pp = 1;
                    probe.microbatches = 1;
                    probe.schedule = Schedule::OneFOneB;
                    probe.virtualStages = 1;
                    probe.zero = 0;
                    probe.offloadOptimizer = false;
                    probe.stageLayers.clear();
                    std::string error;
                    if (std::optional<Estimate> e =
                            estimate(whole, probe, cluster, error, &shardingFor(whole, probe), untraced))
                      layer.learn(*e);
                  }
                  double timeBound =
                      computeLowerBound(whole, s, cluster, layer.work(shape.layers),
                                        layer.busiestRank(shape.layers, pp), shape.layers, layerParameters);
                  if (!o.exhaustive &&
                      ((groupPipeline >= 0 && groupPipeline >= kthBest()) || timeBound >= kthBest())) {
                    ++result.prunedByTime;
                    continue;
                  }
                  // The split: equal (the remainder spread over the last
                  // stages), then, for a 1F1B pipeline, the split that
                  // balances the measured stage times (the embedding and
                  // the head make the first and last stages heavier).
                  std::vector<int64_t> split = fixedSplit.empty() ? equalSplit(pp * chunks) : fixedSplit;
                  // Neither split fits by the measured layers' activations:
                  // skipped, unless no plan fits yet and this one could
                  // need the least memory (the report's closest miss).
                  if (!o.exhaustive && layer.known()) {
                    double bound = splitMemoryLowerBound(s, split, layer.keptBytes, layerParameters);
                    if (pp > 1 && chunks == 1 && fixedSplit.empty())
                      bound = std::min(bound, balancedMemoryLowerBound(s, shape.layers, layer.keptBytes,
                                                                       layerParameters));
                    if (bound > cluster.memoryBytes &&
                        (!result.best.empty() ||
                         (result.leastMemory && bound >= result.leastMemory->estimate.memory.total()))) {
                      ++result.prunedByMemory;
                      continue;
                    }
                  }
                  for (int attempt = 0; attempt < 2; ++attempt) {
                    bool even = std::all_of(split.begin(), split.end(),
                                            [&](int64_t x) { return x == split.front(); });
                    s.stageLayers = even ? std::vector<int64_t>{} : split;
                    std::string error;
                    const Graph &graph = graphFor(b, split);
                    std::optional<Estimate> e = estimate(graph, s, cluster, error, &shardingFor(graph, s), untraced);
                    if (!e) {
                      if (firstInvalid.empty())
                        firstInvalid = s.str() + ": " + error;
                      ++result.invalid;
                      break;
                    }
                    ++result.evaluated;
                    layer.learn(*e);
                    if (attempt == 0)
                      groupPipeline = e->pipeline.makespan;
                    std::vector<int64_t> balanced;
                    if (attempt == 0 && pp > 1 && chunks == 1 && fixedSplit.empty()) {
                      double perLayer = 0;
                      for (size_t st = 0; st < e->stageLayers.size(); ++st)
                        if (e->stageLayers[st] > 0)
                          perLayer = std::max(perLayer, e->stageLayerSeconds[st] / double(e->stageLayers[st]));
                      balanced = balanceStages(shape.layers, e->stageOtherSeconds, perLayer);
                    }
                    keepCandidate(result, SearchCandidate{s, b, std::move(*e), {}}, o.keep);
                    if (balanced.empty() || balanced == split)
                      break;
                    split = balanced;
                  }
                  if (o.progress &&
                      std::chrono::duration<double>(Clock::now() - lastProgress).count() >= 1) {
                    lastProgress = Clock::now();
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
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (result.best.empty()) {
    std::string capacity = "no plan fits in " + gibText(cluster.memoryBytes) + " per device";
    if (result.leastMemory) {
      const Estimate &e = result.leastMemory->estimate;
      double need = e.memory.total();
      result.infeasible =
          capacity + "; the smallest found needs " + gibText(need) + " (" +
          result.leastMemory->strategy.str() + ", microbatch size " +
          std::to_string(result.leastMemory->microbatchSize) + "): activations " +
          gibText(e.memory.activations) + ", model states " +
          gibText(e.memory.parameters + e.memory.gradients + e.memory.optimizer) + ". About " +
          whole(n * need / cluster.memoryBytes) +
          " devices would hold it; or allow what the fixed strategy excludes (offload, "
          "recomputation, ZeRO-3, a smaller microbatch)";
    } else if (result.candidates > 0 && result.prunedByMemory == result.candidates) {
      result.infeasible =
          capacity + ": the model states alone (weights, gradients, optimizer state) need at "
                     "least " +
          gibText(smallestStates) + " per device in every candidate (least with " +
          smallestStatesPlan + "); at least " + whole(n * smallestStates / cluster.memoryBytes) +
          " devices are needed for them alone, more for activations";
    } else if (!firstInvalid.empty()) {
      result.infeasible = "none of the " + std::to_string(result.candidates) +
                          " candidate plans can run; for example " + firstInvalid;
    } else {
      result.infeasible = "no candidate plan for " + std::to_string(n) +
                          " devices and a global batch of " + std::to_string(o.globalBatch) +
                          " matches the fixed parts (dp x tp x pp x sp must equal the devices, "
                          "and the batch must divide over the data-parallel replicas)";
    }
  }
  return result;
}

bool wouldKeep(const SearchResult &result, const Estimate &e, int keep) {
  if (e.fits())
    return int(result.best.size()) < keep ||
           (!result.best.empty() && e.stepTime < result.best.back().estimate.stepTime);
  return !result.leastMemory || e.memory.total() < result.leastMemory->estimate.memory.total();
}

void keepCandidate(SearchResult &result, SearchCandidate candidate, int keep) {
  if (candidate.estimate.fits()) {
    auto at = std::upper_bound(result.best.begin(), result.best.end(), candidate.estimate.stepTime,
                               [](double t, const SearchCandidate &c) { return t < c.estimate.stepTime; });
    result.best.insert(at, std::move(candidate));
    if (int(result.best.size()) > keep)
      result.best.pop_back();
  } else if (!result.leastMemory ||
             candidate.estimate.memory.total() < result.leastMemory->estimate.memory.total()) {
    result.leastMemory = std::move(candidate);
  }
}

std::string explainLoss(const SearchCandidate &c, const SearchCandidate &winner) {
  const Estimate &a = c.estimate, &b = winner.estimate;
  char head[64];
  std::snprintf(head, sizeof head, "%+.1f%% step time:", 100 * (a.stepTime / b.stepTime - 1));
  struct Part {
    const char *name;
    double delta;
  } parts[] = {{"compute", a.compute - b.compute},
               {"exposed communication", a.exposedComm - b.exposedComm},
               {"bubble", a.bubble - b.bubble},
               {"optimizer and offload", a.optimizer + a.offload - b.optimizer - b.offload}};
  std::sort(std::begin(parts), std::end(parts),
            [](const Part &x, const Part &y) { return std::fabs(x.delta) > std::fabs(y.delta); });
  std::string out = head;
  for (int i = 0; i < 2; ++i) {
    if (i > 0 && parts[i].delta == 0)
      break; // a part that did not change says nothing
    char item[96];
    std::snprintf(item, sizeof item, "%s %s %.3g s %s", i ? "," : "", parts[i].name,
                  std::fabs(parts[i].delta), parts[i].delta >= 0 ? "more" : "less");
    out += item;
  }
  return out;
}

} // namespace colossal::cost
