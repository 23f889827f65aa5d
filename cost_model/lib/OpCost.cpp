//===- OpCost.cpp - what one op costs on one rank -------------------------===//

#include "OpCost.h"
#include "KernelTime.h"

#include "colossal/cost/TensorGrid.h"

#include <algorithm>

namespace colossal::cost {
namespace {

/// The grid algorithm's collectives for one op (TensorGrid.h).
void addGridCollectives(const Graph &graph, const Op &op, const Strategy &strategy, const Mesh &mesh,
                        const Cluster &cluster, int q, int depth, std::vector<CommEvent> &forward,
                        std::vector<CommEvent> &backward, double &forwardSeconds, double &backwardSeconds) {
  auto emit = [&](const std::vector<GridCollective> &list, std::vector<CommEvent> &events, double &seconds) {
    for (const GridCollective &c : list) {
      int axis = mesh.axisIndex(c.axis);
      if (axis < 0 || mesh.axes[axis].size == 1)
        continue;
      double t = collectiveTime(c.collective, c.bytes, mesh.axes[axis], cluster);
      for (int i = 0; i < c.calls; ++i)
        events.push_back({c.collective, axis, c.bytes, t});
      seconds += t * c.calls;
    }
  };
  auto full = [&](const TensorUse &use) { return fullElements(op, use.dims) * bytesOf(graph.values[use.value].dtype); };
  const TensorUse *weight = nullptr;
  for (const TensorUse &use : op.inputs)
    if (graph.values[use.value].isParameter && use.dims.size() == 2)
      weight = &use;
  if (op.kind == OpKind::MatMul && weight && !op.inputs.empty() && !op.outputs.empty()) {
    // A fused projection's outputs (query, key and value) are one product:
    // Y is all of them.
    double y = 0;
    for (const TensorUse &out : op.outputs)
      y += full(out);
    GridLinear g = gridLinear(strategy.tpMode, q, depth, full(op.inputs[0]), full(*weight), y);
    emit(g.forward, forward, forwardSeconds);
    emit(g.backward, backward, backwardSeconds);
    return;
  }
  if (op.kind == OpKind::Norm || op.kind == OpKind::Loss) {
    // Statistics over the split hidden (or vocabulary) dimension: two
    // reductions of one fp32 value per row forward, two backward (three
    // forward for the loss: max, sum of exponentials, target logit).
    double rows = 1;
    for (const Factor &f : op.factors)
      if (f.kind != FactorKind::Whole)
        rows *= double(f.size);
    double bytes = rows * 4 / (double(q) * (strategy.tpMode == TensorMode::TwoD ? 1 : depth));
    int forwardCalls = op.kind == OpKind::Loss ? 3 : 2, backwardCalls = op.kind == OpKind::Loss ? 0 : 2;
    emit({{Collective::AllReduce, "tp_col", bytes, forwardCalls}}, forward, forwardSeconds);
    if (backwardCalls)
      emit({{Collective::AllReduce, "tp_col", bytes, backwardCalls}}, backward, backwardSeconds);
  }
}

/// How many more ways the producer split an input than the op reads it:

} // namespace

OpCoster::OpCoster(const EstimateContext &ctx) : ctx(ctx) {
  const Graph &graph = ctx.graph;
  // Parameters: the first consumer's layout is the storage layout.
  paramOwnerOp.assign(graph.values.size(), -1);
  paramUse.assign(graph.values.size(), -1);
  for (size_t o = 0; o < graph.ops.size(); ++o)
    for (size_t i = 0; i < graph.ops[o].inputs.size(); ++i) {
      int v = graph.ops[o].inputs[i].value;
      if (graph.values[v].isParameter && paramOwnerOp[v] < 0) {
        paramOwnerOp[v] = int(o);
        paramUse[v] = int(i);
      }
    }

  needsGradient = valuesNeedingGradient(graph);
  // Ops reading one value in the same layout share its resharding: forward
  // it is resharded once and each reads the result; backward their
  // gradients, laid out alike, are summed locally and resharded once (the
  // partitioner inserts one collective per value and layout). The first
  // such reader pays. Decided when an op is costed (one layer's ops stand
  // for all), from each value's readers in order.
  // Each value's readers in op order, as one flat array indexed by value
  // (a pass over the inputs, no allocation per value).
  readerStart.assign(graph.values.size() + 1, 0);
  for (const Op &op : graph.ops)
    for (const TensorUse &use : op.inputs)
      ++readerStart[size_t(use.value) + 1];
  for (size_t v = 0; v < graph.values.size(); ++v)
    readerStart[v + 1] += readerStart[v];
  readerList.assign(size_t(readerStart.back()), {0, 0});
  {
    std::vector<int> next(readerStart.begin(), readerStart.end() - 1);
    for (size_t o = 0; o < graph.ops.size(); ++o)
      for (size_t i = 0; i < graph.ops[o].inputs.size(); ++i)
        readerList[size_t(next[size_t(graph.ops[o].inputs[i].value)]++)] = {int(o), int(i)};
  }
}

TensorSpec OpCoster::layoutOf(int o, int i, bool gradient) const {
  const Op &op = ctx.graph.ops[size_t(o)];
  const TensorUse &use = op.inputs[size_t(i)];
  return gradient ? gradientSpecOf(op, ctx.sharding[size_t(o)], ctx.mesh, use)
                  : specOf(op, ctx.sharding[size_t(o)], ctx.mesh, use, false);
}

bool OpCoster::firstToRead(size_t o, size_t i, bool gradient) const {
  int v = ctx.graph.ops[o].inputs[i].value;
  if (readerStart[size_t(v) + 1] - readerStart[size_t(v)] == 1)
    return true;
  TensorSpec mine = layoutOf(int(o), int(i), gradient);
  for (int r = readerStart[size_t(v)]; r < readerStart[size_t(v) + 1]; ++r) {
    auto [p, j] = readerList[size_t(r)];
    if (size_t(p) == o && size_t(j) == i)
      return true;
    TensorSpec theirs = layoutOf(p, j, gradient);
    if (theirs.dims == mine.dims && theirs.partial == mine.partial)
      return false;
  }
  return true;
}

void OpCoster::computeTime(size_t o, Work &work, OpCost &cost) const {
  const Graph &graph = ctx.graph;
  const Cluster &cluster = ctx.cluster;
  const Mesh &mesh = ctx.mesh;
  const double gridShare = ctx.gridShare;
  const double weightShare = ctx.weightShare;
  const Op &op = ctx.graph.ops[o];
  const OpSharding &s = ctx.sharding[o];
  double &fraction = work.fraction;
  double &fwd = work.fwd;
  double &bwd = work.bwd;
  fraction = localFraction(op, s, mesh) / gridShare;
  double bytes = 0;
  for (const TensorUse &use : op.inputs)
    bytes += localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype) /
             (graph.values[use.value].isParameter ? weightShare : gridShare);
  double outputBytes = 0;
  for (const TensorUse &use : op.outputs)
    outputBytes += localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype) / gridShare;
  bytes += outputBytes;
  // The gradients its backward pass makes: the activations' first, then
  // its weights' in the weights' own layout (read through a transposed
  // view too: the product reads it transposed in place), each weight's
  // held until the trainer takes it. A weight's view makes nothing.
  auto gradientBytesOf = [&](size_t i) {
    const TensorUse &use = op.inputs[i];
    return localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype) / gridShare;
  };
  auto isWeightGradient = [&](size_t i) {
    const Value &value = graph.values[op.inputs[i].value];
    bool viewed = value.producer >= 0 && graph.ops[size_t(value.producer)].weightView;
    return (value.isParameter || viewed) && needsGradient[size_t(op.inputs[i].value)];
  };
  auto isActivationGradient = [&](size_t i) {
    return graph.values[op.inputs[i].value].producer >= 0 && !op.relabels && !isWeightGradient(i);
  };
  double activationGradients = 0, weightGradients = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (isWeightGradient(i))
      weightGradients += gradientBytesOf(i);
    else if (isActivationGradient(i))
      activationGradients += gradientBytesOf(i);
  }
  cost.backwardWorking = outputBytes + activationGradients + weightGradients;
  // A batched contraction makes one operand's gradient at a time, each
  // from the other operand copied transposed; that operand is freed once
  // copied (its last use), so the copy and the gradient it makes weigh as
  // the larger of the two, not both.
  if (op.transposedForGradient.size() > 0 && op.inputs.size() >= 2 && !op.relabels) {
    double phase = 0;
    for (int i : op.transposedForGradient) {
      if (i < 0 || i > 1)
        continue;
      double gradient = isActivationGradient(size_t(1 - i)) ? gradientBytesOf(size_t(1 - i)) : 0;
      phase = std::max(phase, std::max(gradientBytesOf(size_t(i)), gradient) - gradient);
    }
    cost.backwardWorking += phase;
  }
  // A product of two activations frees its second factor, when only it
  // reads it, once the first factor's gradient is made from it: the
  // second factor and its gradient are not held at once.
  if (op.gradientsInTurn && op.inputs.size() == 2 && isActivationGradient(0) && isActivationGradient(1) &&
      readerStart[size_t(op.inputs[1].value) + 1] - readerStart[size_t(op.inputs[1].value)] == 1)
    cost.backwardWorking -= gradientBytesOf(1);
  if (op.weightView)
    cost.backwardWorking = 0;
  int ringRanks =
      ctx.strategy.spMode == SequenceMode::Ring && op.attentionCore && ctx.sp >= 0 ? mesh.axes[size_t(ctx.sp)].size : 0;
  KernelSeconds kernels = kernelSeconds(graph, op, s, mesh, cluster, bytes, gridShare, ringRanks);
  fwd = kernels.forward;
  bwd = kernels.backward;
}

