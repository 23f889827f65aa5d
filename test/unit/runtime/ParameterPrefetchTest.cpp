//===- ParameterPrefetchTest.cpp - ZeRO-3 gathers started ahead ------------===//
//
// A recorded stand-in for the all-gather: the tests check what matters to
// the ranks (every gather in the order the step reads, so every rank's
// collectives match; the values the step gets), to speed (reads after the
// first call find their gather started) and to memory (what is queued
// ahead stays within the byte budget, from the memory tracker).
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/train/ParameterPrefetch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <mutex>
#include <thread>

using namespace colossal::rt;

namespace {

/// Gathers tensor t as `size` copies of t + 0.5 and records the order.
struct RecordedGather {
  std::vector<int64_t> sizes;
  std::mutex mutex;
  std::vector<size_t> calls;
  int sleepMicroseconds = 0;

  GatherPrefetcher::Gather function() {
    return [this](size_t t, Floats &out) {
      if (sleepMicroseconds)
        std::this_thread::sleep_for(std::chrono::microseconds(sleepMicroseconds));
      out.assign(size_t(sizes[t]), float(t) + 0.5f);
      std::lock_guard<std::mutex> lock(mutex);
      calls.push_back(t);
    };
  }
};

/// One read of the step: take `tensor`, or release it.
struct Read {
  size_t tensor;
  bool take;
};

/// A transformer-like step: the forward reads each weight and releases it;
/// the backward reads them again in reverse, holding two at a time.
std::vector<Read> forwardBackward(size_t tensors) {
  std::vector<Read> reads;
  for (size_t t = 0; t < tensors; ++t)
    reads.push_back({t, true}), reads.push_back({t, false});
  for (size_t t = tensors; t-- > 0;) {
    reads.push_back({t, true});
    if (t + 1 < tensors)
      reads.push_back({t + 1, false});
  }
  reads.push_back({0, false});
  return reads;
}

std::vector<size_t> takenOf(const std::vector<Read> &reads) {
  std::vector<size_t> out;
  for (const Read &r : reads)
    if (r.take)
      out.push_back(r.tensor);
  return out;
}

/// Bytes of gathered tensors alive now: held by the step or queued ahead
/// (charged from the moment a gather is queued).
int64_t communicationBytes() {
  return MemoryTracker::global().current(MemorySpace::Host, MemoryCategory::Communication);
}

/// Runs one call, checks every value, and returns the most bytes that were
/// queued ahead of the step (alive but not held) after any read.
int64_t runCall(GatherPrefetcher &prefetcher, RecordedGather &gather, const std::vector<Read> &reads) {
  int64_t before = communicationBytes();
  prefetcher.beginCall();
  std::map<size_t, GatheredTensor> held;
  int64_t heldBytes = 0, worstAhead = communicationBytes() - before;
  for (const Read &r : reads) {
    if (!r.take) {
      heldBytes -= gather.sizes[r.tensor] * 4;
      held.erase(r.tensor);
      prefetcher.released(r.tensor);
    } else {
      GatheredTensor whole = prefetcher.take(r.tensor);
      EXPECT_EQ(whole.values.size(), size_t(gather.sizes[r.tensor]));
      bool right = true;
      for (float x : whole.values)
        right = right && x == float(r.tensor) + 0.5f;
      EXPECT_TRUE(right) << "tensor " << r.tensor << " came back with other values";
      // A communication buffer while it is held.
      EXPECT_TRUE(whole.values.get_allocator().fixed());
      EXPECT_EQ(whole.values.get_allocator().category(), MemoryCategory::Communication);
      heldBytes += gather.sizes[r.tensor] * 4;
      held[r.tensor] = std::move(whole);
    }
    worstAhead = std::max(worstAhead, communicationBytes() - before - heldBytes);
  }
  prefetcher.finishCall();
  EXPECT_EQ(communicationBytes(), before) << "gathered buffers outlive the call";
  return worstAhead;
}

} // namespace

TEST(ParameterPrefetchTest, EveryGatherInReadOrderAndPrefetchedAfterTheFirstCall) {
  RecordedGather gather;
  gather.sizes = {16, 16, 16, 16, 16};
  gather.sleepMicroseconds = 200;
  std::vector<Read> reads = forwardBackward(5);
  std::vector<size_t> taken = takenOf(reads);
  // A budget of two tensors.
  GatherPrefetcher prefetcher(gather.sizes, 2 * 16 * 4, /*threaded=*/true, gather.function());
  std::vector<size_t> expected;
  for (int call = 0; call < 4; ++call) {
    prefetcher.resetCounts();
    int64_t ahead = runCall(prefetcher, gather, reads);
    expected.insert(expected.end(), taken.begin(), taken.end());
    EXPECT_EQ(prefetcher.gathers(), int64_t(taken.size()));
    // The first call learns the order; then every read was started ahead.
    EXPECT_EQ(prefetcher.prefetched(), call == 0 ? 0 : int64_t(taken.size())) << "call " << call;
    // Two tensors ahead once the order is known; none while learning it.
    EXPECT_EQ(ahead, call == 0 ? 0 : 2 * 16 * 4) << "bytes queued ahead of the step, call " << call;
  }
  EXPECT_EQ(prefetcher.order(), taken);
  std::lock_guard<std::mutex> lock(gather.mutex);
  EXPECT_EQ(gather.calls, expected);
}

