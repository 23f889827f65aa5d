//===- CommTimeline.h - when each collective of a traced step ran -*- C++ -*-===//
//
// While it records, every collective a rank's communicators complete is kept
// as a span (its counters' name and axis, bytes, start and end), so that
// `--trace` draws the rank's communication beside its calls, named as the
// plan's predicted trace names them ("all_reduce tp"). A collective issued
// on the thread that started the recording (the step's) and one issued on
// another (the gradient reduction's and ZeRO-3 prefetch's communication
// thread) go to separate streams: each thread's spans follow one another.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_COMMTIMELINE_H
#define COLOSSAL_RUNTIME_COMMTIMELINE_H

#include "colossal/runtime/comm/CommCounters.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace colossal::rt {

class CommTimeline {
public:
  using Clock = std::chrono::steady_clock;
  struct Span {
    std::string name; // "all_reduce dp"
    int64_t bytes = 0;
    Clock::time_point start, end;
    bool onStepThread = true;
  };

  /// Forgets what was kept and records from now; the calling thread is the
  /// step's.
  void start();
  void stop();
  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  void add(CollectiveKind kind, const std::string &axis, int64_t bytes, Clock::time_point start, Clock::time_point end);
  std::vector<Span> spans() const;
  /// The spans as Chrome-trace events, comma-led, times from `origin`: tid 1
  /// the step thread's collectives, tid 2 the communication thread's, with
  /// their thread names.
  std::string chromeEvents(Clock::time_point origin, int pid) const;

private:
  mutable std::mutex mutex_;
  std::atomic<bool> recording_{false};
  std::thread::id stepThread_;
  std::vector<Span> spans_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_COMMTIMELINE_H