void OpCoster::reshardInputs(size_t o, Work &work, OpCost &cost) const {
  const Graph &graph = ctx.graph;
  const Strategy &strategy = ctx.strategy;
  const Cluster &cluster = ctx.cluster;
  const Mesh &mesh = ctx.mesh;
  const GraphSharding &sharding = ctx.sharding;
  const std::vector<int> &opStage = ctx.opStage;
  const int pp = ctx.pp;
  const int sp = ctx.sp;
  const Op &op = ctx.graph.ops[o];
  const OpSharding &s = ctx.sharding[o];
  int stage = ctx.opStage[o];
  double &fwd = work.fwd;
  double &bwd = work.bwd;
  double &fwdComm = work.forwardComm;
  double &bwdComm = work.backwardComm;
  std::vector<CommEvent> &forwardEvents = work.forwardEvents;
  std::vector<CommEvent> &backwardEvents = work.backwardEvents;
  // Forward resharding of every input that some op produced.
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorUse &use = op.inputs[i];
    const Value &value = graph.values[use.value];
    double full = fullElements(op, use.dims) * bytesOf(value.dtype);
    TensorSpec wanted = specOf(op, s, mesh, use, false);
    bool paysBackward = needsGradient[size_t(use.value)] && firstToRead(o, i, true);
    if (value.isParameter) {
      if (!paysBackward)
        continue;
      // Gradients of a weight that the op computes split over an axis the
      // weight is not split over (the sequence under sequence parallelism)
      // are partial sums over that axis.
      TensorSpec grad = gradientSpecOf(op, s, mesh, use);
      // Under Megatron sequence parallelism a row-parallel layer's bias is
      // added after the reduce-scatter, to the rank's tokens: its gradient
      // is a partial sum over the tensor axis too.
      int tpAxis = mesh.axisIndex("tp");
      if (strategy.spMode == SequenceMode::Megatron && tpAxis >= 0 && mesh.axes[tpAxis].size > 1 &&
          grad.partial.empty())
        for (size_t f = 0; f < op.factors.size(); ++f)
          if (op.factors[f].kind == FactorKind::Reduction && !indexes(use, int(f)) &&
              std::find(s[f].begin(), s[f].end(), tpAxis) != s[f].end() &&
              std::none_of(s.begin(), s.end(), [&](const std::vector<int> &axes) {
                return std::find(axes.begin(), axes.end(), tpAxis) != axes.end() && &axes != &s[f];
              }))
            grad.partial = {tpAxis};
      TensorSpec storage = wanted;
      int owner = paramOwnerOp[use.value];
      if (owner >= 0)
        storage = specOf(graph.ops[owner], sharding[owner], mesh, graph.ops[owner].inputs[paramUse[use.value]], false);
      bwdComm += reshard(grad, storage, full, mesh, cluster, backwardEvents);
      continue;
    }
    if (value.producer < 0)
      continue; // data: each rank reads the slice it needs
    const Op &producer = graph.ops[value.producer];
    const OpSharding &ps = sharding[value.producer];
    const TensorUse *produced = nullptr;
    for (const TensorUse &out : producer.outputs)
      if (out.value == use.value)
        produced = &out;
    TensorSpec have = specOf(producer, ps, mesh, *produced, true);
    std::vector<CommEvent> events;
    double t = firstToRead(o, i, false) ? reshard(have, wanted, full, mesh, cluster, events) : 0.0;
    bool ring = strategy.spMode == SequenceMode::Ring && op.attentionCore && sp >= 0;
    for (CommEvent &e : events) {
      if (ring && e.axis == sp && e.collective == Collective::AllGather) {
        // Ring attention: the gathered keys and values travel around the
        // ring one chunk per step, overlapped with the attention blocks.
        int n = mesh.axes[sp].size;
        double chunk = e.bytes / n;
        double step = collectiveTime(Collective::SendRecv, chunk, mesh.axes[sp], cluster);
        double ringTime = (n - 1) * step;
        t += std::max(0.0, ringTime - fwd) - e.seconds;
        e = {Collective::SendRecv, sp, chunk * (n - 1), std::max(0.0, ringTime - fwd)};
      }
      forwardEvents.push_back(e);
    }
    fwdComm += t;
    // The gradient flows back: from this operand's gradient layout to the
    // producer's output layout (whose pending sums are now replicated).
    TensorSpec back = have;
    back.partial.clear();
    std::vector<CommEvent> bEvents;
    double bt = paysBackward ? reshard(gradientSpecOf(op, s, mesh, use), back, full, mesh, cluster, bEvents) : 0.0;
    for (CommEvent &e : bEvents) {
      if (ring && e.axis == sp && e.collective == Collective::ReduceScatter) {
        int n = mesh.axes[sp].size;
        double chunk = e.bytes / n;
        double ringTime = (n - 1) * collectiveTime(Collective::SendRecv, chunk, mesh.axes[sp], cluster);
        bt += std::max(0.0, ringTime - bwd) - e.seconds;
        e = {Collective::SendRecv, sp, chunk * (n - 1), std::max(0.0, ringTime - bwd)};
      }
      backwardEvents.push_back(e);
    }
    bwdComm += bt;
    // A pipeline boundary: activations forward, gradients back (the bytes
    // are counted once per value and stage, on the sending ranks:
    // Estimator.cpp's pipelineTransfers).
    if (pp >= 0 && opStage[value.producer] != stage && mesh.axes[pp].size > 1) {
      double local = localElements(op, s, mesh, use.dims) * bytesOf(value.dtype);
      double t = collectiveTime(Collective::SendRecv, local, mesh.axes[pp], cluster);
      cost.p2p = std::max(cost.p2p, t);
    }
  }
}

