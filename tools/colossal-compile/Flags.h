//===- Flags.h - colossal-compile's command line, read and checked -*- C++
//-*-===//

#ifndef COLOSSAL_TOOLS_COLOSSAL_COMPILE_FLAGS_H
#define COLOSSAL_TOOLS_COLOSSAL_COMPILE_FLAGS_H

#include "colossal/Import/OnnxImporter.h"

#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <optional>
#include <string>

namespace colossal::driver {

/// What the run produces: a phase's IR, the plan, or the program.
enum class Emit { Mlir, Raised, Partitioned, Train, Plan, Source, Exe };

/// The command line after its checks: every value valid on its own (one
/// flag's range, a known name); what flags say together is checked where
/// they meet (BuildLayout.h).
struct Request {
  Emit emit = Emit::Raised;
  /// --emit=source or exe: `outputPath` is a directory.
  bool toDirectory = false;
  std::string inputPath, outputPath;
  std::string target, precision, optimizer, schedule;
  /// A host program (--target cpu, or a plan for one): planned for this
  /// machine and priced as the host program.
  bool hostProgram = true;
  std::string strategy, planFile, cluster;
  /// --emit=plan --trace: the predicted step as Chrome-trace JSON.
  std::string traceFile;
  /// --emit=plan --buildable-only: plans the partitioner builds, only.
  bool buildableOnly = false;
  int64_t gpus = 1;
  bool gpusGiven = false;
  int64_t microbatches = 1;
  bool microbatchesGiven = false;
  /// The global batch, over every rank and microbatch.
  std::optional<int64_t> batch;
  /// --init normal[:STD]: the standard deviation trainable weights start
  /// from (negative: the file's weights).
  double initStd = -1;
  double lr = 1e-3, weightDecay = 0.01, beta1 = 0.9, beta2 = 0.999, momentum = 0.9, clipGradNorm = 0;
  /// Negative: the optimizer's default.
  double eps = -1;
  bool nesterov = false;
  int64_t warmupSteps = 0, steps = 10;
  /// Bindings, trainable and frozen parameters (the batch is bound later,
  /// per rank and microbatch).
  ImportOptions import;
  bool summaryOnly = false, quiet = false;
  /// Print each phase's time (and each pass's) at the end.
  bool timePhases = false;
};

/// Parses and checks argv; on a bad flag prints why and returns nullopt.
std::optional<Request> parseCommandLine(int argc, char **argv);

/// "colossal-compile: error: MESSAGE" on the standard error stream.
void printError(const llvm::Twine &message);

} // namespace colossal::driver

#endif // COLOSSAL_TOOLS_COLOSSAL_COMPILE_FLAGS_H
