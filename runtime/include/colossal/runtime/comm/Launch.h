//===- Launch.h - who am I: rank, world size and local rank ------*- C++ -*-===//
//
// An emitted program may be started by OpenMPI's mpirun, by Slurm's srun or
// by a torchrun-style launcher. Each publishes the rank, the world size and
// the rank within the node in its own variables; `detectLaunch` reads them
// (in that order of preference) so the rest of the runtime does not care. The
// local rank picks the GPU.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LAUNCH_H
#define COLOSSAL_RUNTIME_LAUNCH_H

#include <functional>
#include <optional>
#include <string>

namespace colossal::rt {

struct LaunchInfo {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localSize = 1;
  /// "openmpi", "slurm", "torchrun" or "single" (no launcher).
  std::string launcher = "single";
};

/// Reads the launcher's variables through `getenv` (a parameter so tests can
/// feed their own environment). A malformed or inconsistent value (a rank
/// outside the world, a non-number) is an error naming the variable.
LaunchInfo detectLaunch(const std::function<std::optional<std::string>(const std::string &)> &getenv);
LaunchInfo detectLaunch();

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_LAUNCH_H