TEST(ParameterPrefetchTest, AHeldTensorIsGatheredAgainOnlyAfterItsRelease) {
  RecordedGather gather;
  gather.sizes = {8, 8, 8};
  // Tensor 0 is read, held while 1 is read, released, then read again.
  std::vector<Read> reads = {{0, true}, {1, true}, {1, false}, {0, false}, {0, true}, {2, true},
                             {2, false}, {0, false}};
  GatherPrefetcher prefetcher(gather.sizes, 1 << 20, /*threaded=*/true, gather.function());
  for (int call = 0; call < 3; ++call) {
    prefetcher.resetCounts();
    int64_t ahead = runCall(prefetcher, gather, reads);
    EXPECT_EQ(prefetcher.prefetched(), call == 0 ? 0 : 4);
    // The budget would take every read, but the second read of tensor 0
    // waits for its release: never more than two tensors (64 bytes) ahead.
    EXPECT_EQ(ahead, call == 0 ? 0 : 2 * 8 * 4) << "call " << call;
  }
  std::lock_guard<std::mutex> lock(gather.mutex);
  EXPECT_EQ(gather.calls, (std::vector<size_t>{0, 1, 0, 2, 0, 1, 0, 2, 0, 1, 0, 2}));
}

TEST(ParameterPrefetchTest, AnotherOrderIsStillRightAndStopsPrefetching) {
  RecordedGather gather;
  gather.sizes = {4, 4, 4, 4};
  std::vector<Read> learned = forwardBackward(4), other = forwardBackward(4);
  std::swap(other[0], other[2]);
  std::swap(other[1], other[3]);
  GatherPrefetcher prefetcher(gather.sizes, 1 << 20, /*threaded=*/true, gather.function());
  runCall(prefetcher, gather, learned);
  prefetcher.resetCounts();
  runCall(prefetcher, gather, other);
  // The first read of the other order differs: at most the gathers begun
  // before it (taken later or dropped) were ahead.
  EXPECT_EQ(prefetcher.gathers(), int64_t(takenOf(other).size()));
  EXPECT_LT(prefetcher.prefetched(), prefetcher.gathers());
  prefetcher.resetCounts();
  runCall(prefetcher, gather, learned);
  EXPECT_EQ(prefetcher.prefetched(), prefetcher.gathers());
  // A call that stops early leaves gathers no read takes: dropped at its
  // end (runCall checks no buffer outlives it), and the next call is whole.
  runCall(prefetcher, gather, {{0, true}, {0, false}});
  prefetcher.resetCounts();
  runCall(prefetcher, gather, learned);
  EXPECT_EQ(prefetcher.prefetched(), prefetcher.gathers());
}

TEST(ParameterPrefetchTest, WithoutAThreadOrABudgetEveryGatherIsTheReads) {
  for (auto [threaded, budget] : {std::pair(false, int64_t(1) << 20), std::pair(true, int64_t(0))}) {
    RecordedGather gather;
    gather.sizes = {3, 5, 7};
    std::vector<Read> reads = forwardBackward(3);
    GatherPrefetcher prefetcher(gather.sizes, budget, threaded, gather.function());
    for (int call = 0; call < 2; ++call) {
      int64_t ahead = runCall(prefetcher, gather, reads);
      EXPECT_EQ(ahead, 0);
    }
    EXPECT_EQ(prefetcher.prefetched(), 0);
    EXPECT_EQ(gather.calls.size(), 2 * takenOf(reads).size());
  }
}

TEST(ParameterPrefetchTest, AFailedGatherIsRethrownWhereTheStepReadsIt) {
  std::vector<int64_t> sizes = {2, 2};
  int calls = 0;
  GatherPrefetcher prefetcher(sizes, 1 << 20, /*threaded=*/true, [&](size_t t, Floats &out) {
    if (++calls == 4)
      throw std::runtime_error("rank 1 is gone");
    out.assign(size_t(sizes[t]), 1.0f);
  });
  std::vector<Read> reads = {{0, true}, {0, false}, {1, true}, {1, false}};
  for (int call = 0; call < 2; ++call) {
    prefetcher.beginCall();
    try {
      for (const Read &r : reads)
        r.take ? void(prefetcher.take(r.tensor)) : prefetcher.released(r.tensor);
      prefetcher.finishCall();
      EXPECT_EQ(call, 0);
    } catch (const std::runtime_error &e) {
      EXPECT_EQ(call, 1);
      EXPECT_STREQ(e.what(), "rank 1 is gone");
    }
  }
}
