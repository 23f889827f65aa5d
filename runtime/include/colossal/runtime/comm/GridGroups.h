//===- GridGroups.h - the communicators of a tensor grid ---------*- C++ -*-===//
//
// The tensor ranks of a 2D, 2.5D or 3D grid split again, by the grid's own
// axes: tensor rank t is, on d layers of a q x q grid, layer t / q^2, row
// t % q^2 / q and column t % q; on a q x q x q cube, tp_in t / q^2, tp_w
// t / q % q and tp_out t % q. Each group the emitted step names is one axis
// of a mesh over the same world: the grid's axes themselves, and the groups
// that merge several (one grid column's rows across 2.5D's layers,
// "tp_rows"; a cube column's rows, "tp_rows_in" and "tp_rows_out"; a
// 2.5D layer's ranks, which hold one copy of the weights).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_GRIDGROUPS_H
#define COLOSSAL_RUNTIME_GRIDGROUPS_H

#include "colossal/runtime/comm/ProcessGroups.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt {

/// A grid's shape: `side` q, 2.5D's `depth` d (1 for 2D), or a cube.
struct GridShape {
  int64_t side = 1;
  int64_t depth = 1;
  bool cube = false;

  /// The tensor ranks the grid holds: q^2 d, or q^3.
  int64_t ranks() const { return side * side * (cube ? side : depth); }
  /// "2 layer(s) of a 2 x 2 tensor grid", "a 2^3 tensor cube".
  std::string str() const;
};

class GridGroups {
public:
  /// The grid's groups over `world`, whose mesh outside the tensor axis is
  /// `outer` (as "pp=2,dp=1"); nullopt with `error` when the grid does not
  /// hold `tensorRanks`.
  static std::optional<GridGroups> overMpi(const std::string &outer, GridShape grid, int64_t tensorRanks,
                                           MpiCommunicator &world, std::string &error);

  /// The grid axes the step communicates over, in the order the emitted
  /// step names them (RankGroups::grid).
  std::vector<Communicator *> axes();
  /// On 2.5D's layers, the rank's layer: the tensor ranks that hold one
  /// copy of the weights (slicing, saving and norm completion run there);
  /// null on 2D and 3D, where that is the whole tensor axis.
  Communicator *layer();

private:
  GridGroups() = default;
  /// Adds a mesh `outer,shape` and names the axes of it the step uses.
  void add(const std::string &outer, const std::string &shape, std::vector<std::string> named, MpiCommunicator &world);

  std::vector<ProcessGroups> meshes_;
  std::vector<std::pair<size_t, std::string>> named_; // (mesh, axis)
  std::optional<std::pair<size_t, std::string>> layer_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_GRIDGROUPS_H
