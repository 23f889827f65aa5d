//===- Estimator.cpp - step time and memory of a plan ---------------------===//
//
// The step assembled from its parts: where each op runs (its pipeline
// stage), the ops' costs (OpCost.cpp) summed per stage, the pipeline's
// schedule simulated over them (Pipeline.h), and per pipeline rank the
// data-parallel step and memory (ModelStates.cpp) over what the layers keep
// (ActivationMemory.cpp). The busiest rank sets the step.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Estimator.h"
#include "ActivationMemory.h"
#include "EstimateContext.h"
#include "ModelStates.h"
#include "OpCost.h"
#include "ShardedCosts.h"
#include "StageRemade.h"
#include "colossal/cost/TensorGrid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace colossal::cost {
namespace {

/// Where each op runs: the plan's split of the real layers over the virtual
/// stages (or equal shares, any remainder on the last), the ops before the
/// first layer on the first stage and those after the last on the last.
void placeStages(EstimateContext &ctx) {
  const Graph &graph = ctx.graph;
  const Strategy &strategy = ctx.strategy;
  const int stages = ctx.stages;
  // Real layers per stage: the plan's split, or equal shares (any
  // remainder on the last stage).
  const int64_t realLayers = graph.realLayers();
  std::vector<int64_t> &split = ctx.split;
  split = strategy.stageLayers;
  if (split.empty()) {
    split.assign(size_t(stages), std::max<int64_t>(0, realLayers / stages));
    split.back() += realLayers - split.back() * stages;
  }
  std::vector<int> condensedStage(size_t(std::max(0, graph.numLayers)), 0);
  for (int l = 0; l < graph.numLayers; ++l) {
    int64_t first = graph.firstRealLayer(l), end = 0;
    int stage = 0;
    while (stage < stages - 1 && first >= (end += split[size_t(stage)]))
      ++stage;
    condensedStage[size_t(l)] = stage;
  }
  int &firstLayerOp = ctx.firstLayerOp;
  for (size_t o = 0; o < graph.ops.size() && firstLayerOp < 0; ++o)
    if (graph.ops[o].layer >= 0)
      firstLayerOp = int(o);
  auto stageOf = [&](int o) {
    const Op &op = graph.ops[o];
    if (op.layer >= 0)
      return condensedStage[size_t(std::min(op.layer, graph.numLayers - 1))];
    return (firstLayerOp < 0 || o < firstLayerOp) ? 0 : stages - 1;
  };
  std::vector<int> &opStage = ctx.opStage;
  opStage.assign(graph.ops.size(), 0);
  for (size_t o = 0; o < graph.ops.size(); ++o)
    opStage[o] = stageOf(int(o));
  for (size_t o = 0; o < graph.ops.size(); ++o)
    if (graph.ops[o].layer >= 0)
      ctx.lastLayerOp = o;
  // The ops after the layers run their backward passes first, each once
  // the ones after it have freed what they kept; without layers that is
  // every op. The ops before the layers (the embedding, whose gradient is
  // a weight's size) run theirs last, once the layers have freed theirs.
  ctx.tailStart = firstLayerOp < 0 ? 0 : ctx.lastLayerOp + 1;
}

/// Every op's time and collectives per virtual stage and pipeline rank, and
/// what their backward passes hold on top of what is kept.
struct OpTotals {
  std::vector<StageEstimate> perStage;
  std::vector<std::vector<CommTotal>> rankComm;
  /// Per virtual stage, one microbatch's collectives in its forward and
  /// in its backward (the trace's communication stream).
  std::vector<std::vector<CommTotal>> forwardComm, backwardComm;
  WorkingBytes working;
  /// The longest pipeline send.
  double p2pSeconds = 0;
  /// Per virtual stage: the layers' seconds, and the other ops'.
  std::vector<double> layerSeconds, otherSeconds;
};

/// The pipeline's point-to-point transfers of one step, on the ranks that
/// send them: a value one stage makes and another reads goes there once per
/// microbatch (however many of that stage's ops read it), and a floating-
/// point one's gradient comes back (`gradientReceived` per sending stage).
/// Each microbatch's are also the sending stage's forward or backward
/// call's (`forwardComm`, `backwardComm`: the trace draws them there).
void pipelineTransfers(const EstimateContext &ctx, std::vector<std::vector<CommTotal>> &rankComm,
                       std::vector<std::vector<CommTotal>> &forwardComm,
                       std::vector<std::vector<CommTotal>> &backwardComm, std::vector<double> &gradientReceived) {
  gradientReceived.assign(size_t(ctx.stages), 0.0);
  if (ctx.pp < 0 || ctx.mesh.axes[size_t(ctx.pp)].size <= 1)
    return;
  const Graph &graph = ctx.graph;
  const std::vector<char> &remade = ctx.stageRemade;
  std::set<std::pair<int, int>> sent; // (value, reading stage)
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    int to = ctx.opStage[o];
    for (const TensorUse &use : op.inputs) {
      const Value &value = graph.values[size_t(use.value)];
      if (value.producer < 0 || remade[size_t(use.value)] || ctx.opStage[size_t(value.producer)] == to ||
          !sent.insert({use.value, to}).second)
        continue;
      int from = ctx.opStage[size_t(value.producer)];
      CommEvent transfer{Collective::SendRecv, ctx.pp,
                         localElements(op, ctx.sharding[o], ctx.mesh, use.dims) * bytesOf(value.dtype), 0};
      addComm(rankComm[size_t(from % ctx.ranks)], ctx.mesh, transfer, ctx.m);
      addComm(forwardComm[size_t(from)], ctx.mesh, transfer, 1);
      if (value.dtype != DType::I64 && value.dtype != DType::I32 && value.dtype != DType::I8) {
        addComm(rankComm[size_t(to % ctx.ranks)], ctx.mesh, transfer, ctx.m);
        addComm(backwardComm[size_t(to)], ctx.mesh, transfer, 1);
        gradientReceived[size_t(from)] += transfer.bytes;
      }
    }
  }
}