void OpCoster::axisCollectives(size_t o, Work &work) const {
  const Graph &graph = ctx.graph;
  const Strategy &strategy = ctx.strategy;
  const Cluster &cluster = ctx.cluster;
  const Mesh &mesh = ctx.mesh;
  const bool grid = ctx.grid;
  const int gridQ = ctx.gridQ, gridDepth = ctx.gridDepth;
  const int sp = ctx.sp;
  const Op &op = ctx.graph.ops[o];
  const OpSharding &s = ctx.sharding[o];
  double &fraction = work.fraction;
  double &fwd = work.fwd;
  double &bwd = work.bwd;
  double &fwdComm = work.forwardComm;
  double &bwdComm = work.backwardComm;
  std::vector<CommEvent> &forwardEvents = work.forwardEvents;
  std::vector<CommEvent> &backwardEvents = work.backwardEvents;
  std::vector<CommEvent> &ringForward = work.ringForward;
  double &ringSeconds = work.ringSeconds;
  // Vocabulary-parallel cross-entropy (runtime VocabularyParallel.h):
  // forward, each row's maximum over the split vocabulary, then its sum of
  // exponentials and label logit in one call; the backward recomputes the
  // softmax from the logits, so the maximum and the sum again.
  if (op.kind == OpKind::Loss)
    for (size_t f = 0; f < op.factors.size(); ++f)
      if (op.factors[f].kind == FactorKind::Whole)
        for (int a : s[f])
          if (mesh.axes[a].size > 1) {
            double rows = 1;
            for (const Factor &other : op.factors)
              if (other.kind != FactorKind::Whole)
                rows *= double(other.size);
            rows *= fraction * double(ways(s, mesh, int(f)));
            auto sum = [&](double floats, std::vector<CommEvent> &events, double &seconds) {
              CommEvent e{Collective::AllReduce, a, rows * 4 * floats,
                          collectiveTime(Collective::AllReduce, rows * 4 * floats, mesh.axes[a], cluster)};
              seconds += e.seconds;
              events.push_back(e);
            };
            sum(1, forwardEvents, fwdComm);
            sum(2, forwardEvents, fwdComm);
            sum(1, backwardEvents, bwdComm);
            sum(1, backwardEvents, bwdComm);
          }

  auto splitOver = [&](int axis, bool whole) {
    for (size_t f = 0; f < op.factors.size(); ++f)
      if ((op.factors[f].kind == FactorKind::Whole) == whole && std::find(s[f].begin(), s[f].end(), axis) != s[f].end())
        return true;
    return false;
  };
  bool sequenceAxis = sp >= 0 && mesh.axes[sp].size > 1;
  auto addEvent = [&](Collective c, double bytes, std::vector<CommEvent> &events, double &seconds, double hidden = 0) {
    double t = collectiveTime(c, bytes, mesh.axes[sp], cluster);
    events.push_back({c, sp, bytes, std::max(0.0, t - hidden)});
    seconds += std::max(0.0, t - hidden);
  };
  if (sumsLossOverSequence(op, s, mesh, sp)) {
    addEvent(Collective::AllReduce, kLossSumForwardBytes, forwardEvents, fwdComm);
    addEvent(Collective::AllReduce, kLossSumBackwardBytes, backwardEvents, bwdComm);
  }
  // The ring's forward steps are the op's own work: recomputation runs
  // them again even when it keeps the collectives' results.
  // Ring self-attention (runtime RingAttention.h) as a partitioned
  // program runs it, the keys' tokens split over the sequence axis in
  // the op's own work: each rank's key and value blocks, with their mask
  // slice, travel P - 1 steps around the ring, overlapped with the
  // attention blocks; the backward runs that ring again, then P - 1 steps
  // with the blocks' gradient sums, and one step hands each block's
  // gradients home.
  if (strategy.spMode == SequenceMode::Ring && op.attentionCore && sequenceAxis && op.inputs.size() >= 3 &&
      splitOver(sp, true)) {
    auto local = [&](size_t i) {
      return localElements(op, s, mesh, op.inputs[i].dims) * bytesOf(graph.values[op.inputs[i].value].dtype);
    };
    double kv = local(1) + local(2), blocks = kv + (op.inputs.size() > 3 ? local(3) : 0);
    int steps = mesh.axes[sp].size - 1;
    for (int k = 0; k < steps; ++k) {
      addEvent(Collective::SendRecv, blocks, ringForward, ringSeconds, fwd / steps);
      addEvent(Collective::SendRecv, blocks, backwardEvents, bwdComm, bwd / (2 * steps + 1));
      addEvent(Collective::SendRecv, blocks + kv, backwardEvents, bwdComm, bwd / (2 * steps + 1));
    }
    addEvent(Collective::SendRecv, kv, backwardEvents, bwdComm);
    forwardEvents.insert(forwardEvents.end(), ringForward.begin(), ringForward.end());
    fwdComm += ringSeconds;
  }

  // Megatron sequence parallelism keeps a gathered input as its shard and
  // gathers it again for the weight gradient.
  if (strategy.spMode == SequenceMode::Megatron)
    for (const SavedTensor &saved : op.saved)
      if (saved.input >= 0)
        for (const CommEvent &e : forwardEvents)
          if (e.collective == Collective::AllGather) {
            bwdComm += e.seconds;
            backwardEvents.push_back(e);
          }
  if (grid)
    addGridCollectives(graph, op, strategy, mesh, cluster, gridQ, gridDepth, forwardEvents, backwardEvents, fwdComm,
                       bwdComm);
}

