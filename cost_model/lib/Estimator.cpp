//===- Estimator.cpp - step time and memory of a plan ---------------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TensorGrid.h"
#include "ShardedCosts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace colossal::cost {
namespace {

void addComm(std::vector<CommTotal> &totals, const Mesh &mesh, const CommEvent &e,
             double times) {
  for (CommTotal &t : totals)
    if (t.collective == e.collective && t.axis == mesh.axes[e.axis].name) {
      t.bytes += e.bytes * times;
      t.seconds += e.seconds * times;
      t.calls += int(times);
      return;
    }
  totals.push_back({e.collective, mesh.axes[e.axis].name, e.bytes * times, e.seconds * times,
                    int(times)});
}


/// The grid algorithm's collectives for one op (TensorGrid.h).
void addGridCollectives(const Graph &graph, const Op &op, const Strategy &strategy,
                        const Mesh &mesh, const Cluster &cluster, int q, int depth,
                        std::vector<CommEvent> &forward, std::vector<CommEvent> &backward,
                        double &forwardSeconds, double &backwardSeconds) {
  auto emit = [&](const std::vector<GridCollective> &list, std::vector<CommEvent> &events,
                  double &seconds) {
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
  auto full = [&](const TensorUse &use) {
    return fullElements(op, use.dims) * bytesOf(graph.values[use.value].dtype);
  };
  const TensorUse *weight = nullptr;
  for (const TensorUse &use : op.inputs)
    if (graph.values[use.value].isParameter && use.dims.size() == 2)
      weight = &use;
  if (op.kind == OpKind::MatMul && weight && !op.inputs.empty() && !op.outputs.empty()) {
    GridLinear g = gridLinear(strategy.tpMode, q, depth, full(op.inputs[0]), full(*weight),
                              full(op.outputs[0]));
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
/// the saving when the op keeps the producer's shard and gathers it again.
double producerExtraSplit(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                          const Op &op, const OpSharding &s, const TensorUse &use) {
  const Value &value = graph.values[use.value];
  if (value.producer < 0)
    return 1;
  const Op &producer = graph.ops[value.producer];
  for (const TensorUse &out : producer.outputs)
    if (out.value == use.value) {
      double here = fullElements(op, use.dims) / localElements(op, s, mesh, use.dims);
      double there = fullElements(producer, out.dims) /
                     localElements(producer, sharding[value.producer], mesh, out.dims);
      return std::max(1.0, there / here);
    }
  return 1;
}

/// The value a saved tensor is (-1: a mask, which only its op keeps).
int savedValue(const Op &op, const SavedTensor &saved) {
  if (saved.input >= 0 && size_t(saved.input) < op.inputs.size())
    return op.inputs[size_t(saved.input)].value;
  if (saved.output >= 0 && size_t(saved.output) < op.outputs.size())
    return op.outputs[size_t(saved.output)].value;
  return -1;
}

/// Whether `value` (-1: a mask, only its op's) is to be counted now: a value
/// several ops keep is held once, by the first.
bool holdOnce(std::vector<char> &held, int value) {
  if (value < 0)
    return true;
  if (held[size_t(value)])
    return false;
  held[size_t(value)] = 1;
  return true;
}

/// Whether op `o`'s input `i` is an activation reaching its layer from
/// outside it (the residual stream, a table made before the layers): not
/// a weight or a weight's view, not made in the layer.
bool readsFromOutsideLayer(const Graph &graph, size_t o, size_t i) {
  const Op &op = graph.ops[o];
  const Value &value = graph.values[size_t(op.inputs[i].value)];
  if (value.isParameter || value.producer < 0)
    return false;
  const Op &producer = graph.ops[size_t(value.producer)];
  return producer.layer != op.layer && !producer.weightView;
}

/// Bytes op `o` keeps for backward on one rank under selective or no
/// recomputation; a value already in `held` (kept by an earlier op) is not
/// kept twice.
double opSavedBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                           size_t o, Recompute recompute, bool keepShardedInputs, std::vector<char> &held,
                           const std::vector<char> *exchanged = nullptr) {
  const Op &op = graph.ops[o];
  double bytes = 0;
  for (const SavedTensor &saved : op.saved) {
    if (recompute == Recompute::Selective && saved.recomputedWhenSelective &&
        !(exchanged && savedValue(op, saved) >= 0 && (*exchanged)[size_t(savedValue(op, saved))]))
      continue;
    // The step's inputs (the batch) are the trainer's, held whether or not
    // an op reads them again.
    if (int value = savedValue(op, saved);
        value >= 0 && graph.values[size_t(value)].producer < 0 && !graph.values[size_t(value)].isParameter)
      continue;
    if (!holdOnce(held, savedValue(op, saved)))
      continue;
    double kept = localElements(op, sharding[o], mesh, saved.dims) * bytesOf(saved.dtype);
    if (keepShardedInputs && saved.input >= 0)
      kept /= producerExtraSplit(graph, sharding, mesh, op, sharding[o], op.inputs[saved.input]);
    bytes += kept;
  }
  return bytes;
}

/// Selective recomputation re-runs a layer's cheap ops from what the layer
/// keeps: the results of its contractions and its inputs from outside it.
/// Adds to `bytes` (per layer) those a re-run op reads that no op already
/// keeps, for the ops whose results the backward pass needs (a saved tensor
/// made again, or another needed re-run op's input).
void addRecomputationSources(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                             std::vector<double> &bytes, std::vector<char> &held,
                             const std::vector<char> *exchanged) {
  auto isExchanged = [&](int value) { return exchanged && (*exchanged)[size_t(value)]; };
  auto remade = [&](int producer, int layer) {
    return producer >= 0 && graph.ops[size_t(producer)].layer == layer &&
           graph.ops[size_t(producer)].recomputedWhenSelective;
  };
  // Values the backward pass needs made again: saved tensors not kept (a
  // collective's result is kept: the re-runs stop there).
  std::vector<char> readByNeeded(graph.values.size(), 0);
  for (const Op &op : graph.ops)
    for (const SavedTensor &saved : op.saved)
      if (int value = savedValue(op, saved); value >= 0 && saved.recomputedWhenSelective && !isExchanged(value))
        readByNeeded[size_t(value)] = 1;
  for (size_t o = graph.ops.size(); o-- > 0;) {
    const Op &op = graph.ops[o];
    if (op.layer < 0 || op.layer >= int(bytes.size()) || !op.recomputedWhenSelective)
      continue;
    // A mask or output the op keeps itself is made again by running it.
    bool need = false;
    for (const SavedTensor &saved : op.saved)
      need |= saved.recomputedWhenSelective;
    for (const TensorUse &use : op.outputs)
      need |= bool(readByNeeded[size_t(use.value)]);
    if (!need)
      continue;
    for (const TensorUse &use : op.inputs) {
      const Value &value = graph.values[size_t(use.value)];
      // An input the layer makes again is needed in turn; one from outside
      // the layer (another layer's checkpoint) is read as kept.
      if (remade(value.producer, op.layer) && !isExchanged(use.value)) {
        readByNeeded[size_t(use.value)] = 1;
        continue;
      }
      if (value.isParameter || value.producer < 0 || !holdOnce(held, use.value))
        continue;
      bytes[size_t(op.layer)] += localElements(op, sharding[o], mesh, use.dims) * bytesOf(value.dtype);
    }
  }
}

/// Under recomputation, what a layer's backward pass holds while each op's
/// backward runs on top of the layer's kept bytes (0 outside the layers):
/// its remade tensors then alive, less selective recomputation's kept
/// sources already freed. The program re-runs an op just before the first
/// backward op that needs its result (or the re-run of a later op that
/// reads it) and frees the result after its last use, so a remade tensor
/// lives from the backward of its last reader in the forward order down to
/// that of its first, not for the whole layer.
std::vector<double> remadeLiveBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                                    Recompute recompute, const std::vector<char> &exchanged) {
  std::vector<double> live(graph.ops.size() + 1, 0.0);
  if (recompute == Recompute::None)
    return live;
  // A value leaving its layer (read by an op of another layer or outside
  // the layers) is a checkpoint: kept, never made again.
  std::vector<char> leaves(graph.values.size(), 0);
  for (const Op &op : graph.ops)
    for (const TensorUse &use : op.inputs)
      if (int producer = graph.values[size_t(use.value)].producer;
          producer >= 0 && graph.ops[size_t(producer)].layer != op.layer)
        leaves[size_t(use.value)] = 1;
  auto reruns = [&](const Op &op) {
    return op.layer >= 0 && (recompute == Recompute::Full || op.recomputedWhenSelective);
  };
  auto remade = [&](int value) {
    int producer = graph.values[size_t(value)].producer;
    return producer >= 0 && !leaves[size_t(value)] && !exchanged[size_t(value)] &&
           reruns(graph.ops[size_t(producer)]);
  };
  // Per value: the backward op (by forward index) that first needs it made
  // again, the last that reads it, and its bytes (from a reader that keeps
  // it; -1 when no backward op reads it and it only feeds re-runs).
  const int none = -1;
  std::vector<int> first(graph.values.size(), none), last(graph.values.size(), none);
  std::vector<double> bytes(graph.values.size(), -1.0);
  std::vector<double> masks(graph.ops.size(), 0.0);
  // Selective recomputation: where the re-runs last read each kept tensor
  // they start from, and whether a backward op keeps it anyway.
  std::vector<int> sourceReadAt(graph.values.size(), none);
  std::vector<double> sourceBytes(graph.values.size(), 0.0);
  std::vector<char> keptByBackward(graph.values.size(), 0);
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    if (op.layer < 0)
      continue;
    for (const SavedTensor &saved : op.saved) {
      double size = localElements(op, sharding[o], mesh, saved.dims) * bytesOf(saved.dtype);
      int value = savedValue(op, saved);
      if (value >= 0 && !(recompute == Recompute::Selective && saved.recomputedWhenSelective))
        keptByBackward[size_t(value)] = 1;
      if (value < 0) {
        // A mask: made again by its own op's re-run, read by its backward.
        if (reruns(op) && (recompute == Recompute::Full || saved.recomputedWhenSelective))
          masks[o] += size;
        continue;
      }
      if (!remade(value))
        continue;
      first[size_t(value)] = std::max(first[size_t(value)], int(o));
      last[size_t(value)] = last[size_t(value)] == none ? int(o) : std::min(last[size_t(value)], int(o));
      if (bytes[size_t(value)] < 0)
        bytes[size_t(value)] = size;
    }
  }
  // A re-run op reads its inputs when it runs again: at the first need of
  // its result (producers come before their readers, so one pass back).
  for (size_t o = graph.ops.size(); o-- > 0;) {
    const Op &op = graph.ops[o];
    if (!reruns(op))
      continue;
    // A mask it keeps is made again when its own backward needs it.
    int needed = masks[o] > 0 ? int(o) : none;
    for (const TensorUse &out : op.outputs)
      needed = std::max(needed, first[size_t(out.value)]);
    if (needed == none)
      continue;
    for (const TensorUse &use : op.inputs) {
      if (!remade(use.value)) {
        // A kept tensor the re-runs start from (under full recomputation a
        // collective's result): freed once the last of them has read it,
        // unless a backward op keeps it too.
        const Value &source = graph.values[size_t(use.value)];
        if ((recompute == Recompute::Selective || exchanged[size_t(use.value)]) && !source.isParameter &&
            source.producer >= 0 &&
            !leaves[size_t(use.value)]) {
          int &read = sourceReadAt[size_t(use.value)];
          read = read == none ? needed : std::min(read, needed);
          sourceBytes[size_t(use.value)] = localElements(op, sharding[o], mesh, use.dims) * bytesOf(source.dtype);
        }
        continue;
      }
      int &f = first[size_t(use.value)], &l = last[size_t(use.value)];
      f = std::max(f, needed);
      l = l == none ? needed : std::min(l, needed);
    }
  }
  // Recomputation's sources are kept (in the layer's bytes) until the
  // re-runs have read them: earlier in the layer's backward pass (at lower
  // forward indices) they are gone.
  std::vector<int> layerStart(size_t(std::max(0, graph.numLayers)), -1);
  for (size_t o = 0; o < graph.ops.size(); ++o)
    if (int l = graph.ops[o].layer; l >= 0 && l < graph.numLayers && layerStart[size_t(l)] < 0)
      layerStart[size_t(l)] = int(o);
  std::vector<double> change(graph.ops.size() + 1, 0.0);
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (sourceReadAt[v] == none || keptByBackward[v])
      continue;
    int layer = graph.ops[size_t(graph.values[v].producer)].layer;
    if (layer < 0 || layer >= graph.numLayers || layerStart[size_t(layer)] < 0)
      continue;
    change[size_t(layerStart[size_t(layer)])] -= sourceBytes[v];
    change[size_t(sourceReadAt[v]) + 1] += sourceBytes[v];
  }
  for (size_t v = 0; v < graph.values.size(); ++v)
    if (bytes[v] > 0 && first[v] != none) {
      change[size_t(last[v])] += bytes[v];
      change[size_t(first[v]) + 1] -= bytes[v];
    }
  // A mask is made when its op runs again (when its result is first
  // needed) and freed after the op's own backward.
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    if (masks[o] <= 0)
      continue;
    int made = int(o);
    for (const TensorUse &out : graph.ops[o].outputs)
      made = std::max(made, first[size_t(out.value)]);
    change[o] += masks[o];
    change[size_t(made) + 1] -= masks[o];
  }
  double running = 0;
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    running += change[o];
    live[o] = running;
  }
  return live;
}

