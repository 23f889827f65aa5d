//===- StepLog.cpp --------------------------------------------------------===//

#include "colossal/runtime/io/StepLog.h"

#include "colossal/runtime/Error.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <unistd.h>

namespace colossal::rt {

namespace {
/// JSON has no NaN or infinity: they are written as null.
std::string number(double value, int digits = 9) {
  if (!std::isfinite(value))
    return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}
} // namespace

std::string formatStepRecord(const StepRecord &r) {
  // The loss scale in full: it is a power of two the reader compares exactly.
  std::string line = "{\"step\": " + std::to_string(r.step) + ", \"loss\": " + number(r.loss) +
                     ", \"lr\": " + number(r.lr) + ", \"grad_norm\": " + number(r.gradNorm) +
                     ", \"loss_scale\": " + number(r.lossScale, 17) + ", \"tokens_per_s\": " + number(r.tokensPerSecond) +
                     ", \"time\": " + number(r.time);
  for (const auto &[key, value] : r.extra)
    line += ", \"" + key + "\": " + value;
  return line + "}";
}

StepLog::StepLog(const std::string &path) {
  if (path.empty())
    return;
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    fail("open log " + path, std::strerror(errno));
}

StepLog::~StepLog() {
  if (file_)
    std::fclose(file_);
}

void StepLog::write(const StepRecord &record) {
  if (!file_)
    return;
  std::string line = formatStepRecord(record) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    fail("write log", std::strerror(errno));
}

ProgressLine::ProgressLine(int64_t totalSteps, bool enabled)
    : total_(totalSteps), active_(enabled && isatty(STDERR_FILENO)) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(const StepRecord &r) {
  if (!active_)
    return;
  double remaining = r.step > 0 ? r.time / double(r.step) * double(total_ - r.step) : 0;
  std::fprintf(stderr, "\r\033[Kstep %lld/%lld  loss %.4f  lr %.2e  grad %.3g  %.0f tok/s  eta %dm%02ds",
               (long long)r.step, (long long)total_, r.loss, r.lr, r.gradNorm, r.tokensPerSecond,
               int(remaining) / 60, int(remaining) % 60);
  std::fflush(stderr);
  dirty_ = true;
}

void ProgressLine::finish() {
  if (active_ && dirty_)
    std::fputc('\n', stderr);
  dirty_ = false;
}

} // namespace colossal::rt
