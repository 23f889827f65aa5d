//===- DeviceCollectives.h - split ops of emitted CUDA programs --*- C++ -*-===//
//
// Tensor and sequence parallelism on the CUDA target: the collectives a step
// makes over a mesh axis, and the ops whose work is split over one (the
// vocabulary-parallel embedding and loss, dropout of a token slice, the
// token-split loss, ring attention, SUMMA's grid product), with the host target's meaning
// (`Trainer.h`'s StepCollectives, VocabularyParallel.h, SequenceParallel.h,
// RingAttention.h, GridLinear.h).
//
// This lowering stages their tensors through host memory: it downloads the
// operands, runs the host target's code (MPI collectives over the trainer's
// communicators, host kernels) and uploads the results. Both targets then
// compute these ops from one implementation, the one the equivalence tests
// check on the host; the cost is a round trip over PCIe per op, which NCCL
// on device buffers and device kernels for these ops will remove.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_DEVICECOLLECTIVES_H
#define COLOSSAL_RUNTIME_DEVICECOLLECTIVES_H

#include "colossal/runtime/kernels/DeviceTensor.h"
#include "colossal/runtime/kernels/Philox.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt {

class StepCollectives;

namespace device {

/// The step's collectives over a mesh axis, on device tensors.
class Collectives {
public:
  explicit Collectives(StepCollectives &host) : host_(host) {}
  Tensor allReduce(const Tensor &x, const std::string &axis);
  /// The sum, `x` freed before it is made (the step's last read of `x`).
  Tensor allReduceInPlace(Tensor &&x, const std::string &axis);
  Tensor allGather(const Tensor &x, const std::string &axis, int64_t dim);
  Tensor reduceScatter(const Tensor &x, const std::string &axis, int64_t dim);
  Tensor allToAll(const Tensor &x, const std::string &axis, int64_t splitDim, int64_t concatDim);
  int64_t rankOn(const std::string &axis);
  int64_t ranksOn(const std::string &axis);
  /// The trainer's collectives, which the staged ops run on.
  StepCollectives &host() { return host_; }

private:
  StepCollectives &host_;
};

std::vector<Tensor> dropoutOfSlice(const Tensor &x, float ratio, const DropoutKey &key, int64_t dim,
                                   int64_t sliceIndex, int64_t slices);
Tensor gatherFromSlice(const Tensor &slice, const Tensor &indices, int64_t axis, int64_t sliceIndex, int64_t slices,
                       const Shape &out);
Tensor gatherFromSliceGrad(const Tensor &indices, const Tensor &dy, int64_t axis, int64_t sliceIndex,
                           int64_t slices, const Shape &sliceShape);
Tensor vocabularyParallelCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                                      const std::string &reduction, Collectives &collectives,
                                      const std::string &axis, int64_t classes = -1);
Tensor vocabularyParallelCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                          std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                          Collectives &collectives, const std::string &axis, int64_t classes = -1);
Tensor tokenSplitCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                              const std::string &reduction, Collectives &collectives, const std::string &axis,
                              const std::string &vocabularyAxis = "", int64_t classes = -1);
Tensor tokenSplitCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                  std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                  Collectives &collectives, const std::string &axis,
                                  const std::string &vocabularyAxis = "", int64_t classes = -1);
Tensor ringAttention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal,
                     Collectives &collectives, const std::string &axis, const AttentionDropout &dropout = {});
std::vector<Tensor> ringAttentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                      const Tensor &dOut, float scale, bool causal, Collectives &collectives,
                                      const std::string &axis, const AttentionDropout &dropout = {});
/// SUMMA's linear layer on a q x q grid (GridLinear.h).
Tensor summaLinear(const Tensor &x, const Tensor &w, Collectives &collectives, const std::string &row,
                   const std::string &column, bool transposed = false);
std::vector<Tensor> summaLinearGrad(const Tensor &x, const Tensor &w, const Tensor &dy, Collectives &collectives,
                                    const std::string &row, const std::string &column, bool transposed = false);

} // namespace device
} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_DEVICECOLLECTIVES_H
