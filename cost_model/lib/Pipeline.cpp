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

/// The order in which one rank runs its tasks, computed task by task: a
/// deep pipeline's orders would fill tens of megabytes (ranks x microbatches
/// x chunks x 2 tasks) that the search would build once per shape.
class RankOrder {
public:
  RankOrder(Schedule schedule, int rank, int ranks, int chunks, int m)
      : schedule(schedule), ranks(ranks), chunks(chunks), total(m * chunks) {
    if (schedule == Schedule::GPipe)
      warmup = m;
    else if (schedule == Schedule::OneFOneB)
      warmup = std::min(ranks - rank - 1, m);
    else
      warmup = std::min(total, (ranks - rank - 1) * 2 + (chunks - 1) * ranks);
  }
  int size() const { return 2 * total; }
  /// The most tasks held for backward at once: the warm-up forwards and
  /// the forward before the first backward, or all of them.
  int peakHeld() const { return std::min(total, warmup + 1); }
  /// The k-th task: the warm-up forwards, then a forward and a backward in
  /// turn (GPipe has no such phase), then the remaining backwards.
  Task operator[](int k) const {
    if (k < warmup)
      return forwardTask(k);
    int steady = schedule == Schedule::GPipe ? 0 : 2 * (total - warmup);
    int j = k - warmup;
    if (j < steady)
      return j % 2 == 0 ? forwardTask(warmup + j / 2) : backwardTask(j / 2);
    return backwardTask(steady / 2 + (j - steady));
  }

private:
  // Interleaved 1F1B (Megatron-LM): microbatches advance in groups of
  // `ranks` through the chunks; forward k runs chunk (k / ranks) % chunks,
  // backward k the chunks in reverse. With one chunk this is microbatch k.
  Task forwardTask(int k) const {
    if (chunks == 1)
      return {0, k, true};
    int group = k / (ranks * chunks), within = k % (ranks * chunks);
    return Task{within / ranks, group * ranks + within % ranks, true};
  }
  Task backwardTask(int k) const {
    if (chunks == 1)
      return {0, k, false};
    int group = k / (ranks * chunks), within = k % (ranks * chunks);
    return Task{chunks - 1 - within / ranks, group * ranks + within % ranks, false};
  }

  Schedule schedule;
  int ranks, chunks, total, warmup;
};

} // namespace

int peakInFlight(Schedule schedule, int rank, int ranks, int chunks, int microbatches) {
  return RankOrder(schedule, rank, ranks, chunks, microbatches).peakHeld();
}

double peakHeldBytes(Schedule schedule, int rank, int ranks, int chunks, int microbatches,
                     const std::vector<double> &chunkBytes) {
  RankOrder order(schedule, rank, ranks, chunks, microbatches);
  double held = 0, peak = 0;
  for (int k = 0; k < order.size(); ++k) {
    Task t = order[k];
    held += (t.forward ? 1 : -1) * chunkBytes[size_t(t.chunk)];
    peak = std::max(peak, held);
  }
  return peak;
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
  std::vector<RankOrder> orders;
  for (int r = 0; r < ranks; ++r)
    orders.emplace_back(schedule, r, ranks, chunks, microbatches);
  std::vector<int> next(ranks, 0);
  std::vector<double> free(ranks, 0);
  std::vector<int> inFlight(ranks, 0);
  result = PipelineResult();
  result.peakInFlight.assign(ranks, 0);
  result.busy.assign(ranks, 0);
  size_t remaining = size_t(ranks) * 2 * microbatches * chunks;
  if (recordTasks)
    result.tasks.reserve(remaining);

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
