//===- CommTimeline.cpp ---------------------------------------------------===//

#include "colossal/runtime/comm/CommTimeline.h"

#include <cstdio>

namespace colossal::rt {

void CommTimeline::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.clear();
  stepThread_ = std::this_thread::get_id();
  recording_.store(true, std::memory_order_relaxed);
}

void CommTimeline::stop() { recording_.store(false, std::memory_order_relaxed); }

void CommTimeline::add(CollectiveKind kind, const std::string &axis, int64_t bytes, Clock::time_point start,
                       Clock::time_point end) {
  if (!recording())
    return;
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(
      {std::string(nameOf(kind)) + " " + axis, bytes, start, end, std::this_thread::get_id() == stepThread_});
}

std::vector<CommTimeline::Span> CommTimeline::spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

std::string CommTimeline::chromeEvents(Clock::time_point origin, int pid) const {
  auto micros = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - origin).count(); };
  std::string text;
  char line[320];
  for (const Span &span : spans()) {
    std::snprintf(line, sizeof line,
                  ",\n {\"name\": \"%s\", \"cat\": \"communication\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                  "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"bytes\": %lld}}",
                  span.name.c_str(), pid, span.onStepThread ? 1 : 2, micros(span.start),
                  micros(span.end) - micros(span.start), static_cast<long long>(span.bytes));
    text += line;
  }
  const char *names[] = {"step", "collectives in the step", "communication thread"};
  for (int tid = 0; tid < 3; ++tid) {
    std::snprintf(
        line, sizeof line,
        ",\n {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}", pid,
        tid, names[tid]);
    text += line;
  }
  return text;
}

} // namespace colossal::rt
