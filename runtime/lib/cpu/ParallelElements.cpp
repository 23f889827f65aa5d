//===- ParallelElements.cpp -----------------------------------------------===//

#include "ParallelElements.h"

#include "colossal/runtime/comm/Launch.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace colossal::rt::cpu {

namespace {

constexpr int64_t kRange = int64_t(1) << 18;
// Below this many elements per thread a thread costs more than it saves.
constexpr int64_t kPerThread = int64_t(1) << 20;

/// The cores of this node shared by the ranks on it.
int threadsFor(int64_t elements) {
  static const int cores = [] {
    int hardware = int(std::thread::hardware_concurrency());
    int ranks = std::max(1, detectLaunch().localSize);
    return std::max(1, hardware / ranks);
  }();
  return int(std::max<int64_t>(1, std::min<int64_t>(cores, elements / kPerThread)));
}

} // namespace

namespace {

/// Runs work() on `threads` threads, the caller's one of them.
void onThreads(int threads, const std::function<void()> &work) {
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k)
    pool.emplace_back(work);
  work();
  for (std::thread &thread : pool)
    thread.join();
}

} // namespace

void forEachElementRange(const OptimizerTensor *tensors, int64_t count,
                         const std::function<void(const OptimizerTensor &, int64_t, int64_t)> &body) {
  int64_t total = 0;
  for (int64_t t = 0; t < count; ++t)
    total += tensors[t].n;
  int threads = threadsFor(total);
  if (threads == 1) {
    for (int64_t t = 0; t < count; ++t)
      body(tensors[t], 0, tensors[t].n);
    return;
  }
  struct Range {
    int64_t tensor, begin, end;
  };
  std::vector<Range> ranges;
  for (int64_t t = 0; t < count; ++t)
    for (int64_t begin = 0; begin < tensors[t].n; begin += kRange)
      ranges.push_back({t, begin, std::min(tensors[t].n, begin + kRange)});
  std::atomic<size_t> next{0};
  onThreads(threads, [&] {
    for (size_t r = next++; r < ranges.size(); r = next++)
      body(tensors[ranges[r].tensor], ranges[r].begin, ranges[r].end);
  });
}

void forEachTensor(const OptimizerTensor *tensors, int64_t count, const std::function<void(int64_t)> &body) {
  int64_t total = 0;
  for (int64_t t = 0; t < count; ++t)
    total += tensors[t].n;
  int threads = int(std::min<int64_t>(threadsFor(total), count));
  if (threads <= 1) {
    for (int64_t t = 0; t < count; ++t)
      body(t);
    return;
  }
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t t = 0; t < count; ++t)
    order[size_t(t)] = t;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return tensors[a].n > tensors[b].n; });
  std::atomic<size_t> next{0};
  onThreads(threads, [&] {
    for (size_t k = next++; k < order.size(); k = next++)
      body(order[k]);
  });
}

} // namespace colossal::rt::cpu
