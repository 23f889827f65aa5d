//===- DeviceCollectives.cpp - split ops staged through host memory -------===//

#include "colossal/runtime/comm/DeviceCollectives.h"

#include "colossal/runtime/kernels/GridLinear.h"
#include "colossal/runtime/kernels/RingAttention.h"
#include "colossal/runtime/kernels/SequenceParallel.h"
#include "colossal/runtime/kernels/VocabularyParallel.h"
#include "colossal/runtime/train/StepInterface.h"

#include <memory>

namespace colossal::rt::device {

namespace {

/// An optional operand, downloaded (null stays null).
std::unique_ptr<host::Tensor> downloadOptional(const Tensor *t) {
  return t ? std::make_unique<host::Tensor>(download(*t)) : nullptr;
}

std::vector<Tensor> uploadAll(const std::vector<host::Tensor> &results) {
  std::vector<Tensor> out;
  out.reserve(results.size());
  for (const host::Tensor &r : results)
    out.push_back(upload(r));
  return out;
}

} // namespace

Tensor Collectives::allReduce(const Tensor &x, const std::string &axis) {
  return upload(host_.allReduce(download(x), axis));
}

Tensor Collectives::allReduceInPlace(Tensor &&x, const std::string &axis) {
  host::Tensor staged = download(x);
  release(x);
  return upload(host_.allReduceInPlace(std::move(staged), axis));
}

Tensor Collectives::allGather(const Tensor &x, const std::string &axis, int64_t dim) {
  return upload(host_.allGather(download(x), axis, dim));
}

Tensor Collectives::reduceScatter(const Tensor &x, const std::string &axis, int64_t dim) {
  return upload(host_.reduceScatter(download(x), axis, dim));
}

Tensor Collectives::allToAll(const Tensor &x, const std::string &axis, int64_t splitDim, int64_t concatDim) {
  return upload(host_.allToAll(download(x), axis, splitDim, concatDim));
}

int64_t Collectives::rankOn(const std::string &axis) { return host_.rankOn(axis); }
int64_t Collectives::ranksOn(const std::string &axis) { return host_.ranksOn(axis); }

std::vector<Tensor> dropoutOfSlice(const Tensor &x, float ratio, const DropoutKey &key, int64_t dim,
                                   int64_t sliceIndex, int64_t slices) {
  return uploadAll(host::dropoutOfSlice(download(x), ratio, key, dim, sliceIndex, slices));
}

Tensor gatherFromSlice(const Tensor &slice, const Tensor &indices, int64_t axis, int64_t sliceIndex, int64_t slices,
                       const Shape &out) {
  return upload(host::gatherFromSlice(download(slice), download(indices), axis, sliceIndex, slices, out));
}

Tensor gatherFromSliceGrad(const Tensor &indices, const Tensor &dy, int64_t axis, int64_t sliceIndex,
                           int64_t slices, const Shape &sliceShape) {
  return upload(host::gatherFromSliceGrad(download(indices), download(dy), axis, sliceIndex, slices, sliceShape));
}

Tensor vocabularyParallelCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                                      const std::string &reduction, Collectives &collectives,
                                      const std::string &axis, int64_t classes) {
  return upload(host::vocabularyParallelCrossEntropy(download(scores), download(labels), ignoreIndex, reduction,
                                                     collectives.host(), axis, classes));
}

Tensor vocabularyParallelCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                          std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                          Collectives &collectives, const std::string &axis, int64_t classes) {
  return upload(host::vocabularyParallelCrossEntropyGrad(download(scores), download(labels), download(dloss),
                                                         ignoreIndex, reduction, collectives.host(), axis, classes));
}

Tensor tokenSplitCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                              const std::string &reduction, Collectives &collectives, const std::string &axis,
                              const std::string &vocabularyAxis, int64_t classes) {
  return upload(host::tokenSplitCrossEntropy(download(scores), download(labels), ignoreIndex, reduction,
                                             collectives.host(), axis, vocabularyAxis, classes));
}

Tensor tokenSplitCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                  std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                  Collectives &collectives, const std::string &axis, const std::string &vocabularyAxis,
                                  int64_t classes) {
  return upload(host::tokenSplitCrossEntropyGrad(download(scores), download(labels), download(dloss), ignoreIndex,
                                                 reduction, collectives.host(), axis, vocabularyAxis, classes));
}

Tensor ringAttention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal,
                     Collectives &collectives, const std::string &axis, const AttentionDropout &dropout) {
  std::unique_ptr<host::Tensor> hostMask = downloadOptional(mask);
  return upload(host::ringAttention(download(q), download(k), download(v), hostMask.get(), scale, causal,
                                    collectives.host(), axis, dropout));
}

std::vector<Tensor> ringAttentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                      const Tensor &dOut, float scale, bool causal, Collectives &collectives,
                                      const std::string &axis, const AttentionDropout &dropout) {
  std::unique_ptr<host::Tensor> hostMask = downloadOptional(mask);
  return uploadAll(host::ringAttentionGrad(download(q), download(k), download(v), hostMask.get(), download(dOut), scale,
                                           causal, collectives.host(), axis, dropout));
}

Tensor summaLinear(const Tensor &x, const Tensor &w, Collectives &collectives, const std::string &row,
                   const std::string &column, bool transposed) {
  return upload(host::summaLinear(download(x), download(w), collectives.host(), row, column, transposed));
}

std::vector<Tensor> summaLinearGrad(const Tensor &x, const Tensor &w, const Tensor &dy, Collectives &collectives,
                                    const std::string &row, const std::string &column, bool transposed) {
  return uploadAll(
      host::summaLinearGrad(download(x), download(w), download(dy), collectives.host(), row, column, transposed));
}

} // namespace colossal::rt::device
