//===- CommCounters.cpp ---------------------------------------------------===//

#include "colossal/runtime/comm/CommCounters.h"

namespace colossal::rt {

const char *nameOf(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::Reduce:
    return "reduce";
  case CollectiveKind::SendRecv:
    return "send_recv";
  case CollectiveKind::Barrier:
    return "barrier";
  }
  return "?";
}

void CommCounters::record(CollectiveKind kind, const std::string &axis, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry &entry = entries_[{nameOf(kind), axis}];
  entry.calls += 1;
  entry.bytes += bytes;
}

std::map<CommCounters::Key, CommCounters::Entry> CommCounters::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

void CommCounters::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

std::string CommCounters::json() const {
  std::map<Key, Entry> entries = snapshot();
  std::string text = "{";
  std::string open;
  for (const auto &[key, entry] : entries) {
    if (key.first != open) {
      text += (open.empty() ? "\"" : "}, \"") + key.first + "\": {";
      open = key.first;
    } else {
      text += ", ";
    }
    text += "\"" + key.second + "\": {\"calls\": " + std::to_string(entry.calls) +
            ", \"bytes\": " + std::to_string(entry.bytes) + "}";
  }
  return text + (open.empty() ? "}" : "}}");
}

} // namespace colossal::rt