OpTotals costOps(const EstimateContext &ctx, const LayerMemory &layers, const OpCoster &coster) {
  const Graph &graph = ctx.graph;
  const Mesh &mesh = ctx.mesh;
  const GraphSharding &sharding = ctx.sharding;
  const double gridShare = ctx.gridShare;
  const int ranks = ctx.ranks;
  const int stages = ctx.stages;
  const int m = ctx.m;
  const std::vector<int> &opStage = ctx.opStage;
  const int firstLayerOp = ctx.firstLayerOp;
  const size_t tailStart = ctx.tailStart;
  OpTotals totals;
  std::vector<StageEstimate> &perStage = totals.perStage;
  perStage.resize(size_t(stages));
  std::vector<std::vector<CommTotal>> &rankComm = totals.rankComm;
  rankComm.resize(size_t(ranks));
  totals.forwardComm.resize(size_t(stages)), totals.backwardComm.resize(size_t(stages));
  // The backward pass's transient on top of what is kept: the largest of
  // an op's gradients in flight, with its layer's remade activations; the
  // ops after the last layer (the head, the loss) apart, since what they
  // keep is freed before the layers' backward pass begins (and what the
  // ones after an op keep, before its own: `tailWorking`, settled in
  // stageActivations).
  std::vector<double> &maxLayerWorking = totals.working.maxLayerWorking,
                      &maxOtherWorking = totals.working.maxOtherWorking;
  maxLayerWorking.assign(size_t(ranks), 0), maxOtherWorking.assign(size_t(ranks), 0);
  std::vector<double> &tailWorking = totals.working.tailWorking, &headWorking = totals.working.headWorking;
  tailWorking.assign(graph.ops.size(), 0.0), headWorking.assign(graph.ops.size(), 0.0);
  double &p2pSeconds = totals.p2pSeconds;
  const std::vector<double> &kept = layers.kept, &streamGradient = layers.streamGradient;
  const std::vector<double> &heldWeightGradient = layers.heldWeightGradient, &freedInLayer = layers.freedInLayer;
  const std::vector<double> &remadeLive = layers.remadeLive;
  // Identical layers (the common case) cost the same op by op: cost the ops
  // of one layer once per kind of position (inside a stage, or receiving
  // from the previous stage; in the first layer, which reads the embedding
  // and pays for resharding what every layer reads, such as a mask, or in
  // a later one) and reuse, so evaluation does not grow with the work of
  // each extra layer.
  std::vector<int> layerStart(std::max(0, graph.numLayers), -1), layerSize(layerStart.size(), 0);
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    int l = graph.ops[o].layer;
    if (l < 0 || l >= int(layerStart.size()))
      continue;
    if (layerStart[l] < 0)
      layerStart[l] = int(o);
    ++layerSize[l];
  }
  bool identicalLayers = !layerStart.empty() && layerStart[0] >= 0;
  for (size_t l = 1; identicalLayers && l < layerStart.size(); ++l) {
    identicalLayers = layerStart[l] >= 0 && layerSize[l] == layerSize[0];
    for (int i = 0; identicalLayers && i < layerSize[0]; ++i) {
      const Op &a = graph.ops[layerStart[0] + i], &b = graph.ops[layerStart[l] + i];
      identicalLayers = a.kind == b.kind && a.factors.size() == b.factors.size() &&
                        a.inputs.size() == b.inputs.size() && a.forwardFlops == b.forwardFlops &&
                        sharding[layerStart[0] + i] == sharding[layerStart[l] + i];
    }
  }
  // Per place in a layer, receiving or not, first layer or not: the index
  // of its cost in `layerCosts` (-1: not costed yet).
  const size_t layerPlaces = layerSize.empty() ? 0 : size_t(layerSize[0]);
  std::vector<int> layerCostAt(identicalLayers ? 4 * layerPlaces : 0, -1);
  std::vector<OpCost> layerCosts;
  std::vector<double> &layerSeconds = totals.layerSeconds, &otherSeconds = totals.otherSeconds;
  layerSeconds.assign(size_t(stages), 0.0), otherSeconds.assign(size_t(stages), 0.0);

  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    int stage = opStage[o], rank = stage % ranks;
    StageEstimate &st = perStage[stage];
    const OpCost *cost;
    OpCost fresh;
    if (identicalLayers && op.layer >= 0) {
      bool receives = false;
      for (const TensorUse &use : op.inputs) {
        int producer = graph.values[use.value].producer;
        receives |= producer >= 0 && opStage[producer] != stage;
      }
      int &at = layerCostAt[4 * size_t(int(o) - layerStart[op.layer]) + 2 * receives + (op.layer == 0)];
      if (at < 0) {
        at = int(layerCosts.size());
        layerCosts.push_back(coster.cost(o));
      }
      cost = &layerCosts[size_t(at)];
    } else {
      fresh = coster.cost(o);
      cost = &fresh;
    }
    double copies = ctx.repeatOf(o);
    double seconds = (cost->forward + cost->backward + cost->forwardComm + cost->backwardComm) * copies;
    (op.layer >= 0 ? layerSeconds : otherSeconds)[size_t(stage)] += seconds;
    if (op.layer >= 0 && size_t(op.layer) < kept.size())
      maxLayerWorking[rank] =
          std::max(maxLayerWorking[rank], cost->backwardWorking + std::max(0.0, streamGradient[size_t(op.layer)]) +
                                              heldWeightGradient[size_t(stage)] - freedInLayer[o] / gridShare +
                                              remadeLive[o] / gridShare);
    else if (o >= tailStart)
      tailWorking[o] = cost->backwardWorking;
    else if (firstLayerOp >= 0 && int(o) < firstLayerOp)
      headWorking[o] = cost->backwardWorking;
    else
      maxOtherWorking[rank] = std::max(maxOtherWorking[rank], cost->backwardWorking);
    p2pSeconds = std::max(p2pSeconds, cost->p2p);
    st.computeForward += cost->forward * copies;
    st.computeBackward += cost->backward * copies;
    st.commForward += cost->forwardComm * copies;
    st.commBackward += cost->backwardComm * copies;
    for (const auto *events : {&cost->forwardEvents, &cost->backwardEvents, &cost->recomputedEvents})
      for (const CommEvent &e : *events) {
        addComm(rankComm[rank], mesh, e, m * copies);
        addComm(events == &cost->forwardEvents ? totals.forwardComm[size_t(stage)] : totals.backwardComm[size_t(stage)],
                mesh, e, copies);
      }
  }
  pipelineTransfers(ctx, rankComm, totals.forwardComm, totals.backwardComm, totals.working.gradientReceived);
  return totals;
}

