//===- ModelStates.cpp - parameters, gradients and optimizer state per rank
//===//

#include "ModelStates.h"
#include "colossal/cost/Pipeline.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace colossal::cost {

RankParameters countParameters(const EstimateContext &ctx) {
  const Graph &graph = ctx.graph;
  const Strategy &strategy = ctx.strategy;
  const Mesh &mesh = ctx.mesh;
  const GraphSharding &sharding = ctx.sharding;
  const EstimateOptions &options = ctx.options;
  const double weightShare = ctx.weightShare;
  const int ranks = ctx.ranks;
  const int chunks = ctx.chunks;
  const int m = ctx.m;
  const std::vector<int> &opStage = ctx.opStage;
  const std::vector<int64_t> &split = ctx.split;
  const int dp = ctx.dp;
  // All parameter elements per rank (stored, gathered) and the trainable
  // ones (reduced, updated, with optimizer state).
  RankParameters p;
  std::vector<double> &params = p.params, &trainableParams = p.trainableParams, &layerParams = p.layerParams,
                      &trainableTensors = p.trainableTensors;
  params.assign(ranks, 0), trainableParams.assign(ranks, 0), layerParams.assign(ranks, 0),
      trainableTensors.assign(ranks, 0);
  // ZeRO-3 cuts every trainable tensor into dp chunks of ceil(n / dp) and
  // gathers it whole (padded) for the forward pass, and again for the
  // backward pass if the backward reads it (ShardedOptimizer.h).
  std::vector<double> &gatheredForward = p.gatheredForward, &gatheredBackward = p.gatheredBackward;
  gatheredForward.assign(ranks, 0), gatheredBackward.assign(ranks, 0);
  p.gatheredForwardTensors.assign(ranks, 0), p.gatheredBackwardTensors.assign(ranks, 0);
  // Trainable tensors the tensor axis splits (their norms are completed
  // over it).
  int &tensorAxis = p.tensorAxis;
  tensorAxis = mesh.axisIndex("tp");
  if (tensorAxis >= 0 && mesh.axes[tensorAxis].size <= 1)
    tensorAxis = -1;
  std::vector<double> &tensorSplitTensors = p.tensorSplitTensors;
  tensorSplitTensors.assign(ranks, 0);
  std::vector<int> firstLayer(ranks, -1);
  // Which ranks have counted each parameter: nearly all are read on one
  // rank, so the first in a flat table and the rare others (a tied
  // embedding's second stage) in a set.
  std::vector<int> firstSeenOn(graph.values.size(), -1);
  std::set<std::pair<int, int>> seenElsewhere;
  auto firstRead = [&](int value, int rank) {
    int &first = firstSeenOn[size_t(value)];
    if (first < 0) {
      first = rank;
      return true;
    }
    return first != rank && seenElsewhere.insert({rank, value}).second;
  };
  // A pipeline's trainable weights as each rank holds them (value, rank,
  // local elements), and which are held by more than one rank.
  struct Held {
    int value, rank;
    double elements;
  };
  std::vector<Held> held;
  std::vector<int> firstHolder(ranks > 1 ? graph.values.size() : 0, -1);
  std::vector<char> sharedValue(firstHolder.size(), 0);
  double &weightBytes = p.weightBytes, &optimizerBytes = p.optimizerBytes;
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    int rank = opStage[o] % ranks;
    for (const TensorUse &use : graph.ops[o].inputs) {
      const Value &value = graph.values[use.value];
      if (!value.isParameter || !firstRead(use.value, rank))
        continue;
      double n = localElements(graph.ops[o], sharding[o], mesh, use.dims) / weightShare;
      params[rank] += n * ctx.repeatOf(o);
      if (!value.frozen) {
        if (ranks > 1) {
          int &first = firstHolder[size_t(use.value)];
          sharedValue[size_t(use.value)] |= first >= 0 && first != rank;
          first = first < 0 ? rank : first;
          held.push_back({use.value, rank, n * ctx.repeatOf(o)});
        }
        trainableParams[rank] += n * ctx.repeatOf(o);
        trainableTensors[rank] += ctx.repeatOf(o);
        if (tensorAxis >= 0) {
          bool split = false;
          for (const std::vector<int> &dim : use.dims)
            for (int f : dim)
              split |= std::find(sharding[o][size_t(f)].begin(), sharding[o][size_t(f)].end(), tensorAxis) !=
                       sharding[o][size_t(f)].end();
          tensorSplitTensors[rank] += split ? ctx.repeatOf(o) : 0;
        }
        double padded = std::ceil(n / strategy.dp - 1e-9) * strategy.dp;
        gatheredForward[rank] += padded * ctx.repeatOf(o);
        p.gatheredForwardTensors[rank] += ctx.repeatOf(o);
        if (value.readByBackward) {
          gatheredBackward[rank] += padded * ctx.repeatOf(o);
          p.gatheredBackwardTensors[rank] += ctx.repeatOf(o);
        }
      }
      // One layer's weights: what ZeRO-3 gathers (and prefetches) at a time.
      if (graph.ops[o].layer >= 0 && firstLayer[rank] < 0)
        firstLayer[rank] = graph.ops[o].layer;
      if (graph.ops[o].layer >= 0 && graph.ops[o].layer == firstLayer[rank])
        layerParams[rank] += n;
      weightBytes = bytesOf(value.dtype);
      // fp32 master + moments (m and v: 12 bytes for Adam), or the moments
      // alone.
      optimizerBytes = (weightBytes == 2 ? 4 : 0) + 4.0 * options.optimizerMoments;
    }
  }
  p.sharedAcrossStages.assign(ranks, 0);
  for (const Held &h : held)
    if (sharedValue[size_t(h.value)])
      p.sharedAcrossStages[size_t(h.rank)] += h.elements;
  return p;
}

