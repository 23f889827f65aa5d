//===- Timing.h - timing a body on every rank --------------------*- C++ -*-===//

#ifndef COLOSSAL_BENCH_TIMING_H
#define COLOSSAL_BENCH_TIMING_H

#include "colossal/runtime/comm/Communicator.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace colossal::bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Median over `repeats` of the slowest rank's time for `body`; with
/// `aloneOnRankZero`, only rank 0 runs it, the others asleep in an idle
/// barrier (a rank polling for it would share its core's clock or caches).
inline double timed(rt::Communicator &world, int repeats, const std::function<void()> &body,
                    const std::function<void()> &sync, bool aloneOnRankZero = false) {
  bool runs = !aloneOnRankZero || world.rank() == 0;
  if (aloneOnRankZero)
    world.barrier();
  if (runs) {
    body(); // warm-up
    sync();
  }
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    if (!aloneOnRankZero)
      world.barrier();
    double start = now();
    if (runs) {
      body();
      sync();
    }
    double elapsed = now() - start;
    if (!aloneOnRankZero)
      world.allReduce(rt::Buffer::of(&elapsed, rt::DType::F64, 1), rt::ReduceOp::Max);
    samples.push_back(elapsed);
  }
  std::sort(samples.begin(), samples.end());
  double median = samples[samples.size() / 2];
  if (aloneOnRankZero) {
    world.idleBarrier();
    world.broadcast(rt::Buffer::of(&median, rt::DType::F64, 1), 0);
  }
  return median;
}

} // namespace colossal::bench

#endif // COLOSSAL_BENCH_TIMING_H
