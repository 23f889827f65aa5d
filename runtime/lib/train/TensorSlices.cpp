//===- TensorSlices.cpp ---------------------------------------------------===//

#include "colossal/runtime/train/TensorSlices.h"

#include "colossal/runtime/Error.h"

#include <algorithm>

namespace colossal::rt {

SliceOf sliceOf(const ProgramParameter &p, int64_t tensorRank, int64_t tensorRanks) {
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
