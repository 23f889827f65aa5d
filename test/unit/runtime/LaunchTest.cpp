//===- LaunchTest.cpp - launcher variables, meshes and memory accounting --===//

#include "colossal/runtime/Error.h"
#include "colossal/runtime/comm/Launch.h"
#include "colossal/runtime/Memory.h"
#include "colossal/runtime/comm/Mesh.h"
#include "colossal/runtime/TrackedAllocator.h"

#include <gtest/gtest.h>

#include <map>

using namespace colossal::rt;

namespace {

LaunchInfo launchWith(const std::map<std::string, std::string> &env) {
  return detectLaunch([&](const std::string &name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end())
      return std::nullopt;
    return it->second;
  });
}

TEST(LaunchTest, ReadsEachLauncher) {
  LaunchInfo single = launchWith({});
  EXPECT_EQ(single.launcher, "single");
  EXPECT_EQ(single.worldSize, 1);

  LaunchInfo ompi = launchWith({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(ompi.launcher, "openmpi");
  EXPECT_EQ(ompi.rank, 5);
  EXPECT_EQ(ompi.worldSize, 8);
  EXPECT_EQ(ompi.localRank, 1);

  LaunchInfo slurm = launchWith({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"},
                                 {"SLURM_NTASKS_PER_NODE", "2(x2)"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.localSize, 2);

  LaunchInfo torchrun = launchWith({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_EQ(torchrun.launcher, "torchrun");
  EXPECT_EQ(torchrun.localRank, 1);
}

TEST(LaunchTest, RejectsInconsistentVariables) {
  try {
    launchWith({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
    FAIL() << "a rank outside the world was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("RANK=4 is outside WORLD_SIZE=4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(launchWith({{"RANK", "x"}, {"WORLD_SIZE", "4"}}), Error);
  EXPECT_THROW(launchWith({{"RANK", "0"}}), Error); // no world size
}

TEST(MeshTest, RowMajorGroups) {
  MeshShape mesh = MeshShape::parse("dp=2,pp=3,tp=4");
  EXPECT_EQ(mesh.ranks(), 24);
  EXPECT_EQ(mesh.coordinates(23), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(mesh.rankOf({1, 0, 2}), 14);
  // tp is innermost: consecutive ranks.
  EXPECT_EQ(mesh.group(5, 2), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(mesh.group(5, 1), (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(mesh.group(5, 0), (std::vector<int>{5, 17}));
  EXPECT_EQ(mesh.str(), "dp=2,pp=3,tp=4");
  EXPECT_THROW(MeshShape::parse("dp=2,dp=2"), Error);
  EXPECT_THROW(MeshShape::parse("dp=0"), Error);
  EXPECT_THROW(MeshShape::parse("dp"), Error);
  EXPECT_THROW(mesh.axisIndex("sp"), Error);
}

TEST(MemoryTest, CountsCurrentAndPeakByCategory) {
  MemoryTracker tracker;
  {
    Allocation params(1000, MemoryCategory::Parameters, MemorySpace::Host, &tracker);
    {
      Allocation acts(5000, MemoryCategory::Activations, MemorySpace::Host, &tracker);
      EXPECT_EQ(tracker.current(MemorySpace::Host), 6000);
    }
    Allocation grads(2000, MemoryCategory::Gradients, MemorySpace::Host, &tracker);
    Allocation moved = std::move(grads);
    EXPECT_EQ(tracker.current(MemorySpace::Host, MemoryCategory::Gradients), 2000);
    EXPECT_EQ(tracker.current(MemorySpace::Host), 3000);
    EXPECT_EQ(tracker.peak(MemorySpace::Host), 6000);
    EXPECT_EQ(tracker.peak(MemorySpace::Host, MemoryCategory::Activations), 5000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(moved.data()) % 64, 0u);
  }
  EXPECT_EQ(tracker.current(MemorySpace::Host), 0);
  tracker.resetPeaks();
  EXPECT_EQ(tracker.peak(MemorySpace::Host), 0);
  EXPECT_NE(tracker.json().find("\"optimizer_state\""), std::string::npos);
  // No device in this build (or none installed): a clear error.
  try {
    Allocation device(16, MemoryCategory::Workspace, MemorySpace::Device, &tracker);
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("without a device"), std::string::npos) << e.what();
  }
}

/// What the global tracker holds now in `category` of `space`.
int64_t held(MemoryCategory category, MemorySpace space = MemorySpace::Host) {
  return MemoryTracker::global().current(space, category);
}

TEST(MemoryTest, TrackedBuffersAreChargedWhereTheyAreMade) {
  int64_t gradients = held(MemoryCategory::Gradients), workspace = held(MemoryCategory::Workspace),
          pinned = held(MemoryCategory::OptimizerState, MemorySpace::PinnedHost);
  Floats a, c;
  {
    MemoryScope scope(MemoryCategory::Gradients);
    a.assign(100, 1.0f);
    // A kernel's scratch is workspace whatever the scope.
    Floats s = scratch<float>(50);
    EXPECT_EQ(held(MemoryCategory::Gradients) - gradients, 400);
    EXPECT_EQ(held(MemoryCategory::Workspace) - workspace, 200);
    {
      // Scopes nest; the innermost wins, also for pinned host memory.
      MemoryScope inner(MemoryCategory::OptimizerState, MemorySpace::PinnedHost);
      c.assign(10, 0.0f);
    }
    EXPECT_EQ(held(MemoryCategory::OptimizerState, MemorySpace::PinnedHost) - pinned, 40);
  }
  // Without a scope a thread allocates workspace.
  Floats d(8);
  EXPECT_EQ(held(MemoryCategory::Workspace) - workspace, 32);
  {
    // Freed under another scope: uncharged where it was charged.
    MemoryScope scope(MemoryCategory::Activations);
    int64_t activations = held(MemoryCategory::Activations);
    Floats().swap(a);
    Floats().swap(c);
    EXPECT_EQ(held(MemoryCategory::Activations), activations);
    // A copy is charged where it is made.
    Floats copy = d;
    EXPECT_EQ(held(MemoryCategory::Activations) - activations, 32);
  }
  EXPECT_EQ(held(MemoryCategory::Gradients), gradients);
  EXPECT_EQ(held(MemoryCategory::OptimizerState, MemorySpace::PinnedHost), pinned);
  // A buffer fixed to a category keeps it when it grows.
  Floats fixed = buffer<float>(4, MemoryCategory::Communication);
  int64_t communication = held(MemoryCategory::Communication);
  fixed.resize(1000);
  EXPECT_EQ(held(MemoryCategory::Communication) - communication, 4 * (1000 - 4));
  // 64-byte aligned data.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fixed.data()) % 64, 0u);
}

TEST(MemoryTest, PeaksAreOfTheSumNotTheSumOfPeaks) {
  MemoryTracker tracker;
  tracker.allocated(MemorySpace::Host, MemoryCategory::OptimizerState, 800);
  tracker.allocated(MemorySpace::Host, MemoryCategory::Communication, 300);
  tracker.freed(MemorySpace::Host, MemoryCategory::Communication, 300);
  tracker.allocated(MemorySpace::Host, MemoryCategory::OptimizerState, 100);
  EXPECT_EQ(tracker.peak(MemorySpace::Host), 1100);
  EXPECT_EQ(tracker.current(MemorySpace::Host), 900);
  std::string host = tracker.json(MemorySpace::Host);
  EXPECT_NE(host.find("\"optimizer_state\": {\"current\": 900, \"peak\": 900}"), std::string::npos) << host;
  EXPECT_EQ(host.find("device"), std::string::npos);
}

} // namespace
