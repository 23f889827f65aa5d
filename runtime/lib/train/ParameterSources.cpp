//===- ParameterSources.cpp -------------------------------------------------===//

#include "ParameterSources.h"

#include "colossal/runtime/Error.h"

namespace colossal::rt::trainer {

ReplicatedParameters::ReplicatedParameters(const std::vector<Tensor> &parameters) : parameters_(parameters) {}

const Tensor &ReplicatedParameters::fetch(size_t index) {
  return parameters_.at(index);
}

void ReplicatedParameters::release(size_t) {}

int64_t elementsOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

GatheredParameters::GatheredParameters(const TrainingProgram &program, const State &state, ShardedOptimizer &sharded,
                                       int64_t prefetchBytes, bool threaded)
    : program_(program), state_(state), slots_(program.parameters.size()),
      prefetcher_(trainableElements(program, state), prefetchBytes, threaded,
                  [&sharded](size_t t, Floats &whole) { sharded.gatherTensor(t, whole); }) {
  for (size_t t = 0; t < state.trainable.size(); ++t)
    slots_[state.trainable[t]].trainable = int64_t(t);
}

GatherPrefetcher &GatheredParameters::prefetcher() {
  return prefetcher_;
}

const Tensor &GatheredParameters::fetch(size_t index) {
  Slot &slot = slots_.at(index);
  if (slot.trainable < 0)
    return state_.parameters[index];
  if (slot.fetched++ == 0) {
    GatheredTensor gathered = prefetcher_.take(size_t(slot.trainable));
    slot.whole = Tensor::ofFloats(program_.parameters[index].shape, std::move(gathered.values));
  }
  return slot.whole;
}

void GatheredParameters::release(size_t index) {
  Slot &slot = slots_.at(index);
  if (slot.trainable < 0)
    return;
  if (slot.fetched <= 0)
    fail(program_.model, "the step released '" + program_.parameters[index].name + "', which it had not fetched");
  if (--slot.fetched == 0) {
    Floats().swap(slot.whole.floats);
    prefetcher_.released(size_t(slot.trainable));
  }
}

void GatheredParameters::requireAllReleased() const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].fetched != 0)
      fail(program_.model, "the step kept '" + program_.parameters[i].name + "' gathered after it returned");
}

std::vector<int64_t> GatheredParameters::trainableElements(const TrainingProgram &program, const State &state) {
  std::vector<int64_t> elements;
  for (size_t index : state.trainable)
    elements.push_back(elementsOf(program.parameters[index].shape));
  return elements;
}

} // namespace colossal::rt::trainer
