//===- ActivationMemory.cpp - what the step keeps for backward ------------===//

#include "ActivationMemory.h"

#include <algorithm>

namespace colossal::cost {
namespace {

/// How many more ways the producer split an input than the op reads it:
/// the saving when the op keeps the producer's shard and gathers it again.
double producerExtraSplit(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh, const Op &op,
                          const OpSharding &s, const TensorUse &use) {
  const Value &value = graph.values[use.value];
  if (value.producer < 0)
    return 1;
  const Op &producer = graph.ops[value.producer];
  for (const TensorUse &out : producer.outputs)
    if (out.value == use.value) {
      double here = fullElements(op, use.dims) / localElements(op, s, mesh, use.dims);
      double there =
          fullElements(producer, out.dims) / localElements(producer, sharding[value.producer], mesh, out.dims);
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

} // namespace

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
double opSavedBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh, size_t o, Recompute recompute,
                    bool keepShardedInputs, std::vector<char> &held, const std::vector<char> *exchanged) {
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

namespace {

/// Selective recomputation re-runs a layer's cheap ops from what the layer
/// keeps: the results of its contractions and its inputs from outside it.
/// Adds to `bytes` (per layer) those a re-run op reads that no op already
/// keeps, for the ops whose results the backward pass needs (a saved tensor
/// made again, or another needed re-run op's input).
/// Only the ops in [begin, end) add (one pipeline stage's).
void addRecomputationSources(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                             std::vector<double> &bytes, std::vector<char> &held, const std::vector<char> *exchanged,
                             size_t begin, size_t end) {
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
  for (size_t o = end; o-- > begin;) {
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
    return producer >= 0 && !leaves[size_t(value)] && !exchanged[size_t(value)] && reruns(graph.ops[size_t(producer)]);
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
            source.producer >= 0 && !leaves[size_t(use.value)]) {
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
/// Under a pipeline (`opStage`), each stage keeps what its own layers read
/// (a value two stages' layers read is kept on both), and `notKept` are the
/// values no stage keeps (those it makes again).
std::vector<double> layerActivationBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                                         Recompute recompute, bool keepShardedInputs,
                                         const std::vector<char> *exchanged = nullptr,
                                         const std::vector<int> *opStage = nullptr,
                                         const std::vector<char> *notKept = nullptr) {
  std::vector<double> bytes(std::max(0, graph.numLayers), 0.0);
  std::vector<char> held;
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
  auto countLayerOp = [&](size_t o) {
    const Op &op = graph.ops[o];
    if (op.layer < 0 || op.layer >= int(bytes.size()))
      return;
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
      return;
    }
    bytes[op.layer] += opSavedBytes(graph, sharding, mesh, o, recompute, keepShardedInputs, held, exchanged);
  };
  auto stageOf = [&](size_t o) { return opStage ? (*opStage)[o] : 0; };
  size_t begin = 0;
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    if (o == begin)
      held = notKept ? *notKept : std::vector<char>(graph.values.size(), 0);
    countLayerOp(o);
    // After a stage's last op, what its re-runs start from; the next stage
    // counts from nothing held.
    if (o + 1 == graph.ops.size() || stageOf(o + 1) != stageOf(o)) {
      if (recompute == Recompute::Selective)
        addRecomputationSources(graph, sharding, mesh, bytes, held, exchanged, begin, o + 1);
      begin = o + 1;
    }
  }
  return bytes;
}

} // namespace

double savedActivationBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh, Recompute recompute,
                            int layer, bool keepShardedInputs) {
  std::vector<double> bytes = layerActivationBytes(graph, sharding, mesh, recompute, keepShardedInputs);
  return layer >= 0 && layer < int(bytes.size()) ? bytes[layer] : 0.0;
}

LayerMemory layerMemory(const EstimateContext &ctx) {
  const Graph &graph = ctx.graph;
  const Strategy &strategy = ctx.strategy;
  const Mesh &mesh = ctx.mesh;
  const GraphSharding &sharding = ctx.sharding;
  const double gridShare = ctx.gridShare;
  const double weightShare = ctx.weightShare;
  const int stages = ctx.stages;
  const std::vector<int> &opStage = ctx.opStage;
  const int firstLayerOp = ctx.firstLayerOp;
  const size_t lastLayerOp = ctx.lastLayerOp;
  const int sp = ctx.sp;
  LayerMemory result;
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
  // And what a partitioned graph's reshardings make, the cube's gathered
  // weight blocks among them (RecomputeLayers.h re-runs the ops around
  // them, not the collectives).
  for (const Op &op : graph.ops)
    if (recomputes && op.exchange && op.layer >= 0)
      for (const TensorUse &out : op.outputs)
        exchanged[size_t(out.value)] = 1;
  const std::vector<char> &notKept = ctx.stageRemade;
  std::vector<double> kept =
      layerActivationBytes(graph, sharding, mesh, strategy.recompute, keepSharded, &exchanged, &opStage, &notKept);
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
    std::vector<char> held = notKept;
    std::vector<double> saved(graph.ops.size(), 0.0);
    for (size_t o = 0; o < graph.ops.size(); ++o) {
      if (o > 0 && opStage[o] != opStage[o - 1])
        held = notKept;
      if (graph.ops[o].layer >= 0)
        saved[o] = opSavedBytes(graph, sharding, mesh, o, strategy.recompute, keepSharded, held, &exchanged);
    }
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
  result.exchanged = std::move(exchanged);
  result.kept = std::move(kept);
  result.remadeLive = std::move(remadeLive);
  result.freedInLayer = std::move(freedInLayer);
  result.streamGradient = std::move(streamGradient);
  result.heldWeightGradient = std::move(heldWeightGradient);
  return result;
}

StageActivations stageActivations(const EstimateContext &ctx, const LayerMemory &layers, WorkingBytes &working) {
  const Graph &graph = ctx.graph;
  const Mesh &mesh = ctx.mesh;
  const GraphSharding &sharding = ctx.sharding;
  const double gridShare = ctx.gridShare;
  const int ranks = ctx.ranks;
  const int stages = ctx.stages;
  const std::vector<int> &opStage = ctx.opStage;
  const int firstLayerOp = ctx.firstLayerOp;
  const size_t tailStart = ctx.tailStart;
  const std::vector<double> &kept = layers.kept;
  const std::vector<double> &headWorking = working.headWorking, &tailWorking = working.tailWorking;
  std::vector<double> &maxOtherWorking = working.maxOtherWorking;
  std::vector<double> stageActivations(stages, 0.0), stageTail(stages, 0.0);
  std::vector<double> headKept(size_t(stages), 0.0), maxHeadWorking(size_t(ranks), 0.0);
  std::vector<int> layerStage(kept.size(), -1);
  std::vector<char> heldOutsideLayers = ctx.stageRemade;
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
      maxHeadWorking[size_t(opStage[o] % ranks)] = std::max(maxHeadWorking[size_t(opStage[o] % ranks)],
                                                            headKept[size_t(opStage[o])] / gridShare + headWorking[o]);
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
  StageActivations result;
  result.kept = std::move(stageActivations);
  result.tail = std::move(stageTail);
  result.maxHeadWorking = std::move(maxHeadWorking);
  result.layerStage = std::move(layerStage);
  return result;
}

} // namespace colossal::cost
