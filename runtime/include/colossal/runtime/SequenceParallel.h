//===- SequenceParallel.h - ops on a rank's slice of the tokens ---*- C++ -*-===//
//
// Host ops of sequence parallelism that need to know where the rank's
// tokens sit in the whole tensor.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_SEQUENCEPARALLEL_H
#define COLOSSAL_RUNTIME_SEQUENCEPARALLEL_H

#include "colossal/runtime/HostTensor.h"

#include <vector>

namespace colossal::rt::host {

/// `train.dropout {mesh_axis, mesh_dim}`: dropout of `x`, the `sliceIndex`-th
/// of `slices` equal slices along `dim` of a whole tensor, whose mask is
/// that slice of the whole tensor's mask (`key` is the whole tensor's: its
/// elements count the whole). The same masks as one rank would draw.
std::vector<Tensor> dropoutOfSlice(const Tensor &x, float ratio, const DropoutKey &key, int64_t dim,
                                   int64_t sliceIndex, int64_t slices);

} // namespace colossal::rt::host

#endif // COLOSSAL_RUNTIME_SEQUENCEPARALLEL_H
