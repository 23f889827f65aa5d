//===- TensorSlices.cpp ---------------------------------------------------===//

#include "colossal/runtime/train/TensorSlices.h"

#include "colossal/runtime/Error.h"

#include <algorithm>

namespace colossal::rt {

namespace {

/// A block of a q x q grid of tensor ranks: tensor rank t is row t / q
/// (its rank on tp_row) and column t % q (on tp_col).
SliceOf gridBlockOf(const ProgramParameter &p, int64_t tensorRank, int64_t tensorRanks) {
  int64_t q = 1;
  while (q * q < tensorRanks)
    ++q;
  if (q * q != tensorRanks || p.gridSplit.size() != p.shape.size())
    fail(p.name, "a block of a tensor grid, on " + std::to_string(tensorRanks) + " tensor ranks (not a square) or " +
                     "with " + std::to_string(p.gridSplit.size()) + " split dimensions for " + host::describe(p.shape));
  SliceOf slice{p.shape, host::Shape(p.shape.size(), 0)};
  for (size_t d = 0; d < p.shape.size(); ++d) {
    int64_t index = 0, parts = 1;
    for (const std::string &axis : p.gridSplit[d]) {
      if (axis != "tp_row" && axis != "tp_col")
        fail(p.name, "split over mesh axis '" + axis + "', which a tensor grid does not have");
      index = index * q + (axis == "tp_row" ? tensorRank / q : tensorRank % q);
      parts *= q;
    }
    slice.whole[d] *= parts;
    slice.offsets[d] = index * p.shape[d];
  }
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
