//===- ThreadCollectives.h - a mesh axis of threads, for tests ---*- C++ -*-===//
//
// T "ranks" as threads over an in-process stand-in for one mesh axis: each
// collective is an exchange (every rank's contribution, met in order, given
// to every rank), reduced or rearranged locally. Tests of the split host ops
// check the ranks' results against the unsplit ops.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TEST_UNIT_RUNTIME_THREADCOLLECTIVES_H
#define COLOSSAL_TEST_UNIT_RUNTIME_THREADCOLLECTIVES_H

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/SequenceParallel.h"
#include "colossal/runtime/train/StepInterface.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace colossal::rt::testing {

/// Every rank's contribution to one collective, given to all of them.
class ThreadAxis {
public:
  explicit ThreadAxis(int ranks) : ranks_(ranks), parts_(size_t(ranks)) {}
  int ranks() const { return ranks_; }

  std::vector<host::Tensor> exchange(int rank, const host::Tensor &x) {
    std::unique_lock<std::mutex> lock(mutex_);
    // Wait until the previous exchange has been taken by everyone.
    done_.wait(lock, [&] { return taken_ == 0; });
    parts_[size_t(rank)] = x;
    if (++arrived_ == ranks_) {
      result_ = parts_;
      ++generation_;
      arrived_ = 0;
      taken_ = ranks_;
      ready_.notify_all();
    } else {
      int64_t generation = generation_;
      ready_.wait(lock, [&] { return generation_ != generation; });
    }
    std::vector<host::Tensor> out = result_;
    if (--taken_ == 0)
      done_.notify_all();
    return out;
  }

private:
  int ranks_;
  std::vector<host::Tensor> parts_, result_;
  int arrived_ = 0, taken_ = 0;
  int64_t generation_ = 0;
  std::mutex mutex_;
  std::condition_variable ready_, done_;
};

class ThreadCollectives : public StepCollectives {
public:
  ThreadCollectives(ThreadAxis &axis, int rank) : axis_(axis), rank_(rank) {}
  host::Tensor allReduce(const host::Tensor &x, const std::string &) override { return reduce(x, false); }
  host::Tensor allReduceMax(const host::Tensor &x, const std::string &) override { return reduce(x, true); }
  int64_t rankOn(const std::string &) override { return rank_; }
  int64_t ranksOn(const std::string &) override { return axis_.ranks(); }
  host::Tensor allGather(const host::Tensor &, const std::string &, int64_t) override {
    fail("test", "no all-gather here");
  }
  host::Tensor reduceScatter(const host::Tensor &, const std::string &, int64_t) override {
    fail("test", "no reduce-scatter here");
  }
  host::Tensor allToAll(const host::Tensor &x, const std::string &, int64_t splitDim, int64_t concatDim) override {
    int ranks = axis_.ranks();
    Floats packed = host::blocksAlong(x, splitDim, ranks);
    std::vector<host::Tensor> parts = axis_.exchange(rank_, host::Tensor::ofFloats({int64_t(packed.size())}, packed));
    // Block `rank_` of every rank's packing, in rank order.
    size_t block = packed.size() / size_t(ranks);
    Floats received;
    for (const host::Tensor &part : parts)
      received.insert(received.end(), part.floats.begin() + rank_ * block, part.floats.begin() + (rank_ + 1) * block);
    host::Shape shape = x.shape;
    shape[size_t(splitDim)] /= ranks;
    return host::joinAlong(received, shape, concatDim, ranks);
  }

  host::Tensor ringShift(const host::Tensor &x, const std::string &) override {
    int ranks = axis_.ranks();
    return axis_.exchange(rank_, x)[size_t((rank_ + ranks - 1) % ranks)];
  }

private:
  host::Tensor reduce(const host::Tensor &x, bool max) {
    std::vector<host::Tensor> parts = axis_.exchange(rank_, x);
    host::Tensor out = parts[0];
    for (size_t r = 1; r < parts.size(); ++r)
      for (size_t i = 0; i < out.floats.size(); ++i)
        out.floats[i] = max ? std::max(out.floats[i], parts[r].floats[i]) : out.floats[i] + parts[r].floats[i];
    return out;
  }

  ThreadAxis &axis_;
  int rank_;
};

/// Runs `body(rank, collectives)` on `ranks` threads; the first failure
/// is rethrown.
inline void onRanks(int ranks, const std::function<void(int, StepCollectives &)> &body) {
  ThreadAxis axis(ranks);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ThreadCollectives collectives(axis, r);
      try {
        body(r, collectives);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
}

} // namespace colossal::rt::testing

#endif // COLOSSAL_TEST_UNIT_RUNTIME_THREADCOLLECTIVES_H
