//===- PhaseProgress.cpp ----------------------------------------------------===//

#include "PhaseProgress.h"

#include <cstdio>
#include <unistd.h>

namespace colossal {

PhaseProgress::PhaseProgress(bool enabled) : enabled_(enabled && isatty(2)) {
  if (enabled_)
    ticker_ = std::thread([this] { tick(); });
}

PhaseProgress::~PhaseProgress() {
  if (!enabled_)
    return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    phase_.clear();
    draw(false);
  }
  wake_.notify_all();
  ticker_.join();
}

void PhaseProgress::show(const std::string &phase) {
  if (!enabled_)
    return;
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = phase;
  since_ = std::chrono::steady_clock::now();
  draw(false);
}

// Writes straight to the file descriptor: the line is one write, whichever
// thread makes it.
void PhaseProgress::draw(bool counting) {
  std::string line = "\r\033[K";
  if (!phase_.empty()) {
    line += "colossal-compile: " + phase_;
    if (counting)
      line += " (" +
              std::to_string(int(std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count())) +
              " s)";
  } else if (!drawn_) {
    return;
  }
  drawn_ = !phase_.empty();
  ssize_t unused = write(2, line.data(), line.size());
  (void)unused;
}

void PhaseProgress::tick() {
  std::unique_lock<std::mutex> lock(mutex_);
  using namespace std::chrono;
  while (!stopping_) {
    // Wake on the phase's whole seconds, so that its count shows when a
    // second has passed, not up to a second later.
    auto next = steady_clock::now() + seconds(1);
    if (!phase_.empty())
      next = since_ + seconds(duration_cast<seconds>(steady_clock::now() - since_).count() + 1);
    wake_.wait_until(lock, next);
    if (!stopping_ && !phase_.empty() && steady_clock::now() - since_ >= seconds(1))
      draw(true);
  }
}

} // namespace colossal
