//===- Error.cpp ----------------------------------------------------------===//

#include "colossal/runtime/Error.h"

#include <atomic>
#include <cstdio>

namespace colossal::rt {

namespace {
std::atomic<int> processRank{-1};

std::string describe(int rank, const std::string &call, const std::string &reason) {
  std::string where = rank >= 0 ? "rank " + std::to_string(rank) : std::string("rank ?");
  return where + ": " + call + ": " + reason;
}
} // namespace

Error::Error(int rank, std::string call, std::string reason)
    : std::runtime_error(describe(rank, call, reason)), rank_(rank), call_(std::move(call)),
      reason_(std::move(reason)) {}

void setErrorRank(int rank) { processRank = rank; }
int errorRank() { return processRank; }

void fail(const std::string &call, const std::string &reason) {
  throw Error(processRank, call, reason);
}

int runOrAbort(const std::function<int()> &body, const std::function<void()> &onFailure, int ranks) {
  try {
    return body();
  } catch (const Error &e) {
    std::fprintf(stderr, "colossal: %s\n", e.what());
    if (ranks > 0 && e.agreedBy() == ranks) {
      std::fflush(stderr);
      return 1;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "colossal: rank %d: %s\n", errorRank(), e.what());
  }
  std::fflush(stderr);
  if (onFailure)
    onFailure();
  return 1;
}

} // namespace colossal::rt
