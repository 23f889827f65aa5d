//===- CommCounters.h - bytes moved, per collective and per axis -*- C++ -*-===//
//
// Every collective records its calls and bytes under (collective, axis). The
// byte count follows the cost model's convention (cost/Communication.h): the
// full size of the reduced or gathered tensor, the whole send buffer of an
// all-to-all, the buffer of a broadcast or reduce, the bytes sent by send/recv. So a
// plan's predicted communication can be compared with what ran, exactly.
// Nothing is exempt: the trainer's reduction of the loss for its log counts
// like the step's own collectives (and the cost model predicts it).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_COMMCOUNTERS_H
#define COLOSSAL_RUNTIME_COMMCOUNTERS_H

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace colossal::rt {

class CommTimeline;

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv, Barrier };
/// "all_reduce", "all_gather", ... (the cost model's names).
const char *nameOf(CollectiveKind kind);

class CommCounters {
public:
  struct Entry {
    int64_t calls = 0;
    int64_t bytes = 0;
  };
  using Key = std::pair<std::string, std::string>; // (collective, axis)

  void record(CollectiveKind kind, const std::string &axis, int64_t bytes);
  std::map<Key, Entry> snapshot() const;
  void reset();
  /// {"all_reduce": {"dp": {"calls": 3, "bytes": 1024}}, ...} on one line.
  std::string json() const;
  /// Where the communicators also keep each collective's span (null: not
  /// kept); the timeline records only between its start() and stop().
  void setTimeline(CommTimeline *timeline) { timeline_ = timeline; }
  CommTimeline *timeline() const { return timeline_; }

private:
  CommTimeline *timeline_ = nullptr;
  mutable std::mutex mutex_;
  std::map<Key, Entry> entries_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_COMMCOUNTERS_H
