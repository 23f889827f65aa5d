//===- ParameterPrefetch.h - ZeRO-3 gathers started ahead of the reads -*- C++ -*-===//
//
// Under ZeRO-3 each rank keeps a shard of every weight and the step gathers
// a tensor whole when it first reads it (ShardedOptimizer.h). Waiting for
// each gather where the step reads the tensor puts every collective on the
// step's critical path. The step reads its weights in the same order at
// every call (the program fixes it), so the prefetcher learns that order at
// the first call and, from then on, starts the gathers of the reads to come
// on a communication thread while the step computes, up to a byte budget
// ahead of the step: one layer's weights by default, what the cost model
// assumes ZeRO-3 holds in flight (DeepSpeed's prefetch bucket plays the
// same role).
//
// Every gather, prefetched or not, goes through one queue served in order,
// and every rank derives the same queue from the same order, so the ranks'
// collectives match; the gathered values are the same bits either way. A
// tensor the step still holds is not gathered again until it has released
// it (a weight read by the forward and again by the backward is gathered
// twice, as without prefetching). A read that departs from the learned
// order stops prefetching for the rest of that call: correct, only slower.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_PARAMETERPREFETCH_H
#define COLOSSAL_RUNTIME_PARAMETERPREFETCH_H

#include "colossal/runtime/TrackedAllocator.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace colossal::rt {

/// A whole tensor, charged to the memory tracker as communication buffers
/// for as long as it lives.
/// A gathered tensor: a communication buffer while it exists.
struct GatheredTensor {
  Floats values;
};

class GatherPrefetcher {
public:
  /// Gathers tensor `tensor` whole into `whole` (a collective).
  using Gather = std::function<void(size_t tensor, Floats &whole)>;

  /// `elements`: each tensor's whole size. `budgetBytes`: how many bytes of
  /// gathered tensors may wait ahead of the step's reads (at least one
  /// tensor; 0 turns prefetching off). `threaded`: whether the communicator
  /// may be driven from a second thread; without it every gather runs when
  /// the step reads the tensor.
  GatherPrefetcher(std::vector<int64_t> elements, int64_t budgetBytes, bool threaded, Gather gather);
  ~GatherPrefetcher();
  GatherPrefetcher(const GatherPrefetcher &) = delete;
  GatherPrefetcher &operator=(const GatherPrefetcher &) = delete;

  /// A step call starts: the first reads of the learned order are gathered
  /// ahead at once. Nothing else may use the communicator until
  /// `finishCall`.
  void beginCall();
  /// The whole tensor for a read by the step: the prefetched one, or
  /// gathered now (after the gathers queued before it).
  GatheredTensor take(size_t tensor);
  /// The step no longer holds `tensor`: a later read may be gathered ahead.
  void released(size_t tensor);
  /// The call is over: waits for the communication thread, drops gathers
  /// no read took, and (after the first call) knows the order. Rethrows a
  /// failed gather.
  void finishCall();

  /// Gathers the step asked for since `resetCounts`, and how many of them
  /// had started before it asked.
  int64_t gathers() const { return gathers_; }
  int64_t prefetched() const { return prefetched_; }
  void resetCounts() { gathers_ = prefetched_ = 0; }
  /// The reads learned at the first call, in order.
  const std::vector<size_t> &order() const { return order_; }

private:
  struct Job;
  class Worker;
  void fillAhead();
  std::shared_ptr<Job> enqueue(size_t tensor);

  std::vector<int64_t> elements_;
  int64_t budgetBytes_;
  Gather gather_;
  std::vector<size_t> order_;
  bool learned_ = false, diverged_ = false;
  size_t cursor_ = 0, ahead_ = 0;
  std::vector<char> held_;
  std::map<size_t, std::shared_ptr<Job>> pending_;
  int64_t pendingBytes_ = 0;
  int64_t gathers_ = 0, prefetched_ = 0;
  std::unique_ptr<Worker> worker_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_PARAMETERPREFETCH_H
