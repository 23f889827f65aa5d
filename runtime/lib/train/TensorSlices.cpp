//===- TensorSlices.cpp ---------------------------------------------------===//

#include "colossal/runtime/train/TensorSlices.h"

#include "colossal/runtime/Error.h"

#include <algorithm>

namespace colossal::rt {

namespace {

/// The grid's axes in the tensor ranks' order: a q x q grid's (tensor rank
/// t is row t / q, column t % q) or a q x q x q cube's (tp_in t / q^2, tp_w
/// t / q % q, tp_out t % q).
const std::vector<std::string> kGridAxes = {"tp_row", "tp_col"};
const std::vector<std::string> kCubeAxes = {"tp_in", "tp_w", "tp_out"};

/// A block of a grid or cube of tensor ranks.
SliceOf gridBlockOf(const ProgramParameter &p, int64_t tensorRank, int64_t tensorRanks) {
  bool cube = std::any_of(p.gridSplit.begin(), p.gridSplit.end(), [](const std::vector<std::string> &axes) {
    return std::any_of(axes.begin(), axes.end(),
                       [](const std::string &a) { return std::count(kCubeAxes.begin(), kCubeAxes.end(), a) > 0; });
  });
  const std::vector<std::string> &order = cube ? kCubeAxes : kGridAxes;
  int64_t q = 1, n = 1;
  while (n < tensorRanks)
    n = ++q * q * (cube ? q : 1);
  if (n != tensorRanks || p.gridSplit.size() != p.shape.size())
    fail(p.name, "a block of a tensor " + std::string(cube ? "cube" : "grid") + ", on " + std::to_string(tensorRanks) +
                     " tensor ranks (not a " + (cube ? "cube" : "square") + ") or with " +
                     std::to_string(p.gridSplit.size()) + " split dimensions for " + host::describe(p.shape));
  auto coordinate = [&](const std::string &axis) {
    size_t at = size_t(std::find(order.begin(), order.end(), axis) - order.begin());
    if (at == order.size())
      fail(p.name,
           "split over mesh axis '" + axis + "', which a tensor " + (cube ? "cube" : "grid") + " does not have");
    int64_t t = tensorRank;
    for (size_t later = at + 1; later < order.size(); ++later)
      t /= q;
    return t % q;
  };
  bool grouped = p.gridGroups > 1;
  if (grouped && (p.gridGroupDim < 0 || size_t(p.gridGroupDim) >= p.shape.size() ||
                  p.shape[size_t(p.gridGroupDim)] % p.gridGroups != 0))
    fail(p.name, "a block in " + std::to_string(p.gridGroups) + " groups along dimension " +
                     std::to_string(p.gridGroupDim) + " of " + host::describe(p.shape));
  SliceOf slice{p.shape, host::Shape(p.shape.size(), 0)};
  for (size_t d = 0; d < p.shape.size(); ++d) {
    int64_t index = 0, parts = 1;
    for (const std::string &axis : p.gridSplit[d]) {
      index = index * q + coordinate(axis);
      parts *= q;
    }
    slice.whole[d] *= parts;
    // (Grouped: the block's part of each group starts at this offset
    // within its group.)
    slice.offsets[d] = index * (grouped && int64_t(d) == p.gridGroupDim ? p.shape[d] / p.gridGroups : p.shape[d]);
  }
  if (grouped)
    slice.groups = p.gridGroups, slice.dim = p.gridGroupDim;
  return slice;
}

} // namespace

SliceOf sliceOf(const ProgramParameter &p, int64_t tensorRank, int64_t tensorRanks) {
  if (!p.gridSplit.empty())
    return gridBlockOf(p, tensorRank, tensorRanks);
  SliceOf slice{p.shape, host::Shape(p.shape.size(), 0)};
  if (p.splitDim >= 0 && tensorRanks > 1) {
    if (size_t(p.splitDim) >= p.shape.size())
      fail(p.name, "split along dimension " + std::to_string(p.splitDim) + " of " + host::describe(p.shape));
    int64_t groups = std::max<int64_t>(1, p.splitGroups), size = p.shape[size_t(p.splitDim)];
    if (size % groups)
      fail(p.name, "split in " + std::to_string(groups) + " groups along dimension " + std::to_string(p.splitDim) +
                       " of " + host::describe(p.shape));
    slice.whole[size_t(p.splitDim)] *= tensorRanks;
    slice.offsets[size_t(p.splitDim)] = tensorRank * (size / groups);
    slice.groups = groups, slice.dim = p.splitDim, slice.padding = p.padding;
  }
  return slice;
}

} // namespace colossal::rt
