//===- VocabularyParallel.h - embeddings and losses split by vocabulary -*- C++ -*-===//
//
// The host ops of vocabulary parallelism (Megatron-LM): each rank of a mesh
// axis holds one slice of the vocabulary, `slices` equal runs of rows of
// an embedding table and the matching columns of the logits. A lookup
// gathers only the rows the rank holds (the compiler sums the ranks' parts
// after it); the cross-entropy combines each row's maximum, softmax
// denominator and label logit over the axis, three numbers per row, so no
// rank ever holds whole logits. Labels and token ids stay global.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_VOCABULARYPARALLEL_H
#define COLOSSAL_RUNTIME_VOCABULARYPARALLEL_H

#include "colossal/runtime/kernels/HostTensor.h"

#include <optional>
#include <string>

namespace colossal::rt {

class StepCollectives;

namespace host {

/// `train.gather {mesh_axis}`: a gather along `axis` from `slice`, the
/// `sliceIndex`-th of `slices` equal slices of a table along that axis.
/// Indices are the whole table's (negative ones count from its end); those
/// outside the slice give zeros.
Tensor gatherFromSlice(const Tensor &slice, const Tensor &indices, int64_t axis, int64_t sliceIndex, int64_t slices,
                       const Shape &out);
/// Its gradient: `dy` summed into the slice's rows that the indices hit.
Tensor gatherFromSliceGrad(const Tensor &indices, const Tensor &dy, int64_t axis, int64_t sliceIndex,
                           int64_t slices, const Shape &sliceShape);

/// `train.cross_entropy {mesh_axis}`: the softmax cross-entropy of logits
/// whose class columns are split over the ranks of mesh axis `axis` (this
/// rank's `scores` are columns [r C, (r + 1) C) of [rows, C x ranks]), with
/// global `labels`. Every rank returns the whole loss. `classes` >= 0: only
/// the first `classes` columns of the whole are classes; the rest pad the
/// vocabulary and take no part (their gradient is zero).
Tensor vocabularyParallelCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                                      const std::string &reduction, StepCollectives &collectives,
                                      const std::string &axis, int64_t classes = -1);
/// Its gradient with respect to this rank's columns.
Tensor vocabularyParallelCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                          std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                          StepCollectives &collectives, const std::string &axis,
                                          int64_t classes = -1);

} // namespace host
} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_VOCABULARYPARALLEL_H
