//===- Launch.cpp ---------------------------------------------------------===//

#include "colossal/runtime/comm/Launch.h"

#include "colossal/runtime/Error.h"

#include <cstdlib>

namespace colossal::rt {

namespace {

struct LauncherVariables {
  const char *launcher;
  const char *rank, *worldSize, *localRank, *localSize;
};

// Preference order: an mpirun inside a Slurm allocation sets both families,
// and its own variables describe the processes it started.
constexpr LauncherVariables kLaunchers[] = {
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

int readInt(const std::function<std::optional<std::string>(const std::string &)> &getenv,
            const char *name, int fallback, bool required) {
  std::optional<std::string> text = getenv(name);
  if (!text) {
    if (required)
      fail("launch", std::string(name) + " is not set");
    return fallback;
  }
  // Slurm writes per-node task counts like "4(x2)"; the leading count is ours.
  std::string digits = text->substr(0, text->find('('));
  char *end = nullptr;
  long value = std::strtol(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || value < 0 || value > (1 << 24))
    fail("launch", std::string(name) + "=\"" + *text + "\" is not a count");
  return int(value);
}

} // namespace

LaunchInfo detectLaunch(const std::function<std::optional<std::string>(const std::string &)> &getenv) {
  for (const LauncherVariables &v : kLaunchers) {
    if (!getenv(v.rank))
      continue;
    LaunchInfo info;
    info.launcher = v.launcher;
    info.rank = readInt(getenv, v.rank, 0, true);
    info.worldSize = readInt(getenv, v.worldSize, 0, true);
    info.localRank = readInt(getenv, v.localRank, 0, false);
    info.localSize = readInt(getenv, v.localSize, 1, false);
    if (info.worldSize < 1 || info.rank >= info.worldSize)
      fail("launch", std::string(v.rank) + "=" + std::to_string(info.rank) + " is outside " +
                         v.worldSize + "=" + std::to_string(info.worldSize));
    if (info.localSize < 1 || info.localRank >= info.localSize)
      fail("launch", std::string(v.localRank) + "=" + std::to_string(info.localRank) +
                         " is outside " + v.localSize + "=" + std::to_string(info.localSize));
    return info;
  }
  return LaunchInfo{};
}

LaunchInfo detectLaunch() {
  return detectLaunch([](const std::string &name) -> std::optional<std::string> {
    if (const char *value = std::getenv(name.c_str()))
      return std::string(value);
    return std::nullopt;
  });
}

} // namespace colossal::rt
