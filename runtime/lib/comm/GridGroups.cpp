//===- GridGroups.cpp - the communicators of a tensor grid ----------------===//

#include "colossal/runtime/comm/GridGroups.h"

#include "colossal/runtime/comm/MpiCommunicator.h"

namespace colossal::rt {

std::string GridShape::str() const {
  std::string q = std::to_string(side);
  if (cube)
    return "a " + q + "^3 tensor cube";
  return std::to_string(depth) + " layer(s) of a " + q + " x " + q + " tensor grid";
}

std::optional<GridGroups> GridGroups::overMpi(const std::string &outer, GridShape grid, int64_t tensorRanks,
                                              MpiCommunicator &world, std::string &error) {
  if (grid.side < 2 || grid.depth < 1 || grid.ranks() != tensorRanks) {
    error = grid.str() + " on " + std::to_string(tensorRanks) + " tensor ranks";
    return std::nullopt;
  }
  GridGroups groups;
  std::string side = std::to_string(grid.side), square = std::to_string(grid.side * grid.side);
  if (grid.cube) {
    groups.add(outer, "tp_in=" + side + ",tp_w=" + side + ",tp_out=" + side, {"tp_in", "tp_w", "tp_out"}, world);
    groups.add(outer, "tp_in=" + side + ",tp_rows_in=" + square, {"tp_rows_in"}, world);
    groups.add(outer, "tp_rows_out=" + square + ",tp_out=" + side, {"tp_rows_out"}, world);
  } else if (grid.depth > 1) {
    std::string layers = "tp_depth=" + std::to_string(grid.depth);
    groups.add(outer, layers + ",tp_row=" + side + ",tp_col=" + side, {"tp_depth", "tp_row", "tp_col"}, world);
    groups.add(outer, layers + ",tp_layer=" + square, {}, world);
    groups.layer_ = {groups.meshes_.size() - 1, "tp_layer"};
    groups.add(outer, "tp_rows=" + std::to_string(grid.depth * grid.side) + ",tp_col=" + side, {"tp_rows"}, world);
  } else {
    groups.add(outer, "tp_row=" + side + ",tp_col=" + side, {"tp_row", "tp_col"}, world);
  }
  return groups;
}

void GridGroups::add(const std::string &outer, const std::string &shape, std::vector<std::string> named,
                     MpiCommunicator &world) {
  meshes_.push_back(ProcessGroups::overMpi(MeshShape::parse(outer + "," + shape), world));
  for (std::string &axis : named)
    named_.emplace_back(meshes_.size() - 1, std::move(axis));
}

std::vector<Communicator *> GridGroups::axes() {
  // (Each mesh owns its communicators: their addresses do not move with
  // the meshes.)
  std::vector<Communicator *> axes;
  for (auto &[mesh, axis] : named_)
    axes.push_back(&meshes_[mesh].axis(axis));
  return axes;
}

Communicator *GridGroups::layer() { return layer_ ? &meshes_[layer_->first].axis(layer_->second) : nullptr; }

} // namespace colossal::rt
