//===- ProcessGroups.h - one communicator per group of every mesh axis -*- C++ -*-===//
//
// Given the mesh, each rank joins one group per axis: the ranks that share
// every other coordinate. Collectives of a parallel strategy run on these
// groups (gradients on "dp", activations on "tp", stage hand-offs on "pp"),
// and the counters are kept per axis, the way the cost model predicts them.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_PROCESSGROUPS_H
#define COLOSSAL_RUNTIME_PROCESSGROUPS_H

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/comm/Mesh.h"

#include <functional>
#include <memory>
#include <vector>

namespace colossal::rt {

class MpiCommunicator;

class ProcessGroups {
public:
  /// Splits `world` (MPI) along every axis of `mesh`; the mesh must cover
  /// exactly the world's ranks.
  static ProcessGroups overMpi(const MeshShape &mesh, MpiCommunicator &world);

  /// Splits a world communicator of any backend: `split(color, key, axis,
  /// ranks)` is the backend's collective split, called once per axis.
  using SplitFunction = std::function<std::unique_ptr<Communicator>(int color, int key, const std::string &axis,
                                                                    std::vector<int> worldRanks)>;
  static ProcessGroups bySplitting(const MeshShape &mesh, int rank, int worldSize, const SplitFunction &split);

  ProcessGroups(MeshShape mesh, std::vector<std::unique_ptr<Communicator>> axes);
  ProcessGroups(ProcessGroups &&) = default;
  ~ProcessGroups();

  const MeshShape &mesh() const { return mesh_; }
  Communicator &axis(int index) { return *axes_.at(size_t(index)); }
  Communicator &axis(const std::string &name) { return axis(mesh_.axisIndex(name)); }

private:
  MeshShape mesh_;
  std::vector<std::unique_ptr<Communicator>> axes_;
};

/// Fails, naming both numbers, unless the mesh has exactly `worldSize` ranks.
void requireMeshMatchesWorld(const MeshShape &mesh, int worldSize);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_PROCESSGROUPS_H