/// Whether two strategies differ at most in ZeRO and offload.
bool sameBesidesModelStates(const Strategy &a, const Strategy &b) {
  return std::tie(a.dp, a.pp, a.tp, a.sp, a.tpMode, a.tpDepth, a.spMode, a.microbatches, a.schedule, a.virtualStages,
                  a.recompute, a.stageLayers) == std::tie(b.dp, b.pp, b.tp, b.sp, b.tpMode, b.tpDepth, b.spMode,
                                                          b.microbatches, b.schedule, b.virtualStages, b.recompute,
                                                          b.stageLayers);
}

bool sameOptions(const EstimateOptions &a, const EstimateOptions &b) {
  return std::tie(a.bucketBytes, a.workspaceBytes, a.shardedNormReductions, a.optimizerMoments, a.recordPipelineTasks,
                  a.layouts, a.recomputeCollectives, a.overlapGradientBuckets, a.prefetchGathers) ==
         std::tie(b.bucketBytes, b.workspaceBytes, b.shardedNormReductions, b.optimizerMoments, b.recordPipelineTasks,
                  b.layouts, b.recomputeCollectives, b.overlapGradientBuckets, b.prefetchGathers);
}

} // namespace

struct EstimateReuse::Base {
  // What it was made for.
  const Graph *graph = nullptr;
  const Cluster *cluster = nullptr;
  const GraphSharding *explicitSharding = nullptr;
  Strategy strategy;
  EstimateOptions options;
  // What it holds (EstimateContext refers to the mesh and the sharding).
  Mesh mesh;
  GraphSharding templated;
  std::unique_ptr<EstimateContext> ctx;
  LayerMemory layers;
  OpTotals totals;
  PipelineResult pipeline;
  StageActivations activations;
  RankParameters parameters;

