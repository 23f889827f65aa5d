//===- HostTensor.h - small constant tensors evaluated at import -*- C++ -*-===//
//
// PyTorch exports shape arithmetic as ONNX ops (Shape, Gather, Unsqueeze,
// Concat, Range, ...). With every input shape bound, these chains are
// constants: the importer evaluates them here, on the host, so that Reshape,
// Expand and Slice get static arguments and the IR holds no shape ops.
// Values are kept as int64 for integer and boolean types (exact for the
// INT64_MAX that Slice uses for "to the end") and as double for floats.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_IMPORT_HOSTTENSOR_H
#define COLOSSAL_IMPORT_HOSTTENSOR_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace colossal::import {

/// ONNX TensorProto element types used here (values from onnx.proto).
enum class ElementKind : int32_t {
  Float = 1, UInt8 = 2, Int8 = 3, UInt16 = 4, Int16 = 5, Int32 = 6, Int64 = 7,
  Bool = 9, Float16 = 10, Double = 11, UInt32 = 12, UInt64 = 13, BFloat16 = 16,
};

bool isFloatKind(ElementKind kind);
const char *elementKindName(ElementKind kind);

/// No tensor may hold more elements than this (2^48, far beyond any real
/// model's); larger shapes in a file are refused rather than overflowing.
constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

/// a * b for non-negative sizes, saturating at INT64_MAX instead of
/// overflowing (hostile files declare absurd shapes).
int64_t saturatingMul(int64_t a, int64_t b);

/// Constants larger than this are not folded (they become IR constants or
/// parameters); it bounds the importer's memory on hostile input.
constexpr int64_t kMaxFoldedElements = 1 << 20;

struct HostTensor {
  std::vector<int64_t> shape;
  ElementKind kind = ElementKind::Int64;
  std::vector<int64_t> ints;    // integer and bool kinds
  std::vector<double> floats;   // float kinds

  bool isFloat() const { return isFloatKind(kind); }
  int64_t numElements() const;
  double asDouble(int64_t i) const { return isFloat() ? floats[i] : double(ints[i]); }
  /// Element i as an integer; floats truncate toward zero and saturate (a
  /// hostile file can hold 1e30 where an index is expected).
  int64_t asInt(int64_t i) const;

  static HostTensor ofInts(std::vector<int64_t> shape, std::vector<int64_t> values,
                           ElementKind kind = ElementKind::Int64);
  static HostTensor ofFloats(std::vector<int64_t> shape, std::vector<double> values,
                             ElementKind kind = ElementKind::Float);
  /// Every element equal to element 0 of `scalar`, in `shape`.
  static HostTensor splat(const HostTensor &scalar, std::vector<int64_t> shape);
};

/// The result of folding, or the reason it cannot fold.
template <typename T> struct Folded {
  std::optional<T> value;
  std::string error;
  static Folded fail(std::string why) { return {std::nullopt, std::move(why)}; }
};

int64_t numElementsOf(const std::vector<int64_t> &shape);

/// Numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcastShape(const std::vector<int64_t> &a,
                                                   const std::vector<int64_t> &b);

enum class BinaryFn { Add, Sub, Mul, Div, Pow, Max, Min, Equal, Less, Greater, And, Or };
Folded<HostTensor> foldBinary(BinaryFn fn, const HostTensor &a, const HostTensor &b);

enum class UnaryFn { Neg, Abs, Sqrt, Reciprocal, Exp, Log, Sin, Cos, Tanh, Sigmoid, Relu, Erf, Not };
HostTensor foldUnary(UnaryFn fn, const HostTensor &x);

HostTensor foldCast(const HostTensor &x, ElementKind to);
Folded<HostTensor> foldWhere(const HostTensor &cond, const HostTensor &a, const HostTensor &b);
Folded<HostTensor> foldGather(const HostTensor &data, const HostTensor &indices, int64_t axis);
Folded<HostTensor> foldConcat(const std::vector<const HostTensor *> &inputs, int64_t axis);
HostTensor foldReshape(const HostTensor &x, std::vector<int64_t> shape);
HostTensor foldBroadcast(const HostTensor &x, const std::vector<int64_t> &shape);
HostTensor foldTranspose(const HostTensor &x, const std::vector<int64_t> &perm);
/// Per-dimension normalised slice (as train.slice's attributes).
HostTensor foldSlice(const HostTensor &x, const std::vector<int64_t> &starts,
                     const std::vector<int64_t> &limits, const std::vector<int64_t> &steps);
HostTensor foldTrilu(const HostTensor &x, bool upper, int64_t k);
Folded<HostTensor> foldRange(const HostTensor &start, const HostTensor &limit,
                             const HostTensor &delta);

} // namespace colossal::import

#endif // COLOSSAL_IMPORT_HOSTTENSOR_H
