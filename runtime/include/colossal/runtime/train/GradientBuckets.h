//===- GradientBuckets.h - the data-parallel gradient all-reduce -*- C++ -*-===//
//
// Data-parallel ranks average their gradients with one all-reduce per
// bucket rather than one per tensor: a collective's latency is paid once
// for many small tensors (a transformer has a few large matrices and many
// small biases and norm weights). Buckets are filled in reverse parameter
// order, the order a backward pass finishes the gradients in, so the
// overlapped average below can start each one early; a bucket closes
// when the next tensor would take it past the capacity, and a tensor larger
// than the capacity has a bucket of its own. Every rank derives the same
// buckets from the same shapes, so the collectives match.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_GRADIENTBUCKETS_H
#define COLOSSAL_RUNTIME_GRADIENTBUCKETS_H

#include "colossal/runtime/TrackedAllocator.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace colossal::rt {

class Communicator;

struct GradientBucket {
  /// Indices into the gradient list, in the order they are packed.
  std::vector<size_t> tensors;
  int64_t elements = 0;
};

/// Buckets of float32 gradients of `elements[i]` elements each, at most
/// `capacityBytes` per bucket unless one tensor alone exceeds it.
std::vector<GradientBucket> planGradientBuckets(const std::vector<int64_t> &elements, int64_t capacityBytes);

/// Replaces every gradient by its average over `dp`'s ranks: each bucket is
/// packed into one staging buffer (charged to the memory tracker as
/// communication, the size of the largest bucket), all-reduced and
/// unpacked. The gradients' sizes must be the ones the buckets were
/// planned for.
void averageGradientBuckets(Communicator &dp, const std::vector<GradientBucket> &buckets,
                            std::vector<Floats> &gradients);

/// The same average, started while the backward pass runs: the step reports
/// each gradient as it finishes it (`add`), and a bucket whose tensors are
/// all in is reduced on a communication thread while the step goes on.
/// Buckets are reduced in the order they complete, which the step's order of
/// gradients fixes: every rank issues the same collectives in the same
/// order, and each bucket is reduced exactly as `averageGradientBuckets`
/// would, so the results are the same bit for bit. `finish` reduces what the
/// step did not report (in bucket order) and waits for everything; a failed
/// collective is rethrown there. The communicator is used by one thread at a
/// time: the caller makes no collective of its own between the first `add`
/// and `finish`.
class OverlappedGradientAverage {
public:
  OverlappedGradientAverage(Communicator &dp, std::vector<GradientBucket> buckets,
                            std::vector<Floats> &gradients);
  ~OverlappedGradientAverage();
  OverlappedGradientAverage(const OverlappedGradientAverage &) = delete;
  OverlappedGradientAverage &operator=(const OverlappedGradientAverage &) = delete;

  /// Starts a step: no gradient is in yet.
  void begin();
  /// Gradient `t` holds its final value for this step.
  void add(size_t t);
  bool isIn(size_t t) const { return in_.at(t); }
  /// Every gradient averaged over the ranks.
  void finish();
  /// Buckets the last step started before `finish`.
  int64_t startedDuringStep() const { return startedEarly_; }
  const std::vector<GradientBucket> &buckets() const { return buckets_; }

private:
  struct Worker;
  void start(size_t bucket);

  Communicator &dp_;
  std::vector<GradientBucket> buckets_;
  std::vector<Floats> &gradients_;
  std::vector<size_t> bucketOf_;
  std::vector<bool> in_;
  std::vector<size_t> missing_;
  std::vector<bool> started_;
  int64_t startedEarly_ = 0;
  std::unique_ptr<Worker> worker_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_GRADIENTBUCKETS_H