  bool serves(const Graph &g, const Strategy &s, const Cluster &c, const GraphSharding *sharding,
              const EstimateOptions &o) const {
    return graph == &g && cluster == &c && explicitSharding == sharding && sameBesidesModelStates(strategy, s) &&
           sameOptions(options, o);
  }

  /// Computes everything but the model states; false with `error`.
  bool build(std::string &error) {
    const Strategy &strategy = this->strategy;
    int chunks = strategy.schedule == Schedule::Interleaved ? strategy.virtualStages : 1;
    mesh = buildMesh(strategy, *cluster);
    if (!explicitSharding)
      templated = shardGraph(*graph, strategy, mesh);
    const GraphSharding &sharding = explicitSharding ? *explicitSharding : templated;
    if (sharding.size() != graph->ops.size()) {
      error = "the sharding covers " + std::to_string(sharding.size()) + " ops, the graph has " +
              std::to_string(graph->ops.size());
      return false;
    }
    if (!checkSharding(*graph, sharding, mesh, strategy, error, options.layouts))
      return false;

    // 2D/2.5D/3D tensor parallelism: every op's work and tensors are split
    // over the whole grid (weights over the q x q planes), and linear layers,
    // norms and the loss add the grid algorithms' collectives (TensorGrid.h).
    bool grid = strategy.tpMode != TensorMode::OneD && strategy.tp > 1;
    const std::pair<int, int> gridShape = tensorGrid(strategy);
    const int gridQ = gridShape.first, gridDepth = gridShape.second;
    double gridShare = grid ? double(strategy.tp) : 1.0;
    double weightShare =
        grid ? (strategy.tpMode == TensorMode::TwoPointFiveD ? double(gridQ) * gridQ : gridShare) : 1.0;
    ctx = std::make_unique<EstimateContext>(EstimateContext{*graph, strategy, *cluster, mesh, sharding, options});
    EstimateContext &ctx = *this->ctx;
    ctx.grid = grid;
    ctx.gridQ = gridQ, ctx.gridDepth = gridDepth;
    ctx.gridShare = gridShare, ctx.weightShare = weightShare;
    int ranks = strategy.pp, stages = ranks * chunks, m = strategy.microbatches;
    ctx.ranks = ranks, ctx.chunks = chunks, ctx.stages = stages, ctx.m = m;
    ctx.pp = mesh.axisIndex("pp"), ctx.dp = mesh.axisIndex("dp"), ctx.sp = mesh.axisIndex("sp");
    placeStages(ctx);
    ctx.stageRemade = stages > 1 ? remadeOnEachStage(*graph) : std::vector<char>(graph->values.size(), 0);

    layers = layerMemory(ctx);
    OpCoster coster(ctx);
    totals = costOps(ctx, layers, coster);

    // Pipeline.
    std::vector<ChunkTimes> times(stages);
    for (int stage = 0; stage < stages; ++stage) {
      StageEstimate &st = totals.perStage[stage];
      st.forward = st.computeForward + st.commForward;
      st.backward = st.computeBackward + st.commBackward;
      times[(stage / ranks) * ranks + stage % ranks] = {st.forward, st.backward};
    }
    if (!simulatePipeline(ranks > 1 ? strategy.schedule : Schedule::OneFOneB, ranks, chunks, m, times,
                          totals.p2pSeconds, pipeline, error, options.recordPipelineTasks))
      return false;
    activations = stageActivations(ctx, layers, totals.working);
    parameters = countParameters(ctx);
    return true;
  }
};

