//===- ProcessGroups.cpp --------------------------------------------------===//

#include "colossal/runtime/comm/ProcessGroups.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/comm/MpiCommunicator.h"

namespace colossal::rt {

void requireMeshMatchesWorld(const MeshShape &mesh, int worldSize) {
  if (mesh.ranks() != worldSize)
    fail("mesh", "mesh " + mesh.str() + " has " + std::to_string(mesh.ranks()) +
                     " ranks but the job was started with " + std::to_string(worldSize) +
                     " (mpirun -np " + std::to_string(mesh.ranks()) + ")");
}

ProcessGroups::ProcessGroups(MeshShape mesh, std::vector<std::unique_ptr<Communicator>> axes)
    : mesh_(std::move(mesh)), axes_(std::move(axes)) {}

ProcessGroups::~ProcessGroups() = default;

ProcessGroups ProcessGroups::bySplitting(const MeshShape &mesh, int rank, int worldSize, const SplitFunction &split) {
  requireMeshMatchesWorld(mesh, worldSize);
  std::vector<int> coords = mesh.coordinates(rank);
  std::vector<std::unique_ptr<Communicator>> axes;
  for (size_t axis = 0; axis < mesh.axes().size(); ++axis) {
    // The group is named by the rank it has at coordinate 0 of this axis.
    std::vector<int> base = coords;
    base[axis] = 0;
    axes.push_back(split(mesh.rankOf(base), coords[axis], mesh.axes()[axis].name, mesh.group(rank, int(axis))));
  }
  return ProcessGroups(mesh, std::move(axes));
}

ProcessGroups ProcessGroups::overMpi(const MeshShape &mesh, MpiCommunicator &world) {
  return bySplitting(mesh, world.rank(), world.size(),
                     [&](int color, int key, const std::string &axis, std::vector<int> ranks) {
                       return std::unique_ptr<Communicator>(world.split(color, key, axis, std::move(ranks)));
                     });
}

} // namespace colossal::rt
