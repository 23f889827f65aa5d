//===- GradientBuckets.cpp - the data-parallel gradient all-reduce --------===//

#include "colossal/runtime/train/GradientBuckets.h"

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/TrackedAllocator.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

namespace colossal::rt {

std::vector<GradientBucket> planGradientBuckets(const std::vector<int64_t> &elements, int64_t capacityBytes) {
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  for (size_t k = elements.size(); k-- > 0;) {
    int64_t bytes = elements[k] * int64_t(sizeof(float));
    if (!open.tensors.empty() && (open.elements * int64_t(sizeof(float)) + bytes > capacityBytes)) {
      buckets.push_back(std::move(open));
      open = GradientBucket();
    }
    open.tensors.push_back(k);
    open.elements += elements[k];
  }
  if (!open.tensors.empty())
    buckets.push_back(std::move(open));
  return buckets;
}

namespace {

int64_t largestBucket(const std::vector<GradientBucket> &buckets) {
  int64_t largest = 0;
  for (const GradientBucket &bucket : buckets)
    largest = std::max(largest, bucket.elements);
  return largest;
}

/// Packs one bucket into `staging`, all-reduces it, and writes each tensor
/// back divided by the rank count.
void averageBucket(Communicator &dp, const GradientBucket &bucket, std::vector<Floats> &gradients,
                   Floats &staging) {
  int64_t packed = 0;
  for (size_t t : bucket.tensors)
    packed += int64_t(gradients.at(t).size());
  if (packed != bucket.elements)
    fail("gradient buckets", "a bucket planned for " + std::to_string(bucket.elements) + " elements holds " +
                                 std::to_string(packed));
  float *cursor = staging.data();
  for (size_t t : bucket.tensors)
    cursor = std::copy(gradients[t].begin(), gradients[t].end(), cursor);
  dp.allReduce(Buffer::of(staging.data(), DType::F32, bucket.elements));
  float inverse = 1.0f / float(dp.size());
  const float *from = staging.data();
  for (size_t t : bucket.tensors)
    for (float &g : gradients[t])
      g = *from++ * inverse;
}

} // namespace

void averageGradientBuckets(Communicator &dp, const std::vector<GradientBucket> &buckets,
                            std::vector<Floats> &gradients) {
  if (dp.size() == 1)
    return;
  Floats staging = buffer<float>(size_t(largestBucket(buckets)), MemoryCategory::Communication);
  for (const GradientBucket &bucket : buckets)
    averageBucket(dp, bucket, gradients, staging);
}

/// The communication thread: reduces queued buckets in order.
struct OverlappedGradientAverage::Worker {
  Worker(OverlappedGradientAverage &owner)
      : owner(owner), staging(buffer<float>(size_t(largestBucket(owner.buckets_)), MemoryCategory::Communication)),
        thread([this] { run(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    thread.join();
  }

  void enqueue(size_t bucket) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back(bucket);
    }
    changed.notify_all();
  }

  /// Waits until every queued bucket is reduced; rethrows a failure.
  void drain() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return queue.empty() && !busy; });
    if (failure) {
      std::exception_ptr f = failure;
      failure = nullptr;
      std::rethrow_exception(f);
    }
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stopping || !queue.empty(); });
      // Stopping without draining: the owner is unwinding from a failure.
      if (stopping)
        return;
      size_t bucket = queue.front();
      queue.pop_front();
      busy = true;
      // After a failure the rest are skipped: the step is lost anyway.
      bool skip = failure != nullptr;
      lock.unlock();
      std::exception_ptr caught;
      try {
        if (!skip)
          averageBucket(owner.dp_, owner.buckets_[bucket], owner.gradients_, staging);
      } catch (...) {
        caught = std::current_exception();
      }
      lock.lock();
      if (caught)
        failure = caught;
      busy = false;
      changed.notify_all();
    }
  }

  OverlappedGradientAverage &owner;
  Floats staging;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<size_t> queue;
  bool busy = false, stopping = false;
  std::exception_ptr failure;
  std::thread thread; // last: starts once the rest is built
};

OverlappedGradientAverage::OverlappedGradientAverage(Communicator &dp, std::vector<GradientBucket> buckets,
                                                     std::vector<Floats> &gradients)
    : dp_(dp), buckets_(std::move(buckets)), gradients_(gradients), bucketOf_(gradients.size(), 0),
      in_(gradients.size(), false), missing_(buckets_.size(), 0), started_(buckets_.size(), false) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t t : buckets_[b].tensors)
      bucketOf_.at(t) = b;
}

OverlappedGradientAverage::~OverlappedGradientAverage() = default;

void OverlappedGradientAverage::begin() {
  std::fill(in_.begin(), in_.end(), false);
  std::fill(started_.begin(), started_.end(), false);
  for (size_t b = 0; b < buckets_.size(); ++b)
    missing_[b] = buckets_[b].tensors.size();
  startedEarly_ = 0;
}

void OverlappedGradientAverage::add(size_t t) {
  if (in_.at(t))
    fail("gradient buckets", "gradient " + std::to_string(t) + " was reported twice in one step");
  in_[t] = true;
  size_t b = bucketOf_[t];
  if (--missing_[b] == 0 && dp_.size() > 1) {
    start(b);
    ++startedEarly_;
  }
}

void OverlappedGradientAverage::start(size_t bucket) {
  started_[bucket] = true;
  if (!worker_)
    worker_ = std::make_unique<Worker>(*this);
  worker_->enqueue(bucket);
}

void OverlappedGradientAverage::finish() {
  if (dp_.size() == 1)
    return;
  // Nothing reported (a device step, or no overlap allowed): no bucket has
  // started, and the calling thread reduces them all.
  if (!worker_) {
    averageGradientBuckets(dp_, buckets_, gradients_);
    return;
  }
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!started_[b])
      start(b);
  worker_->drain();
}

} // namespace colossal::rt