EstimateReuse::EstimateReuse() = default;
EstimateReuse::~EstimateReuse() = default;

std::optional<Estimate> estimate(const Graph &graph, const Strategy &strategy, const Cluster &cluster,
                                 std::string &error, const GraphSharding *explicitSharding,
                                 const EstimateOptions &options, EstimateReuse *reuse) {
  error.clear();
  if (strategy.devices() > cluster.devices()) {
    error = "the plan needs " + std::to_string(strategy.devices()) + " devices; the cluster has " +
            std::to_string(cluster.devices());
    return std::nullopt;
  }
  if (strategy.schedule != Schedule::Interleaved && strategy.virtualStages != 1) {
    error = "virtual_stages > 1 needs the interleaved schedule";
    return std::nullopt;
  }
  if (strategy.tpMode != TensorMode::OneD && tensorGrid(strategy).first == 0) {
    Mesh none;
    (void)checkSharding(Graph(), {}, none, strategy, error);
    return std::nullopt;
  }
  std::unique_ptr<EstimateReuse::Base> own;
  EstimateReuse::Base *base = reuse ? reuse->base_.get() : nullptr;
  if (!base || !base->serves(graph, strategy, cluster, explicitSharding, options)) {
    own = std::make_unique<EstimateReuse::Base>();
    own->graph = &graph, own->cluster = &cluster, own->explicitSharding = explicitSharding;
    own->strategy = strategy, own->options = options;
    if (!own->build(error))
      return std::nullopt;
    base = own.get();
    if (reuse)
      reuse->base_ = std::move(own);
  }
  // The base's context with this plan's ZeRO and offload; a base made for
  // this call alone (no holder) gives up its context and totals instead.
  EstimateContext ctx = own ? std::move(*own->ctx) : base->ctx->withStrategy(strategy, options);
  const Mesh &mesh = base->mesh;
  const int ranks = ctx.ranks, m = ctx.m;
  const LayerMemory &layers = base->layers;
  OpTotals totals = own ? std::move(own->totals) : base->totals;
  std::vector<StageEstimate> &perStage = totals.perStage;
  const PipelineResult &pipeline = base->pipeline;
  const StageActivations &activations = base->activations;
  const RankParameters &parameters = base->parameters;
  Estimate result;
  result.strategy = strategy;
  result.mesh = mesh;
  result.capacity = cluster.memoryBytes;
  result.pipeline = pipeline;
  result.stageForwardComm = std::move(totals.forwardComm);
  result.stageBackwardComm = std::move(totals.backwardComm);
  result.bucketsOverlapped = options.overlapGradientBuckets;
  result.gathersPrefetched = options.prefetchGathers;
  double worstTail = 0;
  std::vector<StageEstimate> rankEstimates(ranks);
  for (int r = 0; r < ranks; ++r) {
    StageEstimate &re = rankEstimates[r];
    worstTail = std::max(worstTail, dataParallelStep(ctx, r, parameters, perStage, re, totals.rankComm[r]));
    re.memory = rankMemory(ctx, r, parameters, activations, totals.working, pipeline.peakInFlight[r]);
    re.comm = totals.rankComm[r];
  }

  // The busiest pipeline rank sets the breakdown.
  int busiest = 0;
  for (int r = 1; r < ranks; ++r)
    if (pipeline.busy[r] > pipeline.busy[busiest])
      busiest = r;
  const StageEstimate &b = rankEstimates[busiest];
  result.stepTime = pipeline.makespan + worstTail;
  result.compute = m * (b.computeForward + b.computeBackward);
  result.exposedComm = m * (b.commForward + b.commBackward) + b.dataParallelExposed;
  result.bubble = pipeline.makespan - pipeline.busy[busiest];
  result.offload = b.offloadSeconds;
  result.optimizer = b.optimizerSeconds;
  result.modelFlopsPerStep = graph.modelFlops() * m * strategy.dp;
  result.tflopsPerGpu = result.modelFlopsPerStep / result.stepTime / strategy.devices() / 1e12;
  DType dtype = DType::BF16;
  for (const Value &v : graph.values)
    if (v.isParameter)
      dtype = v.dtype;
  result.mfu = result.tflopsPerGpu * 1e12 / cluster.peak(dtype);
  result.tokensPerSecond =
      double(graph.tokensPerMicrobatch) * m * strategy.dp / result.stepTime;
  result.peakStage = 0;
  for (int r = 1; r < ranks; ++r)
    if (rankEstimates[r].memory.total() > rankEstimates[result.peakStage].memory.total())
      result.peakStage = r;
  result.memory = rankEstimates[result.peakStage].memory;
  // A node's pinned host memory is shared by its ranks.
  if (cluster.hostMemoryBytes > 0 && cluster.gpusPerNode > 0)
    result.hostCapacity = cluster.hostMemoryBytes / cluster.gpusPerNode;
  for (const StageEstimate &r : rankEstimates)
    result.hostPeak = std::max(result.hostPeak, r.memory.host());
  result.stages = std::move(rankEstimates);
  result.stageLayers = ctx.split;
  result.stageLayerSeconds = std::move(totals.layerSeconds);
  result.stageOtherSeconds = std::move(totals.otherSeconds);
  double leastKept = -1;
  for (size_t l = 0; l < layers.kept.size(); ++l)
    if (activations.layerStage[l] >= 0 && (leastKept < 0 || layers.kept[l] < leastKept))
      leastKept = layers.kept[l];
  result.leastLayerActivations = std::max(0.0, leastKept) / ctx.gridShare;
  return result;
}