OpCost OpCoster::cost(size_t o) const {
  OpCost cost;
  Work work;
  computeTime(o, work, cost);
  reshardInputs(o, work, cost);
  axisCollectives(o, work);
  const Strategy &strategy = ctx.strategy;
  const EstimateOptions &options = ctx.options;
  const Op &op = ctx.graph.ops[o];
  const OpSharding &s = ctx.sharding[o];
  double &fwd = work.fwd;
  double &bwd = work.bwd;
  double &fwdComm = work.forwardComm;
  double &bwdComm = work.backwardComm;
  std::vector<CommEvent> &forwardEvents = work.forwardEvents;
  std::vector<CommEvent> &backwardEvents = work.backwardEvents;
  std::vector<CommEvent> &ringForward = work.ringForward;
  double &ringSeconds = work.ringSeconds;
  double recompute = 0;
  if (op.layer >= 0 && (strategy.recompute == Recompute::Full ||
                        (strategy.recompute == Recompute::Selective && op.recomputedWhenSelective)))
    recompute =
        fwd + (strategy.recompute == Recompute::Full ? (options.recomputeCollectives ? fwdComm : ringSeconds) : 0);
  cost.forward = fwd;
  cost.backward = bwd + recompute;
  cost.forwardComm = fwdComm;
  cost.backwardComm = bwdComm;
  if (strategy.recompute == Recompute::Full && op.layer >= 0) {
    if (options.recomputeCollectives)
      for (const CommEvent &e : forwardEvents)
        if (e.collective != Collective::SendRecv)
          cost.recomputedEvents.push_back(e);
    cost.recomputedEvents.insert(cost.recomputedEvents.end(), ringForward.begin(), ringForward.end());
  }
  cost.forwardEvents = std::move(forwardEvents);
  cost.backwardEvents = std::move(backwardEvents);
  return cost;
}

} // namespace colossal::cost
