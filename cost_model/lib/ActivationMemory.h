//===- ActivationMemory.h - what the step keeps for backward ----*- C++ -*-===//
//
// Bytes kept for the backward pass per layer under each recomputation mode,
// what the backward pass makes again and holds while a layer's runs, and
// per virtual stage what one microbatch keeps (Korthikanti et al. 2022's
// accounting, checked against the allocator's measured peaks).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_ACTIVATIONMEMORY_H
#define COLOSSAL_COST_LIB_ACTIVATIONMEMORY_H

#include "EstimateContext.h"

#include <vector>

namespace colossal::cost {

/// Bytes op `o` keeps for its backward pass (`held`: values some op kept
/// already, which count once).
double opSavedBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh, size_t o, Recompute recompute,
                    bool keepShardedInputs, std::vector<char> &held, const std::vector<char> *exchanged = nullptr);

/// Whether input `i` of op `o` comes from outside the op's layer.
bool readsFromOutsideLayer(const Graph &graph, size_t o, size_t i);

/// The layers' activation memory under the plan.
struct LayerMemory {
  /// Values recomputation does not make again (collectives' results it
  /// keeps).
  std::vector<char> exchanged;
  /// Per layer: bytes kept for backward by one microbatch.
  std::vector<double> kept;
  /// Per op: what the layer's backward pass has made again while the op's
  /// runs; what the layer's later ops kept, freed by then.
  std::vector<double> remadeLive, freedInLayer;
  /// Per layer: the residual stream's gradient waiting on the branches
  /// (-1: none found).
  std::vector<double> streamGradient;
  /// Per virtual stage: a tied weight's gradient held through the layers.
  std::vector<double> heldWeightGradient;
};

LayerMemory layerMemory(const EstimateContext &ctx);

/// The backward pass's working bytes per op, from the op costs.
struct WorkingBytes {
  /// Per pipeline rank: the most held on top of what is kept, inside a
  /// layer's backward pass and outside the layers.
  std::vector<double> maxLayerWorking, maxOtherWorking;
  /// Per op: the backward transient of an op after the layers (tail) or
  /// before them (head).
  std::vector<double> tailWorking, headWorking;
  /// Per virtual stage, one microbatch's: the gradients of its outputs that
  /// a pipeline's later stages send back, held as its backward pass starts.
  std::vector<double> gradientReceived;
};

/// What one microbatch keeps per virtual stage.
struct StageActivations {
  /// Bytes kept for backward, and of them what the ops after the last
  /// layer keep.
  std::vector<double> kept, tail;
  /// Per pipeline rank: the most held while the ops before the layers run
  /// backward.
  std::vector<double> maxHeadWorking;
  /// The virtual stage of every layer (-1: none).
  std::vector<int> layerStage;
};

/// Per virtual stage activations; also settles `working.maxOtherWorking`
/// for the ops after the layers (each frees what the later ones kept).
StageActivations stageActivations(const EstimateContext &ctx, const LayerMemory &layers, WorkingBytes &working);

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_ACTIVATIONMEMORY_H
