//===- ParameterSources.h - where the step reads the weights ---------*- C++ -*-===//
//
// The step reads each weight through StepParameters: the trainer's own
// replicated weights, or under ZeRO-3 each trainable tensor gathered from
// the ranks' shards for its reads (prefetched ahead) and freed after.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LIB_TRAIN_PARAMETERSOURCES_H
#define COLOSSAL_RUNTIME_LIB_TRAIN_PARAMETERSOURCES_H

#include "ModelState.h"
#include "colossal/runtime/train/ParameterPrefetch.h"

#include <vector>

namespace colossal::rt::trainer {

using host::Shape;
using host::Tensor;

/// Replicated weights: the trainer's own, read in place.
class ReplicatedParameters : public StepParameters {
public:
  explicit ReplicatedParameters(const std::vector<Tensor> &parameters);
  const Tensor &fetch(size_t index) override;
  void release(size_t) override;

private:
  const std::vector<Tensor> &parameters_;
};

/// Elements of a tensor of `shape`.
int64_t elementsOf(const Shape &shape);

/// ZeRO-3: a trainable tensor is gathered for the step's first fetch and
/// freed at its last release (frozen ones stay whole on every rank); the
/// gathers of the fetches to come start ahead, up to `prefetchBytes`
/// (ParameterPrefetch.h). What is whole or in flight at a moment is charged
/// as communication buffers.
class GatheredParameters : public StepParameters {
public:
  GatheredParameters(const TrainingProgram &program, const State &state, ShardedOptimizer &sharded,
                     int64_t prefetchBytes, bool threaded);
  GatherPrefetcher &prefetcher();
  const Tensor &fetch(size_t index) override;
  void release(size_t index) override;
  /// After a step: every fetch was released (the compiler pairs them).
  void requireAllReleased() const;

private:
  struct Slot {
    int64_t trainable = -1; // index among the trainable tensors
    int64_t fetched = 0;
    /// A communication buffer while it is gathered.
    Tensor whole;
  };
  static std::vector<int64_t> trainableElements(const TrainingProgram &program, const State &state);

  const TrainingProgram &program_;
  const State &state_;
  std::vector<Slot> slots_;
  GatherPrefetcher prefetcher_;
};

} // namespace colossal::rt::trainer

#endif // COLOSSAL_RUNTIME_LIB_TRAIN_PARAMETERSOURCES_H
