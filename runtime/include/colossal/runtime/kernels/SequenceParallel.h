//===- SequenceParallel.h - ops on a rank's slice of the tokens ---*- C++ -*-===//
//
// Host ops of sequence parallelism that need to know where the rank's
// tokens sit in the whole tensor, or combine what every rank's tokens give.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_SEQUENCEPARALLEL_H
#define COLOSSAL_RUNTIME_SEQUENCEPARALLEL_H

#include "colossal/runtime/kernels/HostTensor.h"

#include <optional>
#include <string>
#include <vector>

namespace colossal::rt {

class StepCollectives;

namespace host {

/// `train.dropout {mesh_axis, mesh_dim}`: dropout of `x`, the `sliceIndex`-th
/// of `slices` equal slices along `dim` of a whole tensor, whose mask is
/// that slice of the whole tensor's mask (`key` is the whole tensor's: its
/// elements count the whole). The same masks as one rank would draw.
std::vector<Tensor> dropoutOfSlice(const Tensor &x, float ratio, const DropoutKey &key, int64_t dim,
                                   int64_t sliceIndex, int64_t slices);

/// All-to-all's packing (`dist.all_to_all`): `x` cut into `parts` equal
/// slices along `splitDim`, slice j the j-th contiguous block (for rank j).
Floats blocksAlong(const Tensor &x, int64_t splitDim, int64_t parts);

/// All-to-all's unpacking: `received` holds `parts` blocks of shape `block`
/// in rank order; block r becomes slice r along `concatDim` of the result.
Tensor joinAlong(const Floats &received, const Shape &block, int64_t concatDim, int64_t parts);

/// `train.cross_entropy {token_axis}`: the loss over every rank's rows, this
/// rank holding rows `scores` [N, C] and `labels` [N] of them. The rows'
/// losses and counted labels are summed over mesh axis `axis` (one
/// all-reduce of two floats), so every rank gets the whole loss ("mean" or
/// "sum"). With a `vocabularyAxis` (`mesh_axis` too: a tensor axis splits
/// the classes), `scores` holds the rank's columns of its rows and each row's
/// loss is the vocabulary-parallel one (VocabularyParallel.h; `classes` as
/// there).
Tensor tokenSplitCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                              const std::string &reduction, StepCollectives &collectives, const std::string &axis,
                              const std::string &vocabularyAxis = "", int64_t classes = -1);

/// Its gradient for this rank's rows; under "mean" the counted labels are
/// summed over the axis again (one float).
Tensor tokenSplitCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                  std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                  StepCollectives &collectives, const std::string &axis,
                                  const std::string &vocabularyAxis = "", int64_t classes = -1);

} // namespace host
} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_SEQUENCEPARALLEL_H