Json Estimate::toJson() const {
  Json::Array perRank, comm;
  for (size_t r = 0; r < stages.size(); ++r) {
    Json::Object o = stages[r].memory.toJson().asObject();
    o["pipeline_rank"] = int(r);
    o["total"] = stages[r].memory.total();
    o["parameters_elements"] = double(stages[r].parameters);
    perRank.push_back(o);
    for (const CommTotal &t : stages[r].comm)
      comm.push_back(Json::Object{{"pipeline_rank", int(r)},
                                  {"collective", nameOf(t.collective)},
                                  {"axis", t.axis},
                                  {"bytes", t.bytes},
                                  {"calls", t.calls},
                                  {"seconds", t.seconds}});
  }
  return Json::Object{
      {"strategy", strategy.toJson()},
      {"mesh", mesh.toJson()},
      {"predicted", Json::Object{{"step_time_s", stepTime},
                                 {"compute_s", compute},
                                 {"exposed_comm_s", exposedComm},
                                 {"bubble_s", bubble},
                                 {"offload_s", offload},
                                 {"optimizer_s", optimizer},
                                 {"model_flops_per_step", modelFlopsPerStep},
                                 {"tflops_per_gpu", tflopsPerGpu},
                                 {"mfu", mfu},
                                 {"tokens_per_s", tokensPerSecond}}},
      {"memory", Json::Object{{"capacity_bytes", capacity},
                              {"host_capacity_bytes", hostCapacity},
                              {"host_peak_bytes", hostPeak},
                              {"per_rank_peak_bytes", memory.total()},
                              {"peak_pipeline_rank", peakStage},
                              {"fits", fits()},
                              {"by_category", memory.toJson()},
                              {"per_pipeline_rank", perRank}}},
      {"communication", comm},
  };
}

