//===- TrainerOptions.h - a training program's flags -----------------*- C++ -*-===//
//
// What `model_train` takes on its command line: the compiled settings with
// the flags that override them, and where data, weights, logs and
// checkpoints come from and go.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LIB_TRAIN_TRAINEROPTIONS_H
#define COLOSSAL_RUNTIME_LIB_TRAIN_TRAINEROPTIONS_H

#include "colossal/runtime/train/StepInterface.h"

#include <cstdint>
#include <optional>
#include <string>

namespace colossal::rt::trainer {

using host::Shape;
using host::Tensor;

/// The run's settings: the program's, overridden by flags.
struct Options {
  TrainingSettings settings;
  uint64_t seed = 0;
  std::string feed, data, log, save, resume, weights, dumpGradients, exportDir, trace;
  /// --weights or --import named the file: every parameter comes from it,
  /// also where the program would draw it (--init).
  bool weightsGiven = false;
  /// --save-every N (0: only the last step) and --keep N (0: every one).
  int64_t saveEvery = 0, keep = 0;
  bool quiet = false;
};

/// The flags and the program's defaults, on stdout.
void printUsage(const char *argv0, const TrainingProgram &program);

/// Parses argv over the program's settings; nullopt after --help (printed
/// when `printHelp`). A bad flag is an Error naming it.
std::optional<Options> parseOptions(int argc, char **argv, const TrainingProgram &program, bool printHelp = true);

} // namespace colossal::rt::trainer

#endif // COLOSSAL_RUNTIME_LIB_TRAIN_TRAINEROPTIONS_H