double dataParallelStep(const EstimateContext &ctx, int r, const RankParameters &p,
                        const std::vector<StageEstimate> &perStage, StageEstimate &re, std::vector<CommTotal> &comm) {
  const Strategy &strategy = ctx.strategy;
  const Cluster &cluster = ctx.cluster;
  const Mesh &mesh = ctx.mesh;
  const EstimateOptions &options = ctx.options;
  const int ranks = ctx.ranks;
  const int chunks = ctx.chunks;
  const int m = ctx.m;
  const std::vector<int64_t> &split = ctx.split;
  const int dp = ctx.dp;
  const std::vector<double> &params = p.params;
  const std::vector<double> &trainableParams = p.trainableParams;
  const std::vector<double> &trainableTensors = p.trainableTensors;
  const std::vector<double> &gatheredForward = p.gatheredForward;
  const std::vector<double> &gatheredBackward = p.gatheredBackward;
  const std::vector<double> &tensorSplitTensors = p.tensorSplitTensors;
  const double weightBytes = p.weightBytes;
  const int tensorAxis = p.tensorAxis;
  int dpSize = strategy.dp;
  re.parameters = int64_t(params[r]);
  for (int c = 0; c < chunks; ++c) {
    const StageEstimate &st = perStage[c * ranks + r];
    re.computeForward += st.computeForward;
    re.computeBackward += st.computeBackward;
    re.commForward += st.commForward;
    re.commBackward += st.commBackward;
    re.forward += st.forward;
    re.backward += st.backward;
  }
  double gradBytes = trainableParams[r] * weightBytes;
  double layers = 0;
  for (int c = 0; c < chunks; ++c)
    layers += double(split[size_t(c * ranks + r)]);
  layers = std::max(1.0, layers);
  double overlappable = options.overlapGradientBuckets ? (re.backward / chunks) * (layers - 1) / layers : 0.0;
  std::vector<CommEvent> dpEvents;
  double dpExposed = 0, dpTotal = 0;
  if (dp >= 0 && dpSize > 1) {
    const MeshAxis &axis = mesh.axes[dp];
    auto event = [&](Collective c, double bytes, double times) {
      CommEvent e{c, dp, bytes, collectiveTime(c, bytes, axis, cluster)};
      addComm(comm, mesh, e, times);
      dpTotal += e.seconds * times;
      return e.seconds * times;
    };
    // ZeRO splits the trainable weights as one flat space into equal
    // shards, the last padded (ShardedOptimizer.h): its collectives move
    // whole multiples of the ranks.
    double padded = strategy.zero == 3 ? gatheredForward[r] * weightBytes
                                       : std::ceil(trainableParams[r] / dpSize - 1e-9) * dpSize * weightBytes;
    if (strategy.zero <= 1) {
      // One all-reduce per gradient bucket (GradientBuckets.h in the
      // runtime), each paying the collective's latency.
      // The last bucket fills when the backward pass ends: nothing hides it.
      double buckets = std::max(1.0, std::ceil(gradBytes / options.bucketBytes - 1e-9));
      double t = event(Collective::AllReduce, gradBytes / buckets, buckets);
      dpExposed += std::max(t / buckets, t - overlappable);
    } else {
      // ZeRO-2/3 keep 1/Nd of the gradients: the trainer reduce-scatters
      // them once each microbatch's backward pass has ended, blocking
      // (ShardedOptimizer::reduceStaged): nothing hides it.
      double t = event(Collective::ReduceScatter, padded, m);
      dpExposed += t;
    }
    if (strategy.zero == 3) {
      // Trainable weights gathered before the forward and again before the
      // backward of every microbatch, one all-gather per tensor (each paying
      // its latency), prefetched a layer ahead (frozen ones are kept whole).
      auto gathers = [&](double elements, double tensors) {
        return tensors > 0 ? event(Collective::AllGather, elements * weightBytes / tensors, m * tensors) : 0.0;
      };
      double t = gathers(gatheredForward[r], p.gatheredForwardTensors[r]) +
                 gathers(gatheredBackward[r], p.gatheredBackwardTensors[r]);
      double hidden =
          options.prefetchGathers ? m * (re.computeForward + re.computeBackward) * (layers - 1) / layers : 0.0;
      dpExposed += std::max(0.0, t - hidden);
    } else if (strategy.zero >= 1) {
      // Each rank updated its shard of the trainable weights: gather them.
      dpExposed += event(Collective::AllGather, padded, 1);
    }
    // A shard cuts tensors: per-tensor sums of squares (two floats per
    // tensor) are completed for the gradient norm, and again for LAMB's
    // trust ratios.
    if (strategy.zero >= 1 && options.shardedNormReductions > 0)
      dpExposed += event(Collective::AllReduce, 8 * trainableTensors[r], options.shardedNormReductions);
    // Every rank averages the step's loss over the data-parallel ranks for
    // the log (a pipeline's ranks have summed it over the stages first):
    // one float.
    dpExposed += event(Collective::AllReduce, 4, 1);
  }
  // Weights split over the tensor axis: their per-tensor sums of squares
  // are completed over it as well (two floats per split tensor, per
  // completion), before the optimizer step.
  double tensorNormSeconds = 0;
  if (tensorAxis >= 0 && tensorSplitTensors[r] > 0 && options.shardedNormReductions > 0) {
    double bytes = 8 * tensorSplitTensors[r];
    CommEvent e{Collective::AllReduce, tensorAxis, bytes,
                collectiveTime(Collective::AllReduce, bytes, mesh.axes[tensorAxis], cluster)};
    addComm(comm, mesh, e, options.shardedNormReductions);
    addComm(re.afterCalls, mesh, e, options.shardedNormReductions);
    tensorNormSeconds = e.seconds * options.shardedNormReductions;
  }
  // A pipeline's ranks each hold part of the model: per step they sum the
  // loss (one float, for the log), the gradients of weights read on several
  // of them (fp32) and the gradient norm's squares (one double), each in
  // one all-reduce over the pipeline axis (PipelineStep.h).
  if (int pp = mesh.axisIndex("pp"); pp >= 0 && mesh.axes[size_t(pp)].size > 1) {
    auto event = [&](double bytes) {
      CommEvent e{Collective::AllReduce, pp, bytes,
                  collectiveTime(Collective::AllReduce, bytes, mesh.axes[size_t(pp)], cluster)};
      addComm(comm, mesh, e, 1);
      addComm(re.afterCalls, mesh, e, 1);
      dpExposed += e.seconds;
    };
    event(4);
    if (p.sharedAcrossStages[size_t(r)] > 0)
      event(4 * p.sharedAcrossStages[size_t(r)]);
    event(8);
  }
  re.dataParallelSeconds = dpTotal;
  re.dataParallelExposed = dpExposed;
  double optimizerParams = strategy.zero >= 1 ? trainableParams[r] / dpSize : trainableParams[r];
  // The elements of this rank's optimizer shard: ZeRO pads the flat space
  // (stages 1 and 2) or each tensor (stage 3) to a multiple of the ranks,
  // and the first rank's shard is whole.
  double shardElements = trainableParams[r];
  if (strategy.zero >= 1 && dpSize > 1)
    shardElements = strategy.zero == 3 ? gatheredForward[r] / dpSize : std::ceil(trainableParams[r] / dpSize - 1e-9);
  // Read weight, gradient, master, m, v; write weight, master, m, v.
  double optimizerTraffic = optimizerParams * (2 * weightBytes + 3 * 4 + 3 * 4 + weightBytes);
  const KernelRates &k = cluster.kernels;
  double speedup = k.speedupWhenBusy(k.aloneSpeedupOptimizer, ctx.mesh.devices(), cluster.gpusPerNode);
  if (strategy.offloadOptimizer) {
    // The shard's gradients go down once complete, its weights come back.
    re.offloadToHost = re.offloadToDevice = shardElements * weightBytes;
    // The update on the host's cores: its measured rate, or the node's
    // memory bandwidth shared by its devices.
    double hostShare = k.hostOptimizerBytesPerSecond > 0 ? k.hostOptimizerBytesPerSecond * speedup
                                                         : cluster.hostMemoryBandwidth / cluster.gpusPerNode;
    double transfers = (re.offloadToHost + re.offloadToDevice) / cluster.hostDeviceBandwidth;
    re.offloadSeconds = (hostShare > 0 ? optimizerTraffic / hostShare : 0) + transfers;
  } else if (k.optimizerBytesPerSecond > 0) {
    // The measured update's rate over the same traffic, faster when the
    // node's other devices are idle.
    re.optimizerSeconds = optimizerTraffic / (k.optimizerBytesPerSecond * speedup);
  } else {
    re.optimizerSeconds = optimizerTraffic / cluster.memoryBandwidth;
  }
  re.optimizerSeconds += tensorNormSeconds;
  return dpExposed + re.optimizerSeconds + re.offloadSeconds;
}

