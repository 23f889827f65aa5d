//===- Error.h - errors that name the rank, the call and the reason -*- C++ -*-===//
//
// Every MPI, CUDA, NCCL and cuBLAS call the runtime makes is checked. A
// failure becomes an `Error` carrying the rank that saw it, the call that
// failed and why, so a log from a thousand ranks still says where to look.
// `runOrAbort` is the last line of defence in an emitted program: it prints
// the error and takes the whole job down instead of leaving peers to hang in
// a collective.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_ERROR_H
#define COLOSSAL_RUNTIME_ERROR_H

#include <functional>
#include <stdexcept>
#include <string>

namespace colossal::rt {

class Error : public std::runtime_error {
public:
  Error(int rank, std::string call, std::string reason);

  int rank() const { return rank_; }
  const std::string &call() const { return call_; }
  const std::string &reason() const { return reason_; }
  /// How many ranks raised this failure together, having agreed on it
  /// (0: this rank alone, the others may be waiting in a collective).
  int agreedBy() const { return agreedBy_; }
  Error &agreedBy(int ranks) {
    agreedBy_ = ranks;
    return *this;
  }

private:
  int rank_;
  int agreedBy_ = 0;
  std::string call_;
  std::string reason_;
};

/// The rank this process reports in errors (-1 until bootstrap knows it).
void setErrorRank(int rank);
int errorRank();

/// Throws an Error for this process's rank.
[[noreturn]] void fail(const std::string &call, const std::string &reason);

/// Runs `body`; on an exception prints "colossal: rank R: call: reason" and
/// returns a non-zero exit code after `onFailure` (which aborts the job's
/// communicators so that no peer waits forever). A failure all `ranks` of
/// the job agreed on needs no abort: every rank leaves on its own, after
/// saying why (an abort from the first to leave could cut the others short).
int runOrAbort(const std::function<int()> &body, const std::function<void()> &onFailure, int ranks = 0);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_ERROR_H