/// Per layer, the bytes kept for backward under `recompute` (one pass over
/// the graph, so evaluating a deep model stays linear in its depth).
std::vector<double> layerActivationBytes(const Graph &graph, const GraphSharding &sharding,
                                                const Mesh &mesh, Recompute recompute,
                                                bool keepShardedInputs,
                                                const std::vector<char> *exchanged = nullptr) {
  std::vector<double> bytes(std::max(0, graph.numLayers), 0.0);
  std::vector<char> held(graph.values.size(), 0);
  // An op whose every result leaves its layer (the residual add making the
  // layer's output) is not run again: the output is the next checkpoint.
  std::vector<char> leaves(recompute == Recompute::Full ? graph.values.size() : 0, 0);
  for (size_t o = 0; o < graph.ops.size() && !leaves.empty(); ++o)
    for (const TensorUse &use : graph.ops[o].inputs)
      if (int producer = graph.values[size_t(use.value)].producer;
          producer >= 0 && graph.ops[size_t(producer)].layer != graph.ops[o].layer)
        leaves[size_t(use.value)] = 1;
  auto makesCheckpoint = [&](const Op &op) {
    return !op.outputs.empty() && std::all_of(op.outputs.begin(), op.outputs.end(),
                                              [&](const TensorUse &out) { return leaves[size_t(out.value)]; });
  };
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    if (op.layer < 0 || op.layer >= int(bytes.size()))
      continue;
    if (recompute == Recompute::Full) {
      // Only the layer's inputs from outside it survive until the backward
      // pass reruns it (the residual stream, and what the re-runs read from
      // before the layers: a rotary table, a mask, kept once for every
      // layer), with the collectives' results (`exchanged`) an op run again
      // reads.
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        const Value &value = graph.values[size_t(op.inputs[i].value)];
        bool exchange = exchanged && (*exchanged)[size_t(op.inputs[i].value)] && !makesCheckpoint(op);
        if ((!readsFromOutsideLayer(graph, o, i) && !exchange) || !holdOnce(held, op.inputs[i].value))
          continue;
        bytes[op.layer] += localElements(op, sharding[o], mesh, op.inputs[i].dims) * bytesOf(value.dtype);
      }
      continue;
    }
    bytes[op.layer] += opSavedBytes(graph, sharding, mesh, o, recompute, keepShardedInputs, held, exchanged);
  }
  if (recompute == Recompute::Selective)
    addRecomputationSources(graph, sharding, mesh, bytes, held, exchanged);
  return bytes;
}

} // namespace

double savedActivationBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                            Recompute recompute, int layer, bool keepShardedInputs) {
  std::vector<double> bytes =
      layerActivationBytes(graph, sharding, mesh, recompute, keepShardedInputs);
  return layer >= 0 && layer < int(bytes.size()) ? bytes[layer] : 0.0;
}

std::optional<Estimate> estimate(const Graph &graph, const Strategy &strategy,
                                 const Cluster &cluster, std::string &error,
                                 const GraphSharding *explicitSharding,
                                 const EstimateOptions &options) {
  error.clear();
  if (strategy.devices() > cluster.devices()) {
    error = "the plan needs " + std::to_string(strategy.devices()) + " devices; the cluster has " +
            std::to_string(cluster.devices());
    return std::nullopt;
  }
  int chunks = strategy.schedule == Schedule::Interleaved ? strategy.virtualStages : 1;
  if (strategy.schedule != Schedule::Interleaved && strategy.virtualStages != 1) {
    error = "virtual_stages > 1 needs the interleaved schedule";
    return std::nullopt;
  }
  if (strategy.tpMode != TensorMode::OneD && tensorGrid(strategy).first == 0) {
    Mesh none;
    (void)checkSharding(Graph(), {}, none, strategy, error);
    return std::nullopt;
  }
  Mesh mesh = buildMesh(strategy, cluster);
  GraphSharding templated;
  if (!explicitSharding)
    templated = shardGraph(graph, strategy, mesh);
  const GraphSharding &sharding = explicitSharding ? *explicitSharding : templated;
  if (sharding.size() != graph.ops.size()) {
    error = "the sharding covers " + std::to_string(sharding.size()) + " ops, the graph has " +
            std::to_string(graph.ops.size());
    return std::nullopt;
  }
  if (!checkSharding(graph, sharding, mesh, strategy, error, options.layouts))
    return std::nullopt;

  // 2D/2.5D/3D tensor parallelism: every op's work and tensors are split
  // over the whole grid (weights over the q x q planes), and linear layers,
  // norms and the loss add the grid algorithms' collectives (TensorGrid.h).
  bool grid = strategy.tpMode != TensorMode::OneD && strategy.tp > 1;
  const std::pair<int, int> gridShape = tensorGrid(strategy);
  const int gridQ = gridShape.first, gridDepth = gridShape.second;
  double gridShare = grid ? double(strategy.tp) : 1.0;
  double weightShare =
      grid ? (strategy.tpMode == TensorMode::TwoPointFiveD ? double(gridQ) * gridQ : gridShare)
           : 1.0;
  int ranks = strategy.pp, stages = ranks * chunks, m = strategy.microbatches;
  // Real layers per stage: the plan's split, or equal shares (any
  // remainder on the last stage).
  const int64_t realLayers = graph.realLayers();
  std::vector<int64_t> split = strategy.stageLayers;
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
  int firstLayerOp = -1;
  for (size_t o = 0; o < graph.ops.size() && firstLayerOp < 0; ++o)
    if (graph.ops[o].layer >= 0)
      firstLayerOp = int(o);
  auto stageOf = [&](int o) {
    const Op &op = graph.ops[o];
    if (op.layer >= 0)
      return condensedStage[size_t(std::min(op.layer, graph.numLayers - 1))];
    return (firstLayerOp < 0 || o < firstLayerOp) ? 0 : stages - 1;
  };
  // How many copies of the op the graph stands for.
  auto repeatOf = [&](size_t o) { return double(graph.repeatOf(graph.ops[o].layer)); };
  std::vector<int> opStage(graph.ops.size());
  for (size_t o = 0; o < graph.ops.size(); ++o)
    opStage[o] = stageOf(int(o));

  int pp = mesh.axisIndex("pp"), dp = mesh.axisIndex("dp"), sp = mesh.axisIndex("sp");
  std::vector<StageEstimate> perStage(stages);
  std::vector<std::vector<CommTotal>> rankComm(ranks);
  bool keepSharded = strategy.spMode == SequenceMode::Megatron;
  // Sequence parallelism by all-to-all: recomputation does not re-run the
  // collectives around the attention core, so what they exchange (its
  // inputs from before it, its outputs to after it) stays kept.
  // Only recomputation reads them.
  bool recomputes = strategy.recompute != Recompute::None;
  std::vector<char> exchanged(graph.values.size(), 0);
  if (recomputes && strategy.spMode == SequenceMode::AllToAll && sp >= 0 && mesh.axes[size_t(sp)].size > 1)
    for (const Op &op : graph.ops)
      for (const TensorUse &use : op.inputs)
        if (int producer = graph.values[size_t(use.value)].producer;
            producer >= 0 && graph.ops[size_t(producer)].attentionCore != op.attentionCore)
          exchanged[size_t(use.value)] = 1;
  // Likewise the sums that make a layer's pending partial results whole (a
  // row-parallel linear's output under tensor parallelism): the program
  // keeps the all-reduce's result rather than run the collective again.
  for (const Op &op : graph.ops)
    for (const TensorUse &use : op.inputs)
      if (int producer = graph.values[size_t(use.value)].producer;
          recomputes && producer >= 0 && op.layer >= 0 && graph.ops[size_t(producer)].layer == op.layer)
        for (const TensorUse &out : graph.ops[size_t(producer)].outputs)
          if (out.value == use.value && pendingSum(graph.ops[size_t(producer)], sharding[size_t(producer)], mesh, out))
            exchanged[size_t(use.value)] = 1;
  std::vector<double> kept =
      layerActivationBytes(graph, sharding, mesh, strategy.recompute, keepSharded, &exchanged);
  // What a layer's backward pass has made again while each op's runs: of
  // all its activations under full recomputation, of the cheap ops'
  // results under selective.
  std::vector<double> remadeLive = remadeLiveBytes(graph, sharding, mesh, strategy.recompute, exchanged);
  // While a layer's branches run backward, the gradient of its residual
  // stream (its input's size) waits for theirs to be added to it.
  // Inside a layer's backward pass, what the layer's later ops kept is
  // freed already (their backward passes ran): a layer's own tensors are
  // not all held at its first op's turn. (Full recomputation keeps only the
  // layer's input, freed last.)
  std::vector<double> freedInLayer(graph.ops.size(), 0.0);
  if (strategy.recompute != Recompute::Full) {
    std::vector<char> held(graph.values.size(), 0);
    std::vector<double> saved(graph.ops.size(), 0.0);
    for (size_t o = 0; o < graph.ops.size(); ++o)
      if (graph.ops[o].layer >= 0)
        saved[o] = opSavedBytes(graph, sharding, mesh, o, strategy.recompute, keepSharded, held, &exchanged);
    double after = 0;
    for (size_t o = graph.ops.size(); o-- > 0;) {
      if (graph.ops[o].layer < 0)
        continue;
      if (o + 1 < graph.ops.size() && graph.ops[o + 1].layer != graph.ops[o].layer)
        after = 0;
      freedInLayer[o] = after;
      after += saved[o];
    }
  }
  std::vector<double> streamGradient(kept.size(), -1.0);
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    if (op.layer < 0 || size_t(op.layer) >= kept.size() || streamGradient[size_t(op.layer)] >= 0)
      continue;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (readsFromOutsideLayer(graph, o, i)) {
        streamGradient[size_t(op.layer)] = localElements(op, sharding[o], mesh, op.inputs[i].dims) *
                                           bytesOf(graph.values[op.inputs[i].value].dtype) / gridShare;
        break;
      }
  }
  // The backward pass's transient on top of what is kept: the largest of
  // an op's gradients in flight, with its layer's remade activations; the
  // ops after the last layer (the head, the loss) apart, since what they
  // keep is freed before the layers' backward pass begins (and what the
  // ones after an op keep, before its own: `tailWorking`, settled below).
  std::vector<double> maxLayerWorking(ranks, 0), maxOtherWorking(ranks, 0);
  std::vector<double> tailWorking(graph.ops.size(), 0.0), headWorking(graph.ops.size(), 0.0);
  size_t lastLayerOp = 0;
  for (size_t o = 0; o < graph.ops.size(); ++o)
    if (graph.ops[o].layer >= 0)
      lastLayerOp = o;
  // The ops after the layers run their backward passes first, each once
  // the ones after it have freed what they kept; without layers that is
  // every op. The ops before the layers (the embedding, whose gradient is
  // a weight's size) run theirs last, once the layers have freed theirs.
  size_t tailStart = firstLayerOp < 0 ? 0 : lastLayerOp + 1;
  // A weight read before the layers and after them (a tied embedding): the
  // gradient its later reader makes waits through the layers' backward pass
  // for the earlier reader's, on a rank holding both.
  std::vector<double> heldWeightGradient(size_t(stages), 0.0);
  {
    std::vector<int> firstReader(graph.values.size(), -1), lastReader(graph.values.size(), -1);
    std::vector<double> gradientBytes(graph.values.size(), 0.0);
    for (size_t o = 0; o < graph.ops.size(); ++o)
      for (const TensorUse &use : graph.ops[o].inputs) {
        const Value &value = graph.values[size_t(use.value)];
        if (!value.isParameter || value.frozen)
          continue;
        if (firstReader[size_t(use.value)] < 0) {
          firstReader[size_t(use.value)] = int(o);
          gradientBytes[size_t(use.value)] =
              localElements(graph.ops[o], sharding[o], mesh, use.dims) * bytesOf(value.dtype) / weightShare;
        }
        lastReader[size_t(use.value)] = int(o);
      }
    for (size_t v = 0; v < graph.values.size(); ++v) {
      int first = firstReader[v], last = lastReader[v];
      if (first >= 0 && firstLayerOp >= 0 && first < firstLayerOp && size_t(last) > lastLayerOp &&
          opStage[size_t(first)] == opStage[size_t(last)])
        heldWeightGradient[size_t(opStage[size_t(first)])] += gradientBytes[v];
    }
  }
  double p2pSeconds = 0;

  // Parameters: the first consumer's layout is the storage layout.
  std::vector<int> paramOwnerOp(graph.values.size(), -1), paramUse(graph.values.size(), -1);
  for (size_t o = 0; o < graph.ops.size(); ++o)
    for (size_t i = 0; i < graph.ops[o].inputs.size(); ++i) {
      int v = graph.ops[o].inputs[i].value;
      if (graph.values[v].isParameter && paramOwnerOp[v] < 0) {
        paramOwnerOp[v] = int(o);
        paramUse[v] = int(i);
      }
    }

  // Which values carry a gradient: trainable parameters and what is
  // computed from them (not the data, masks made from it, or integers).
  std::vector<char> needsGradient(graph.values.size(), 0);
  for (size_t v = 0; v < graph.values.size(); ++v)
    needsGradient[v] = graph.values[v].isParameter && !graph.values[v].frozen;
  for (const Op &op : graph.ops)
    for (const TensorUse &in : op.inputs)
      if (needsGradient[size_t(in.value)])
        for (const TensorUse &out : op.outputs)
          needsGradient[size_t(out.value)] = graph.values[size_t(out.value)].dtype != DType::I64 &&
                                             graph.values[size_t(out.value)].dtype != DType::I32 &&
                                             graph.values[size_t(out.value)].dtype != DType::I8;
  // Ops reading one value in the same layout share its resharding: forward
  // it is resharded once and each reads the result; backward their
  // gradients, laid out alike, are summed locally and resharded once (the
  // partitioner inserts one collective per value and layout). The first
  // such reader pays. Decided when an op is costed (one layer's ops stand
  // for all), from each value's readers in order.
  // Each value's readers in op order, as one flat array indexed by value
  // (a pass over the inputs, no allocation per value).
  std::vector<int> readerStart(graph.values.size() + 1, 0);
  for (const Op &op : graph.ops)
    for (const TensorUse &use : op.inputs)
      ++readerStart[size_t(use.value) + 1];
  for (size_t v = 0; v < graph.values.size(); ++v)
    readerStart[v + 1] += readerStart[v];
  std::vector<std::pair<int, int>> readerList(size_t(readerStart.back()));
  {
    std::vector<int> next(readerStart.begin(), readerStart.end() - 1);
    for (size_t o = 0; o < graph.ops.size(); ++o)
      for (size_t i = 0; i < graph.ops[o].inputs.size(); ++i)
        readerList[size_t(next[size_t(graph.ops[o].inputs[i].value)]++)] = {int(o), int(i)};
  }
  auto layoutOf = [&](int o, int i, bool gradient) {
    const Op &op = graph.ops[size_t(o)];
    const TensorUse &use = op.inputs[size_t(i)];
    return gradient ? gradientSpecOf(op, sharding[size_t(o)], mesh, use)
                    : specOf(op, sharding[size_t(o)], mesh, use, false);
  };
  auto firstToRead = [&](size_t o, size_t i, bool gradient) {
    int v = graph.ops[o].inputs[i].value;
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
  };

  // What one op costs on one rank for one microbatch.
  struct OpCost {
    double forward = 0, backward = 0, forwardComm = 0, backwardComm = 0;
    /// The op's backward pass holds its outputs' gradients while it makes
    /// its activation inputs' (the transient on top of what is kept).
    double backwardWorking = 0;
    double p2p = 0;
    std::vector<CommEvent> forwardEvents, backwardEvents, recomputedEvents;
  };
  auto costOf = [&](size_t o) {
    OpCost cost;
    const Op &op = graph.ops[o];
    const OpSharding &s = sharding[o];
    int stage = opStage[o];
    double fraction = localFraction(op, s, mesh) / gridShare;
    double bytes = 0;
    for (const TensorUse &use : op.inputs)
      bytes += localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype) /
               (graph.values[use.value].isParameter ? weightShare : gridShare);
    double outputBytes = 0;
    for (const TensorUse &use : op.outputs)
      outputBytes += localElements(op, s, mesh, use.dims) *
                     bytesOf(graph.values[use.value].dtype) / gridShare;
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
    DType dtype = op.outputs.empty() ? DType::BF16 : graph.values[op.outputs[0].value].dtype;
    double forwardFlops = op.forwardFlops * fraction, backwardFlops = op.backwardFlops * fraction;
    double rate = op.kind == OpKind::MatMul ? cluster.gemmRate(dtype, forwardFlops)
                                            : cluster.peak(DType::F32);
    double fwd = roofline(forwardFlops, bytes, rate, cluster.memoryBandwidth);
    double bwd = roofline(backwardFlops, 2 * bytes,
                          op.kind == OpKind::MatMul ? cluster.gemmRate(dtype, backwardFlops / 2)
                                                    : cluster.peak(DType::F32),
                          cluster.memoryBandwidth);

    // Forward resharding of every input that some op produced.
    std::vector<CommEvent> forwardEvents, backwardEvents;
    double fwdComm = 0, bwdComm = 0;
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
          storage = specOf(graph.ops[owner], sharding[owner], mesh,
                           graph.ops[owner].inputs[paramUse[use.value]], false);
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
          double ringTime =
              (n - 1) * collectiveTime(Collective::SendRecv, chunk, mesh.axes[sp], cluster);
          bt += std::max(0.0, ringTime - bwd) - e.seconds;
          e = {Collective::SendRecv, sp, chunk * (n - 1), std::max(0.0, ringTime - bwd)};
        }
        backwardEvents.push_back(e);
      }
      bwdComm += bt;
      // A pipeline boundary: activations forward, gradients back.
      if (pp >= 0 && opStage[value.producer] != stage && mesh.axes[pp].size > 1) {
        double local = localElements(op, s, mesh, use.dims) * bytesOf(value.dtype);
        double t = collectiveTime(Collective::SendRecv, local, mesh.axes[pp], cluster);
        cost.p2p = std::max(cost.p2p, t);
        forwardEvents.push_back({Collective::SendRecv, pp, local, 0});
        backwardEvents.push_back({Collective::SendRecv, pp, local, 0});
      }
    }
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
        if ((op.factors[f].kind == FactorKind::Whole) == whole &&
            std::find(s[f].begin(), s[f].end(), axis) != s[f].end())
          return true;
      return false;
    };
    bool sequenceAxis = sp >= 0 && mesh.axes[sp].size > 1;
    auto addEvent = [&](Collective c, double bytes, std::vector<CommEvent> &events, double &seconds,
                        double hidden = 0) {
      double t = collectiveTime(c, bytes, mesh.axes[sp], cluster);
      events.push_back({c, sp, bytes, std::max(0.0, t - hidden)});
      seconds += std::max(0.0, t - hidden);
    };
    // A loss over rows the sequence axis splits (each rank its tokens;
    // runtime SequenceParallel.h): the rows' losses and counted labels are
    // summed over the axis (two floats), and backward the count again (a
    // mean's divisor).
    if (op.kind == OpKind::Loss && sequenceAxis && splitOver(sp, false)) {
      addEvent(Collective::AllReduce, 8, forwardEvents, fwdComm);
      addEvent(Collective::AllReduce, 4, backwardEvents, bwdComm);
    }
    // The ring's forward steps are the op's own work: recomputation runs
    // them again even when it keeps the collectives' results.
    std::vector<CommEvent> ringForward;
    double ringSeconds = 0;
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
      addGridCollectives(graph, op, strategy, mesh, cluster, gridQ, gridDepth, forwardEvents,
                         backwardEvents, fwdComm, bwdComm);
    double recompute = 0;
    if (op.layer >= 0 && (strategy.recompute == Recompute::Full ||
                          (strategy.recompute == Recompute::Selective && op.recomputedWhenSelective)))
      recompute = fwd + (strategy.recompute == Recompute::Full
                             ? (options.recomputeCollectives ? fwdComm : ringSeconds)
                             : 0);
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
  };

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
  std::map<std::tuple<int, bool, bool>, OpCost> layerCache;
  std::vector<double> layerSeconds(size_t(stages), 0.0), otherSeconds(size_t(stages), 0.0);

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
      auto key = std::make_tuple(int(o) - layerStart[op.layer], receives, op.layer == 0);
      auto it = layerCache.find(key);
      if (it == layerCache.end())
        it = layerCache.emplace(key, costOf(o)).first;
      cost = &it->second;
    } else {
      fresh = costOf(o);
      cost = &fresh;
    }
    double copies = repeatOf(o);
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
      for (const CommEvent &e : *events)
        addComm(rankComm[rank], mesh, e, m * copies);
  }

  // Pipeline.
  std::vector<ChunkTimes> times(stages);
  for (int stage = 0; stage < stages; ++stage) {
    StageEstimate &st = perStage[stage];
    st.forward = st.computeForward + st.commForward;
    st.backward = st.computeBackward + st.commBackward;
    times[(stage / ranks) * ranks + stage % ranks] = {st.forward, st.backward};
  }
  PipelineResult pipeline;
  if (!simulatePipeline(ranks > 1 ? strategy.schedule : Schedule::OneFOneB, ranks, chunks, m,
                        times, p2pSeconds, pipeline, error, options.recordPipelineTasks))
    return std::nullopt;

  // Per pipeline rank: parameters, data-parallel reduction, optimizer, memory.
  // Per virtual stage: bytes kept for backward by one microbatch, and of
  // them what the ops after the last layer keep.
  std::vector<double> stageActivations(stages, 0.0), stageTail(stages, 0.0);
  std::vector<double> headKept(size_t(stages), 0.0), maxHeadWorking(size_t(ranks), 0.0);
  std::vector<int> layerStage(kept.size(), -1);
  std::vector<char> heldOutsideLayers(graph.values.size(), 0);
  std::vector<double> tailSaved(graph.ops.size(), 0.0);
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    if (op.layer >= 0 && op.layer < int(kept.size())) {
      layerStage[op.layer] = opStage[o];
      continue;
    }
    double saved = opSavedBytes(graph, sharding, mesh, o, Recompute::None, false, heldOutsideLayers);
    stageActivations[opStage[o]] += saved;
    if (o >= tailStart) {
      stageTail[opStage[o]] += saved;
      tailSaved[o] = saved;
    }
    if (firstLayerOp >= 0 && int(o) < firstLayerOp) {
      // What this op and the ones before it keep (one microbatch's), held
      // when its gradients are made.
      headKept[size_t(opStage[o])] += saved;
      maxHeadWorking[size_t(opStage[o] % ranks)] =
          std::max(maxHeadWorking[size_t(opStage[o] % ranks)], headKept[size_t(opStage[o])] / gridShare + headWorking[o]);
    }
  }
  // The head's backward pass runs from the loss back: when an op's runs,
  // what the ops after it kept is freed (the logits the loss kept, when
  // the output layer makes its gradients).
  {
    std::vector<double> freedAfter(size_t(stages), 0.0);
    for (size_t o = graph.ops.size(); o-- > tailStart;) {
      if (graph.ops[o].layer >= 0)
        continue;
      int stage = opStage[o], rank = stage % ranks;
      maxOtherWorking[size_t(rank)] =
          std::max(maxOtherWorking[size_t(rank)], tailWorking[o] - freedAfter[size_t(stage)]);
      freedAfter[size_t(stage)] += tailSaved[o];
    }
  }
  for (size_t l = 0; l < kept.size(); ++l)
    if (layerStage[l] >= 0)
      stageActivations[layerStage[l]] += kept[l] * double(graph.repeatOf(int(l)));
  // All parameter elements per rank (stored, gathered) and the trainable
  // ones (reduced, updated, with optimizer state).
  std::vector<double> params(ranks, 0), trainableParams(ranks, 0), layerParams(ranks, 0), trainableTensors(ranks, 0);
  // ZeRO-3 cuts every trainable tensor into dp chunks of ceil(n / dp) and
  // gathers it whole (padded) for the forward pass, and again for the
  // backward pass if the backward reads it (ShardedOptimizer.h).
  std::vector<double> gatheredForward(ranks, 0), gatheredBackward(ranks, 0);
  // Trainable tensors the tensor axis splits (their norms are completed
  // over it).
  int tensorAxis = mesh.axisIndex("tp");
  if (tensorAxis >= 0 && mesh.axes[tensorAxis].size <= 1)
    tensorAxis = -1;
  std::vector<double> tensorSplitTensors(ranks, 0);
  std::vector<int> firstLayer(ranks, -1);
  std::vector<std::set<int>> seen(ranks);
  double weightBytes = 2, optimizerBytes = 12;
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    int rank = opStage[o] % ranks;
    for (const TensorUse &use : graph.ops[o].inputs) {
      const Value &value = graph.values[use.value];
      if (!value.isParameter || !seen[rank].insert(use.value).second)
        continue;
      double n = localElements(graph.ops[o], sharding[o], mesh, use.dims) / weightShare;
      params[rank] += n * repeatOf(o);
      if (!value.frozen) {
        trainableParams[rank] += n * repeatOf(o);
        trainableTensors[rank] += repeatOf(o);
        if (tensorAxis >= 0) {
          bool split = false;
          for (const std::vector<int> &dim : use.dims)
            for (int f : dim)
              split |= std::find(sharding[o][size_t(f)].begin(), sharding[o][size_t(f)].end(), tensorAxis) !=
                       sharding[o][size_t(f)].end();
          tensorSplitTensors[rank] += split ? repeatOf(o) : 0;
        }
        double padded = std::ceil(n / strategy.dp - 1e-9) * strategy.dp;
        gatheredForward[rank] += padded * repeatOf(o);
        if (value.readByBackward)
          gatheredBackward[rank] += padded * repeatOf(o);
      }
      // One layer's weights: what ZeRO-3 gathers (and prefetches) at a time.
      if (graph.ops[o].layer >= 0 && firstLayer[rank] < 0)
        firstLayer[rank] = graph.ops[o].layer;
      if (graph.ops[o].layer >= 0 && graph.ops[o].layer == firstLayer[rank])
        layerParams[rank] += n;
      weightBytes = bytesOf(value.dtype);
      // fp32 master + moments (m and v: 12 bytes for Adam), or the moments alone.
      optimizerBytes = (weightBytes == 2 ? 4 : 0) + 4.0 * options.optimizerMoments;
    }
  }

  Estimate result;
  result.strategy = strategy;
  result.mesh = mesh;
  result.capacity = cluster.memoryBytes;
  result.pipeline = pipeline;
  int dpSize = strategy.dp;
  double worstTail = 0;
  std::vector<StageEstimate> rankEstimates(ranks);
  for (int r = 0; r < ranks; ++r) {
    StageEstimate &re = rankEstimates[r];
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
    double overlappable = (re.backward / chunks) * (layers - 1) / layers;
    std::vector<CommEvent> dpEvents;
    double dpExposed = 0, dpTotal = 0;
    if (dp >= 0 && dpSize > 1) {
      const MeshAxis &axis = mesh.axes[dp];
      auto event = [&](Collective c, double bytes, double times) {
        CommEvent e{c, dp, bytes, collectiveTime(c, bytes, axis, cluster)};
        addComm(rankComm[r], mesh, e, times);
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
        double buckets = std::max(1.0, std::ceil(gradBytes / options.bucketBytes - 1e-9));
        double t = event(Collective::AllReduce, gradBytes / buckets, buckets);
        dpExposed += std::max(0.0, t - overlappable);
      } else {
        // ZeRO-2/3 keep 1/Nd of the gradients: reduce-scatter every microbatch.
        double t = event(Collective::ReduceScatter, padded, m);
        dpExposed += std::max(0.0, t - m * overlappable);
      }
      if (strategy.zero == 3) {
        // Trainable weights gathered before the forward and again before the
        // backward of every microbatch, prefetched a layer ahead (frozen
        // ones are kept whole).
        double t = event(Collective::AllGather, gatheredForward[r] * weightBytes, m);
        if (gatheredBackward[r] > 0)
          t += event(Collective::AllGather, gatheredBackward[r] * weightBytes, m);
        double hidden = m * (re.computeForward + re.computeBackward) * (layers - 1) / layers;
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
      // The rank holding the loss (the last stage) averages it over the
      // data-parallel ranks for the log: one float.
      if (r == ranks - 1)
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
      addComm(rankComm[r], mesh, e, options.shardedNormReductions);
      tensorNormSeconds = e.seconds * options.shardedNormReductions;
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
    if (strategy.offloadOptimizer) {
      // The shard's gradients go down once complete, its weights come back.
      re.offloadToHost = re.offloadToDevice = shardElements * weightBytes;
      double hostShare = cluster.hostMemoryBandwidth / cluster.gpusPerNode;
      double transfers = (re.offloadToHost + re.offloadToDevice) / cluster.hostDeviceBandwidth;
      re.offloadSeconds = (hostShare > 0 ? optimizerTraffic / hostShare : 0) + transfers;
    } else {
      re.optimizerSeconds = optimizerTraffic / cluster.memoryBandwidth;
    }
    re.optimizerSeconds += tensorNormSeconds;
    worstTail = std::max(worstTail, dpExposed + re.optimizerSeconds + re.offloadSeconds);

    // Memory.
    ModelStateBytes states =
        zeroModelStates(trainableParams[r], dpSize, strategy.zero, weightBytes, optimizerBytes);
    // Frozen weights (buffers such as rotary tables) are kept whole on every
    // rank, even under ZeRO-3, and have no gradient or optimizer state.
    double frozen = params[r] - trainableParams[r];
    states.parameters += frozen * weightBytes;
    MemoryBreakdown &mem = re.memory;
    mem.parameters = states.parameters;
    mem.gradients = states.gradients;
    if (strategy.offloadOptimizer) {
      mem.hostOptimizer = states.optimizer;
      mem.hostGradients = 4 * shardElements;
      mem.hostParameters = weightBytes < 4 ? 0 : 4 * shardElements;
    } else
      mem.optimizer = states.optimizer;
    double perChunk = 0, tail = 0;
    for (int c = 0; c < chunks; ++c)
      if (stageActivations[c * ranks + r] >= perChunk)
        perChunk = stageActivations[c * ranks + r], tail = stageTail[c * ranks + r];
    int inFlight = std::max(1, pipeline.peakInFlight[r]);
    // The peak: as the backward pass starts (everything kept, the loss's
    // gradients in flight), inside a layer's backward pass (the head's
    // tensors freed, the layer's remade ones held), or before the layers
    // (the other microbatches' tensors and what the first ops keep).
    mem.activations = std::max({inFlight * perChunk / gridShare + maxOtherWorking[r],
                                (inFlight * perChunk - tail) / gridShare + maxLayerWorking[r],
                                (double(inFlight - 1) * perChunk / gridShare + maxHeadWorking[r])});
    mem.communication = (dpSize > 1 ? 2 * std::min(options.bucketBytes, gradBytes) : 0) +
                        (strategy.zero == 3 ? 2 * layerParams[r] * weightBytes : 0);
    mem.workspace = options.workspaceBytes;
    re.comm = rankComm[r];
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
  result.stageLayers = split;
  result.stageLayerSeconds = std::move(layerSeconds);
  result.stageOtherSeconds = std::move(otherSeconds);
  double leastKept = -1;
  for (size_t l = 0; l < kept.size(); ++l)
    if (layerStage[l] >= 0 && (leastKept < 0 || kept[l] < leastKept))
      leastKept = kept[l];
  result.leastLayerActivations = std::max(0.0, leastKept) / gridShare;
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

Json Estimate::chromeTrace() const {
  Json::Array events;
  for (const PipelineTask &t : pipeline.tasks)
    events.push_back(Json::Object{
        {"name", std::string(t.forward ? "F" : "B") + std::to_string(t.microbatch) +
                     (t.chunk ? "." + std::to_string(t.chunk) : "")},
        {"cat", t.forward ? "forward" : "backward"},
        {"ph", "X"},
        {"pid", t.rank},
        {"tid", 0},
        {"ts", t.start * 1e6},
        {"dur", (t.end - t.start) * 1e6}});
  for (size_t r = 0; r < stages.size(); ++r) {
    double at = pipeline.makespan;
    auto tail = [&](const char *name, double seconds) {
      if (seconds <= 0)
        return;
      events.push_back(Json::Object{{"name", name}, {"cat", "step"}, {"ph", "X"},
                                    {"pid", int(r)}, {"tid", 0}, {"ts", at * 1e6},
                                    {"dur", seconds * 1e6}});
      at += seconds;
    };
    tail("data-parallel reduction (exposed)", stages[r].dataParallelExposed);
    tail("optimizer", stages[r].optimizerSeconds);
    tail("offload", stages[r].offloadSeconds);
    events.push_back(Json::Object{{"name", "process_name"}, {"ph", "M"}, {"pid", int(r)},
                                  {"args", Json::Object{{"name", "pipeline rank " +
                                                                     std::to_string(r)}}}});
  }
  return Json::Object{{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

} // namespace colossal::cost
