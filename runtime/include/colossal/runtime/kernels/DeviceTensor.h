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

#include "colossal/runtime/kernels/HostTensor.h"

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
  static Tensor ofFloats(Shape shape, const Floats &values);
  static Tensor ofInts(Shape shape, const Ints &values);
  /// From any other container of values (staged through the host).
  template <typename Values> static Tensor ofFloats(Shape shape, const Values &values) {
    return ofFloats(std::move(shape), Floats(values.begin(), values.end()));
  }
  template <typename Values> static Tensor ofInts(Shape shape, const Values &values) {
    return ofInts(std::move(shape), Ints(values.begin(), values.end()));
  }
  int64_t elements() const;
  float *floats() const { return static_cast<float *>(data.get()); }
  int64_t *ints() const { return static_cast<int64_t *>(data.get()); }
};

Tensor upload(const host::Tensor &t);
host::Tensor download(const Tensor &t);

#include "colossal/runtime/kernels/TensorOpSignatures.inc"

} // namespace colossal::rt::device

#endif // COLOSSAL_RUNTIME_DEVICETENSOR_H
