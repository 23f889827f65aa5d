//===- TensorSlices.h - a tensor-parallel rank's slice of a weight -*- C++ -*-===//
//
// Under tensor parallelism a split parameter is, on each rank of the tensor
// axis, one slice of the whole tensor along one dimension (or, for a fused
// projection split in groups, one slice of each group, side by side); on a
// q x q tensor grid (or a q x q x q cube), a block split along several
// dimensions over the grid's axes (`ProgramParameter::gridSplit`). The
// trainer cuts its slice out of the whole weights it loads, and puts the
// slices back together where the whole tensor is wanted (gradient dumps).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TENSORSLICES_H
#define COLOSSAL_RUNTIME_TENSORSLICES_H

#include "colossal/runtime/kernels/TensorIndexing.h"
#include "colossal/runtime/train/StepInterface.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace colossal::rt {

/// Where a tensor-parallel rank's slice sits in the whole tensor: from
/// `offsets`, or in `groups` equal parts along the split dimension, part g
/// from offsets + g x (the whole dimension / groups).
struct SliceOf {
  host::Shape whole, offsets;
  int64_t groups = 1, dim = -1;
  /// The whole tensor's last `padding` rows along `dim` are zeros the split
  /// added (a vocabulary the tensor ranks do not divide).
  int64_t padding = 0;
};

/// The whole tensor without its padding rows: what the model itself holds.
inline host::Shape modelShape(const SliceOf &slice) {
  host::Shape shape = slice.whole;
  if (slice.padding > 0)
    shape[size_t(slice.dim)] -= slice.padding;
  return shape;
}

/// Rank `tensorRank`'s slice of parameter `p` (whose `shape` is one rank's)
/// among `tensorRanks`; the whole tensor when it is not split.
SliceOf sliceOf(const ProgramParameter &p, int64_t tensorRank, int64_t tensorRanks);

/// Calls `copy(wholeOffset, partOffset, count)` for each contiguous run of
/// the slice `slice` places (of shape `shape`) in the whole tensor.
template <typename Copy> void forEachSliceRun(const SliceOf &slice, const host::Shape &shape, Copy copy) {
  indexing::forEachBlockRun(slice.whole, shape, slice.offsets, slice.groups, slice.dim, copy);
}

/// Cuts the slice out of `whole` (of shape `slice.whole`) into `part`.
template <typename T> void cutSlice(const T *whole, const SliceOf &slice, const host::Shape &shape, T *part) {
  forEachSliceRun(slice, shape, [&](int64_t at, int64_t to, int64_t n) {
    std::memcpy(part + to, whole + at, size_t(n) * sizeof(T));
  });
}

/// Puts `part` back in its place in `whole`.
template <typename T> void placeSlice(const T *part, const SliceOf &slice, const host::Shape &shape, T *whole) {
  forEachSliceRun(slice, shape, [&](int64_t at, int64_t from, int64_t n) {
    std::memcpy(whole + at, part + from, size_t(n) * sizeof(T));
  });
}

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_TENSORSLICES_H
