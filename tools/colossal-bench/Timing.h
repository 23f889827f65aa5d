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
/// `aloneOnRankZero`, only rank 0 runs it while the others wait.
inline double timed(rt::Communicator &world, int repeats, const std::function<void()> &body,
                    const std::function<void()> &sync, bool aloneOnRankZero = false) {
  bool runs = !aloneOnRankZero || world.rank() == 0;
  if (runs) {
    body(); // warm-up
    sync();
  }
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    world.barrier();
    double start = now();
    if (runs) {
      body();
      sync();
    }
    double elapsed = now() - start;
    world.allReduce(rt::Buffer::of(&elapsed, rt::DType::F64, 1), rt::ReduceOp::Max);
    samples.push_back(elapsed);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

} // namespace colossal::bench

#endif // COLOSSAL_BENCH_TIMING_H
