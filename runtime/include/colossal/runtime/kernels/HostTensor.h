//===- HostTensor.h - the values and ops of emitted host programs -*- C++ -*-===//
//
// An emitted host program (`colossal-compile -o DIR --target cpu`) is one
// C++ statement per op of the training step, each a call into this file:
// tensors are row-major arrays with their shape, float32 for floating-point
// values and int64 for integers and booleans. The heavy ops go through the
// runtime's host kernels (`Kernels.h`), data movement through
// `TensorIndexing.h`: the same code the compiler's reference interpreter
// uses, so the program and the interpreter agree.
//
// Every op checks its operands' shapes and kinds and fails with the op's
// name; the emitted code also checks each result against the shape the
// compiler inferred.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_HOSTTENSOR_H
#define COLOSSAL_RUNTIME_HOSTTENSOR_H

#include "colossal/runtime/DType.h"
#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/kernels/AttentionDropout.h"
#include "colossal/runtime/kernels/Philox.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt::host {

using Shape = std::vector<int64_t>;

struct Tensor {
  Shape shape;
  /// Integer and boolean tensors hold `ints`; floating-point ones `floats`.
  /// Their data is charged to the memory scope it is allocated in
  /// (TrackedAllocator.h): the step's values are activations.
  bool integer = false;
  Floats floats;
  Ints ints;

  static Tensor zeros(Shape shape, bool integer = false);
  static Tensor ofFloats(Shape shape, Floats values);
  static Tensor ofInts(Shape shape, Ints values);
  /// From any other container of values (copied, charged where made).
  template <typename Values> static Tensor ofFloats(Shape shape, const Values &values) {
    return ofFloats(std::move(shape), Floats(values.begin(), values.end()));
  }
  template <typename Values> static Tensor ofInts(Shape shape, const Values &values) {
    return ofInts(std::move(shape), Ints(values.begin(), values.end()));
  }
  int64_t elements() const;
};

std::string describe(const Shape &shape);

enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min };
enum class Compare { Equal, Less, Greater };
enum class Unary { Sqrt, Reciprocal, Neg, Abs, Exp, Log, Erf, Tanh, Sigmoid, Relu, Sin, Cos, Silu, Gelu, GeluTanh };
enum class ReduceKind { Sum, Mean, Max };

#include "colossal/runtime/kernels/TensorOpSignatures.inc"

/// An op's several results, moved into the list (a braced list would copy
/// each tensor, holding every result twice for a moment).
template <typename... Tensors> std::vector<Tensor> results(Tensors &&...tensors) {
  std::vector<Tensor> list;
  list.reserve(sizeof...(tensors));
  (list.push_back(std::forward<Tensors>(tensors)), ...);
  return list;
}

} // namespace colossal::rt::host

#endif // COLOSSAL_RUNTIME_HOSTTENSOR_H