std::string Estimate::summary() const {
  auto gib = [](double bytes) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / double(1ull << 30));
    return std::string(buffer);
  };
  // Seconds for large models, milli- or microseconds for small ones.
  auto time = [](double seconds) {
    char buffer[32];
    if (seconds == 0 || seconds >= 0.1)
      std::snprintf(buffer, sizeof buffer, "%.4f s", seconds);
    else if (seconds >= 1e-4)
      std::snprintf(buffer, sizeof buffer, "%.3f ms", seconds * 1e3);
    else
      std::snprintf(buffer, sizeof buffer, "%.2f us", seconds * 1e6);
    return std::string(buffer);
  };
  char text[1024];
  std::snprintf(text, sizeof text,
                "step       %s  (compute %s, exposed communication %s, bubble %s, "
                "optimizer %s, offload %s)\n"
                "throughput %.1f TFLOP/s per device (MFU %.1f%%), %.0f tokens/s\n"
                "memory     %s of %s on pipeline rank %d%s\n"
                "           parameters %s, gradients %s, optimizer %s, activations %s, "
                "buffers %s, workspace %s\n",
                time(stepTime).c_str(), time(compute).c_str(), time(exposedComm).c_str(),
                time(bubble).c_str(), time(optimizer).c_str(), time(offload).c_str(), tflopsPerGpu,
                100 * mfu, tokensPerSecond, gib(memory.total()).c_str(), gib(capacity).c_str(),
                peakStage, memory.total() <= capacity ? "" : "  (DOES NOT FIT)", gib(memory.parameters).c_str(),
                gib(memory.gradients).c_str(), gib(memory.optimizer).c_str(),
                gib(memory.activations).c_str(), gib(memory.communication).c_str(),
                gib(memory.workspace).c_str());
  std::string report = text;
  if (hostPeak > 0) {
    std::snprintf(text, sizeof text,
                  "host       %s pinned of %s per rank%s: optimizer %s, gradients %s, parameters %s\n",
                  gib(hostPeak).c_str(), hostCapacity > 0 ? gib(hostCapacity).c_str() : "(unknown)",
                  hostFits() ? "" : "  (DOES NOT FIT)", gib(memory.hostOptimizer).c_str(),
                  gib(memory.hostGradients).c_str(), gib(memory.hostParameters).c_str());
    report += text;
  }
  return report;
}

namespace {

/// One Chrome-trace span ("X" event) of `seconds` from `at`.
Json spanEvent(const std::string &name, const char *category, int pid, int tid, double at, double seconds,
               Json::Object args = {}) {
  Json::Object event{{"name", name}, {"cat", category}, {"ph", "X"},           {"pid", pid},
                     {"tid", tid},   {"ts", at * 1e6},  {"dur", seconds * 1e6}};
  if (!args.empty())
    event.emplace("args", std::move(args));
  return event;
}

/// The collectives of `totals`, back to back from `at` on thread `tid`, each
/// named as the program's trace names a call ("all_reduce tp") with its
/// calls and bytes; returns where they end.
double commEvents(Json::Array &events, const std::vector<CommTotal> &totals, int pid, int tid, double at,
                  const std::function<bool(const CommTotal &)> &keep) {
  for (const CommTotal &t : totals) {
    if (!keep(t) || t.calls <= 0)
      continue;
    double seconds = std::max(0.0, t.seconds);
    events.push_back(spanEvent(std::string(nameOf(t.collective)) + " " + t.axis, "communication", pid, tid, at, seconds,
                               {{"calls", t.calls}, {"bytes", t.bytes}}));
    at += seconds;
  }
  return at;
}

Json threadName(int pid, int tid, const std::string &name) {
  return Json::Object{
      {"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", Json::Object{{"name", name}}}};
}

} // namespace

