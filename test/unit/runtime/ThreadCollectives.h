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
#include <map>
#include <memory>
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

/// Calls and bytes per (collective, axis), as the runtime's counters count
/// them (the buffer of a broadcast or reduce), summed over the ranks.
class ThreadCounters {
public:
  void record(const std::string &collective, const std::string &axis, const host::Tensor &x) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry &e = entries_[{collective, axis}];
    e.calls += 1;
    e.bytes += int64_t(x.floats.size()) * 4;
  }
  struct Entry {
    int64_t calls = 0, bytes = 0;
  };
  std::map<std::pair<std::string, std::string>, Entry> entries() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
  }

private:
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, Entry> entries_;
};

class ThreadCollectives : public StepCollectives {
public:
  /// One axis: every axis name is it.
  ThreadCollectives(ThreadAxis &axis, int rank) : axis_(&axis), rank_(rank) {}
  /// Named axes, each with this rank's index in it.
  ThreadCollectives(std::map<std::string, std::pair<ThreadAxis *, int>> axes, ThreadCounters *counters)
      : named_(std::move(axes)), counters_(counters) {}
  host::Tensor allReduce(const host::Tensor &x, const std::string &) override { return reduce(x, false); }
  host::Tensor allReduceMax(const host::Tensor &x, const std::string &) override { return reduce(x, true); }
  int64_t rankOn(const std::string &name) override { return on(name).second; }
  int64_t ranksOn(const std::string &name) override { return on(name).first->ranks(); }
  host::Tensor broadcast(const host::Tensor &x, const std::string &name, int64_t root) override {
    auto [axis, rank] = on(name);
    if (counters_)
      counters_->record("broadcast", name, x);
    return axis->exchange(rank, x)[size_t(root)];
  }
  host::Tensor reduceTo(const host::Tensor &x, const std::string &name, int64_t root) override {
    auto [axis, rank] = on(name);
    if (counters_)
      counters_->record("reduce", name, x);
    std::vector<host::Tensor> parts = axis->exchange(rank, x);
    if (rank != root)
      return x;
    host::Tensor out = parts[0];
    for (size_t r = 1; r < parts.size(); ++r)
      for (size_t i = 0; i < out.floats.size(); ++i)
        out.floats[i] += parts[r].floats[i];
    return out;
  }
  host::Tensor allGather(const host::Tensor &, const std::string &, int64_t) override {
    fail("test", "no all-gather here");
  }
  host::Tensor reduceScatter(const host::Tensor &, const std::string &, int64_t) override {
    fail("test", "no reduce-scatter here");
  }
  host::Tensor allToAll(const host::Tensor &x, const std::string &, int64_t splitDim, int64_t concatDim) override {
    int ranks = axis_->ranks();
    Floats packed = host::blocksAlong(x, splitDim, ranks);
    std::vector<host::Tensor> parts = axis_->exchange(rank_, host::Tensor::ofFloats({int64_t(packed.size())}, packed));
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
    int ranks = axis_->ranks();
    return axis_->exchange(rank_, x)[size_t((rank_ + ranks - 1) % ranks)];
  }

private:
  std::pair<ThreadAxis *, int> on(const std::string &name) {
    if (axis_)
      return {axis_, rank_};
    auto it = named_.find(name);
    if (it == named_.end())
      fail("test", "no axis '" + name + "'");
    return it->second;
  }

  host::Tensor reduce(const host::Tensor &x, bool max) {
    std::vector<host::Tensor> parts = axis_->exchange(rank_, x);
    host::Tensor out = parts[0];
    for (size_t r = 1; r < parts.size(); ++r)
      for (size_t i = 0; i < out.floats.size(); ++i)
        out.floats[i] = max ? std::max(out.floats[i], parts[r].floats[i]) : out.floats[i] + parts[r].floats[i];
    return out;
  }

  ThreadAxis *axis_ = nullptr;
  int rank_ = 0;
  std::map<std::string, std::pair<ThreadAxis *, int>> named_;
  ThreadCounters *counters_ = nullptr;
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

/// Runs `body(i, j, collectives)` on the q x q ranks of a grid, rank (i, j)
/// on its own thread: mesh axis `row` is its grid row (its index there is
/// j), `column` its grid column (index i). The first failure is rethrown.
inline void onGrid(int q, const std::string &row, const std::string &column, ThreadCounters *counters,
                   const std::function<void(int, int, StepCollectives &)> &body) {
  std::vector<std::unique_ptr<ThreadAxis>> rows, columns;
  for (int k = 0; k < q; ++k) {
    rows.push_back(std::make_unique<ThreadAxis>(q));
    columns.push_back(std::make_unique<ThreadAxis>(q));
  }
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(size_t(q * q));
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < q; ++j)
      threads.emplace_back([&, i, j] {
        ThreadCollectives collectives({{row, {rows[size_t(i)].get(), j}}, {column, {columns[size_t(j)].get(), i}}},
                                      counters);
        try {
          body(i, j, collectives);
        } catch (...) {
          errors[size_t(i * q + j)] = std::current_exception();
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
