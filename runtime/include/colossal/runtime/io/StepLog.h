//===- StepLog.h - one JSON object per step, and a progress line ----*- C++ -*-===//
//
// `--log FILE` gets one JSON line per step (step, loss, lr, grad_norm,
// loss_scale, tokens_per_s, time, plus any extra fields such as the
// communication counters), flushed as it is written so a crashed run keeps
// its history. On a terminal, rank 0 also keeps one progress line updated in
// place; when stderr is not a terminal it prints nothing per step.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_STEPLOG_H
#define COLOSSAL_RUNTIME_STEPLOG_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace colossal::rt {

struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;
  double lossScale = 1;
  double tokensPerSecond = 0;
  /// Seconds since the run started.
  double time = 0;
  /// Extra members, already JSON values: {"comm", "{...}"}.
  std::vector<std::pair<std::string, std::string>> extra;
};

/// The JSON line (without the newline).
std::string formatStepRecord(const StepRecord &record);

class StepLog {
public:
  StepLog() = default;
  /// Truncates `path` ("" logs nothing); an error names the path.
  explicit StepLog(const std::string &path);
  ~StepLog();
  StepLog(const StepLog &) = delete;
  StepLog &operator=(const StepLog &) = delete;

  void write(const StepRecord &record);

private:
  std::FILE *file_ = nullptr;
};

class ProgressLine {
public:
  /// Shown only when `enabled` and stderr is a terminal.
  ProgressLine(int64_t totalSteps, bool enabled);
  ~ProgressLine();
  void update(const StepRecord &record);
  /// Ends the line (before other output).
  void finish();

private:
  int64_t total_;
  bool active_;
  bool dirty_ = false;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_STEPLOG_H