// Three threads per pipeline rank, as the program's trace has them: the
// step (tid 0), the collectives the step's calls make (tid 1: tensor,
// sequence and grid axes, inside each call's span; the estimate knows their
// sum per call, not where in the call they fall, so they are drawn from
// the call's start), and the communication thread (tid 2: the data axis's
// gradient reduction, overlapped with the backward pass up to its exposed
// tail, and ZeRO's gathers; on tid 1 where the data axis is not
// overlapped). A pipeline's sends are drawn at the end of the call that
// makes them, without a duration: the schedule's spacing holds their time
// (the program draws its waits for them on tid 0).
Json Estimate::chromeTrace() const {
  Json::Array events;
  const int ranks = int(stages.size());
  auto stageComm = [&](const std::vector<std::vector<CommTotal>> &perStage,
                       const PipelineTask &t) -> const std::vector<CommTotal> & {
    static const std::vector<CommTotal> none;
    size_t stage = size_t(t.chunk) * size_t(ranks) + size_t(t.rank);
    return stage < perStage.size() ? perStage[stage] : none;
  };
  auto insideCalls = [](const CommTotal &t) { return t.axis != "dp" && t.axis != "pp"; };
  auto sentAfter = [](const CommTotal &t) { return t.axis == "pp"; };
  // Without a pipeline a microbatch's forward and backward are one call of
  // the program's step: one event, "F0+B0", as the program's trace has it.
  bool oneCall = stages.size() == 1 && strategy.virtualStages == 1 && pipeline.tasks.size() % 2 == 0;
  for (size_t i = 0; oneCall && i < pipeline.tasks.size(); i += 2)
    oneCall = pipeline.tasks[i].forward && !pipeline.tasks[i + 1].forward &&
              pipeline.tasks[i].microbatch == pipeline.tasks[i + 1].microbatch;
  for (size_t i = 0; oneCall && i < pipeline.tasks.size(); i += 2) {
    const PipelineTask &f = pipeline.tasks[i], &b = pipeline.tasks[i + 1];
    std::string m = std::to_string(f.microbatch);
    events.push_back(spanEvent("F" + m + "+B" + m, "step", 0, 0, f.start, b.end - f.start));
  }
  for (const PipelineTask &t : oneCall ? std::vector<PipelineTask>{} : pipeline.tasks)
    events.push_back(spanEvent(std::string(t.forward ? "F" : "B") + std::to_string(t.microbatch) +
                                   (t.chunk ? "." + std::to_string(t.chunk) : ""),
                               t.forward ? "forward" : "backward", t.rank, 0, t.start, t.end - t.start));
  for (const PipelineTask &t : pipeline.tasks) {
    const std::vector<CommTotal> &comm = stageComm(t.forward ? stageForwardComm : stageBackwardComm, t);
    commEvents(events, comm, t.rank, 1, t.start, insideCalls);
    commEvents(events, comm, t.rank, 1, t.end, sentAfter);
  }
  for (int r = 0; r < ranks; ++r) {
    const StageEstimate &st = stages[size_t(r)];
    double at = pipeline.makespan;
    auto tail = [&](const char *name, double seconds) {
      if (seconds <= 0)
        return;
      events.push_back(spanEvent(name, "step", r, 0, at, seconds));
      at += seconds;
    };
    tail("data-parallel reduction (exposed)", st.dataParallelExposed);
    double reduced = at;
    tail("optimizer", st.optimizerSeconds);
    tail("offload", st.offloadSeconds);
    // The data axis: ZeRO-3's gathers from the step's start, the gradients'
    // reductions ending where the exposed reduction ends (after the calls
    // when not overlapped), ZeRO-1/2's gathers of the updated shards after
    // the optimizer.
    auto onData = [](Collective c) { return [c](const CommTotal &t) { return t.axis == "dp" && t.collective == c; }; };
    const int dataThread = bucketsOverlapped ? 2 : 1;
    if (strategy.zero == 3)
      commEvents(events, st.comm, r, gathersPrefetched ? 2 : 1, 0.0, onData(Collective::AllGather));
    double reductions = 0;
    for (const CommTotal &t : st.comm)
      if (t.axis == "dp" && t.collective != Collective::AllGather)
        reductions += t.seconds;
    commEvents(events, st.comm, r, dataThread,
               bucketsOverlapped ? std::max(0.0, reduced - reductions) : pipeline.makespan,
               [](const CommTotal &t) { return t.axis == "dp" && t.collective != Collective::AllGather; });
    if (strategy.zero != 3)
      commEvents(events, st.comm, r, dataThread, at, onData(Collective::AllGather));
    // Off the data axis after the calls: norms completed over the model
    // axes, the pipeline's sums of the loss and shared gradients.
    commEvents(events, st.afterCalls, r, 1, reduced, [](const CommTotal &) { return true; });
    events.push_back(Json::Object{{"name", "process_name"},
                                  {"ph", "M"},
                                  {"pid", r},
                                  {"args", Json::Object{{"name", "pipeline rank " + std::to_string(r)}}}});
    events.push_back(threadName(r, 0, "step"));
    events.push_back(threadName(r, 1, "collectives in the step"));
    events.push_back(threadName(r, 2, "communication thread"));
  }
  return Json::Object{{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

} // namespace colossal::cost
