//===- DeviceTensor.h - the values and ops of emitted CUDA programs -*- C++ -*-===//
//
// The CUDA target's counterpart of HostTensor.h, with the same functions and
// the same meaning: an emitted CUDA program is the host program's text with
// `device::` tensors, inputs and parameters uploaded at the start of the
// step, the loss and gradients downloaded at its end. Heavy ops run the
// runtime's CUDA kernels (cuBLASLt GEMM, fused attention, norms,
// cross-entropy); data movement runs generic index kernels here. All work
// goes to the default stream, in program order.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_DEVICETENSOR_H
#define COLOSSAL_RUNTIME_DEVICETENSOR_H

#include "colossal/runtime/HostTensor.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt::device {

using Shape = std::vector<int64_t>;
using host::Binary;
using host::Compare;
using host::ReduceKind;
using host::Unary;

struct Tensor {
  Shape shape;
  bool integer = false;
  /// Device memory: float32 or int64 elements; freed with the last copy of
  /// the handle.
  std::shared_ptr<void> data;

  static Tensor zeros(Shape shape, bool integer = false);
  static Tensor ofFloats(Shape shape, const std::vector<float> &values);
  static Tensor ofInts(Shape shape, const std::vector<int64_t> &values);
  int64_t elements() const;
  float *floats() const { return static_cast<float *>(data.get()); }
  int64_t *ints() const { return static_cast<int64_t *>(data.get()); }
};

Tensor upload(const host::Tensor &t);
host::Tensor download(const Tensor &t);

/// Fails naming `what` unless `t` has this shape and kind.
void expect(const Tensor &t, const Shape &shape, bool integer, const char *what);

Tensor binary(Binary op, const Tensor &a, const Tensor &b, const Shape &out, bool integerResult);
Tensor compare(Compare op, const Tensor &a, const Tensor &b, const Shape &out);
Tensor where(const Tensor &condition, const Tensor &a, const Tensor &b, const Shape &out);
Tensor unary(Unary op, const Tensor &x);
Tensor cast(const Tensor &x, bool toInteger, bool toBool);

Tensor matmul(const Tensor &a, const Tensor &b, const Shape &out);
Tensor gemm(const Tensor &a, const Tensor &b, const Tensor *c, bool transA, bool transB, float alpha, float beta,
            const Shape &out);
Tensor linear(const Tensor &x, const Tensor &w, const Tensor *bias, const Shape &out);
Tensor conv(const Tensor &x, const Tensor &w, const Tensor *bias, const Shape &strides, const Shape &pads,
            const Shape &dilations, int64_t group, const Shape &out);
std::vector<Tensor> convGrad(const Tensor &x, const Tensor &w, const Tensor &dy, const Shape &strides,
                             const Shape &pads, const Shape &dilations, int64_t group);
Tensor einsum(const std::string &equation, const std::vector<const Tensor *> &inputs, const Shape &out);

Tensor softmax(const Tensor &x, int64_t axis, bool log);
Tensor layerNorm(const Tensor &x, const Tensor *scale, const Tensor *bias, int64_t axis, float eps);
Tensor rmsNorm(const Tensor &x, const Tensor *scale, int64_t axis, float eps);
std::vector<Tensor> layerNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                  bool hasBias, size_t results);
std::vector<Tensor> rmsNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                size_t results);
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal);
std::vector<Tensor> attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                  const Tensor &dOut, float scale, bool causal);
Tensor crossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                    const std::string &reduction);
Tensor crossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                        std::optional<int64_t> ignoreIndex, const std::string &reduction);
Tensor geluGrad(const Tensor &x, const Tensor &dy, bool tanhApproximation);
Tensor siluGrad(const Tensor &x, const Tensor &dy);
std::vector<Tensor> dropout(const Tensor &x, float ratio);

Tensor reshape(const Tensor &x, const Shape &out);
Tensor transpose(const Tensor &x, const Shape &perm);
Tensor broadcast(const Tensor &x, const Shape &out);
Tensor slice(const Tensor &x, const Shape &starts, const Shape &steps, const Shape &out);
Tensor sliceGrad(const Tensor &dy, const Shape &starts, const Shape &steps, const Shape &inputShape);
Tensor concat(const std::vector<const Tensor *> &inputs, int64_t axis, const Shape &out);
std::vector<Tensor> split(const Tensor &x, int64_t axis, const std::vector<Shape> &outs);
Tensor gather(const Tensor &data, const Tensor &indices, int64_t axis, const Shape &out);
Tensor gatherGrad(const Tensor &indices, const Tensor &dy, int64_t axis, const Shape &dataShape);
Tensor reduce(ReduceKind kind, const Tensor &x, const Shape &axes, const Shape &out);
Tensor trilu(const Tensor &x, bool upper, int64_t k);

} // namespace colossal::rt::device

#endif // COLOSSAL_RUNTIME_DEVICETENSOR_H