MemoryBreakdown rankMemory(const EstimateContext &ctx, int r, const RankParameters &p,
                           const StageActivations &activations, const WorkingBytes &working, int peakInFlight) {
  const Strategy &strategy = ctx.strategy;
  const EstimateOptions &options = ctx.options;
  const double gridShare = ctx.gridShare;
  const int ranks = ctx.ranks;
  const int chunks = ctx.chunks;
  const int dp = ctx.dp;
  const std::vector<double> &params = p.params;
  const std::vector<double> &trainableParams = p.trainableParams;
  const std::vector<double> &layerParams = p.layerParams;
  const std::vector<double> &gatheredForward = p.gatheredForward;
  const double weightBytes = p.weightBytes;
  const double optimizerBytes = p.optimizerBytes;
  int dpSize = strategy.dp;
  double gradBytes = trainableParams[r] * weightBytes;
  double shardElements = trainableParams[r];
  if (strategy.zero >= 1 && dpSize > 1)
    shardElements = strategy.zero == 3 ? gatheredForward[r] / dpSize : std::ceil(trainableParams[r] / dpSize - 1e-9);
  const std::vector<double> &stageActivations = activations.kept, &stageTail = activations.tail;
  const std::vector<double> &maxHeadWorking = activations.maxHeadWorking;
  const std::vector<double> &maxOtherWorking = working.maxOtherWorking, &maxLayerWorking = working.maxLayerWorking;
  MemoryBreakdown mem;
  ModelStateBytes states = zeroModelStates(trainableParams[r], dpSize, strategy.zero, weightBytes, optimizerBytes);
  // Frozen weights (buffers such as rotary tables) are kept whole on every
  // rank, even under ZeRO-3, and have no gradient or optimizer state.
  double frozen = params[r] - trainableParams[r];
  states.parameters += frozen * weightBytes;
  mem.parameters = states.parameters;
  mem.gradients = states.gradients;
  if (strategy.offloadOptimizer) {
    mem.hostOptimizer = states.optimizer;
    mem.hostGradients = 4 * shardElements;
    mem.hostParameters = weightBytes < 4 ? 0 : 4 * shardElements;
  } else
    mem.optimizer = states.optimizer;
  // The rank's chunk that keeps the most (the last of equals).
  int largest = r;
  for (int c = 0; c < chunks; ++c)
    if (stageActivations[c * ranks + r] >= stageActivations[largest])
      largest = c * ranks + r;
  double perChunk = stageActivations[largest], tail = stageTail[largest];
  double received = working.gradientReceived[largest];
  int inFlight = std::max(1, peakInFlight);
  // What the in-flight microbatches keep: inFlight times the chunk's, or
  // under the interleaved schedule the schedule's own mix of chunks.
  double held = inFlight * perChunk;
  if (chunks > 1) {
    std::vector<double> chunkBytes;
    for (int c = 0; c < chunks; ++c)
      chunkBytes.push_back(stageActivations[c * ranks + r]);
    held = std::max(perChunk, peakHeldBytes(strategy.schedule, r, ranks, chunks, ctx.m, chunkBytes));
  }
  // The peak: as the backward pass starts (everything kept, the loss's
  // gradients, or on an earlier stage the outputs' received ones, in
  // flight), inside a layer's backward pass (the head's
  // tensors freed, the layer's remade ones held), or before the layers
  // (the other microbatches' tensors and what the first ops keep).
  mem.activations =
      std::max({held / gridShare + maxOtherWorking[r] + received, (held - tail) / gridShare + maxLayerWorking[r],
                ((held - perChunk) / gridShare + maxHeadWorking[r])});
  mem.communication = (dpSize > 1 ? 2 * std::min(options.bucketBytes, gradBytes) : 0) +
                      (strategy.zero == 3 ? 2 * layerParams[r] * weightBytes : 0);
  mem.workspace = options.workspaceBytes;
  return mem;
}

} // namespace colossal::cost
