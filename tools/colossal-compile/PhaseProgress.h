//===- PhaseProgress.h - one line saying what the compiler is doing -*- C++ -*-===//
//
// On a terminal, a long compile shows which phase is under way and for how
// many seconds, on one line rewritten in place and cleared when the phase
// ends (import, raising, partitioning, differentiation, the program's
// source, weights and predictions; the plan search and the C++ build show
// their own). Not on a terminal, nothing: logs stay plain.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COMPILE_PHASEPROGRESS_H
#define COLOSSAL_COMPILE_PHASEPROGRESS_H

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace colossal {

class PhaseProgress {
public:
  /// Shown when `enabled` and standard error is a terminal.
  explicit PhaseProgress(bool enabled);
  ~PhaseProgress();

  /// The phase now under way ("" clears the line).
  void show(const std::string &phase);
  /// Clears the line (before anything else is printed).
  void clear() { show(""); }

private:
  void draw(bool counting);
  void tick();

  bool enabled_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string phase_;
  std::chrono::steady_clock::time_point since_;
  bool drawn_ = false, stopping_ = false;
  std::thread ticker_;
};

} // namespace colossal

#endif // COLOSSAL_COMPILE_PHASEPROGRESS_H
