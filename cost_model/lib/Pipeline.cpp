//===- Pipeline.cpp - simulating a pipeline schedule ----------------------===//

#include "colossal/cost/Pipeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace colossal::cost {
namespace {

struct Task {
  int chunk, microbatch;
  bool forward;
};

/// The order in which one rank runs its tasks.
std::vector<Task> rankOrder(Schedule schedule, int rank, int ranks, int chunks, int m) {
  std::vector<Task> order;
  if (schedule == Schedule::GPipe) {
    for (int i = 0; i < m; ++i)
      order.push_back({0, i, true});
    for (int i = 0; i < m; ++i)
      order.push_back({0, i, false});
    return order;
  }
  if (schedule == Schedule::OneFOneB) {
    int warmup = std::min(ranks - rank - 1, m);
    int f = 0, b = 0;
    for (; f < warmup; ++f)
      order.push_back({0, f, true});
    while (f < m) {
      order.push_back({0, f++, true});
      order.push_back({0, b++, false});
    }
    while (b < m)
      order.push_back({0, b++, false});
    return order;
  }
  // Interleaved 1F1B (Megatron-LM): microbatches advance in groups of
  // `ranks` through the chunks; forward k runs chunk (k / ranks) % chunks,
  // backward k the chunks in reverse.
  int total = m * chunks;
  auto forwardTask = [&](int k) {
    int group = k / (ranks * chunks), within = k % (ranks * chunks);
    return Task{within / ranks, group * ranks + within % ranks, true};
  };
  auto backwardTask = [&](int k) {
    int group = k / (ranks * chunks), within = k % (ranks * chunks);
    return Task{chunks - 1 - within / ranks, group * ranks + within % ranks, false};
  };
  int warmup = std::min(total, (ranks - rank - 1) * 2 + (chunks - 1) * ranks);
  int f = 0, b = 0;
  for (; f < warmup; ++f)
    order.push_back(forwardTask(f));
  while (f < total) {
    order.push_back(forwardTask(f++));
    order.push_back(backwardTask(b++));
  }
  while (b < total)
    order.push_back(backwardTask(b++));
  return order;
}

} // namespace

static size_t remainingTasks(const std::vector<std::vector<Task>> &orders) {
  size_t n = 0;
  for (const auto &order : orders)
    n += order.size();
  return n;
}

bool simulatePipeline(Schedule schedule, int ranks, int chunks, int microbatches,
                      const std::vector<ChunkTimes> &times, double p2pSeconds,
                      PipelineResult &result, std::string &error, bool recordTasks) {
  if (ranks < 1 || chunks < 1 || microbatches < 1 || int(times.size()) != ranks * chunks) {
    error = "pipeline: invalid shape";
    return false;
  }
  if (schedule != Schedule::Interleaved && chunks != 1) {
    error = "pipeline: only the interleaved schedule runs several chunks per rank";
    return false;
  }
  if (schedule == Schedule::Interleaved && microbatches % ranks != 0) {
    error = "pipeline: the interleaved schedule needs microbatches (" +
            std::to_string(microbatches) + ") divisible by the pipeline size (" +
            std::to_string(ranks) + ")";
    return false;
  }
  int stages = ranks * chunks;
  constexpr double kNotDone = -1;
  // Finish times by (virtual stage, microbatch).
  // Reused between calls: a search simulates thousands of pipelines.
  thread_local std::vector<double> forwardEnd, backwardEnd;
  forwardEnd.assign(size_t(stages) * microbatches, kNotDone);
  backwardEnd.assign(size_t(stages) * microbatches, kNotDone);
  // Each rank's task order depends only on the schedule's shape; a search
  // simulates the same shapes many times (per thread: no locking).
  thread_local std::map<std::tuple<int, int, int, int>, std::vector<std::vector<Task>>> orderCache;
  auto key = std::make_tuple(int(schedule), ranks, chunks, microbatches);
  auto cached = orderCache.find(key);
  if (cached == orderCache.end()) {
    if (orderCache.size() > 4096)
      orderCache.clear();
    std::vector<std::vector<Task>> built;
    for (int r = 0; r < ranks; ++r)
      built.push_back(rankOrder(schedule, r, ranks, chunks, microbatches));
    cached = orderCache.emplace(key, std::move(built)).first;
  }
  const std::vector<std::vector<Task>> &orders = cached->second;
  std::vector<size_t> next(ranks, 0);
  std::vector<double> free(ranks, 0);
  std::vector<int> inFlight(ranks, 0);
  result = PipelineResult();
  result.peakInFlight.assign(ranks, 0);
  result.busy.assign(ranks, 0);
  if (recordTasks)
    result.tasks.reserve(remainingTasks(orders));

  size_t remaining = 0;
  for (const auto &order : orders)
    remaining += order.size();
  while (remaining > 0) {
    bool progressed = false;
    // Each rank runs its tasks in order for as long as their inputs are
    // ready; the times do not depend on the order ranks are visited in.
    for (int r = 0; r < ranks; ++r)
      while (next[r] < orders[r].size()) {
        Task t = orders[r][next[r]];
        int stage = t.chunk * ranks + r;
        size_t at = size_t(stage) * microbatches + t.microbatch;
        double ready = 0;
        if (t.forward && stage > 0) {
          double dep = forwardEnd[size_t(stage - 1) * microbatches + t.microbatch];
          if (dep == kNotDone)
            break;
          ready = dep + p2pSeconds;
        }
        if (!t.forward) {
          if (forwardEnd[at] == kNotDone)
            break;
          ready = forwardEnd[at];
          if (stage < stages - 1) {
            double dep = backwardEnd[size_t(stage + 1) * microbatches + t.microbatch];
            if (dep == kNotDone)
              break;
            ready = std::max(ready, dep + p2pSeconds);
          }
        }
        double duration = t.forward ? times[stage].forward : times[stage].backward;
        double start = std::max(free[r], ready), end = start + duration;
        (t.forward ? forwardEnd : backwardEnd)[at] = end;
        free[r] = end;
        result.busy[r] += duration;
        inFlight[r] += t.forward ? 1 : -1;
        result.peakInFlight[r] = std::max(result.peakInFlight[r], inFlight[r]);
        if (recordTasks)
          result.tasks.push_back({r, t.chunk, t.microbatch, t.forward, start, end});
        result.makespan = std::max(result.makespan, end);
        ++next[r];
        --remaining;
        progressed = true;
      }
    if (!progressed) {
      error = "pipeline: the schedule deadlocks";
      return false;
    }
  }
  return true;
}

} // namespace colossal::cost
