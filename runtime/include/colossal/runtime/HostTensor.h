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

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt::host {

using Shape = std::vector<int64_t>;

struct Tensor {
  Shape shape;
  /// Integer and boolean tensors hold `ints`; floating-point ones `floats`.
  bool integer = false;
  std::vector<float> floats;
  std::vector<int64_t> ints;

  static Tensor zeros(Shape shape, bool integer = false);
  static Tensor ofFloats(Shape shape, std::vector<float> values);
  static Tensor ofInts(Shape shape, std::vector<int64_t> values);
  int64_t elements() const;
};

std::string describe(const Shape &shape);

/// Fails naming `what` unless `t` has this shape and kind.
void expect(const Tensor &t, const Shape &shape, bool integer, const char *what);

enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min };
enum class Compare { Equal, Less, Greater };
enum class Unary { Sqrt, Reciprocal, Neg, Abs, Exp, Log, Erf, Tanh, Sigmoid, Relu, Sin, Cos, Silu, Gelu, GeluTanh };

/// Numpy-broadcast elementwise ops into `out` (the broadcast shape). An
/// integer result computes in int64 (division truncates); otherwise float.
Tensor binary(Binary op, const Tensor &a, const Tensor &b, const Shape &out, bool integerResult);
Tensor compare(Compare op, const Tensor &a, const Tensor &b, const Shape &out);
Tensor where(const Tensor &condition, const Tensor &a, const Tensor &b, const Shape &out);
Tensor unary(Unary op, const Tensor &x);
/// To float, to int64 (truncating) or to bool (nonzero).
Tensor cast(const Tensor &x, bool toInteger, bool toBool);

Tensor matmul(const Tensor &a, const Tensor &b, const Shape &out);
Tensor gemm(const Tensor &a, const Tensor &b, const Tensor *c, bool transA, bool transB, float alpha, float beta,
            const Shape &out);
/// x [..., k] times w [k, n] plus bias [n].
Tensor linear(const Tensor &x, const Tensor &w, const Tensor *bias, const Shape &out);
Tensor conv(const Tensor &x, const Tensor &w, const Tensor *bias, const Shape &strides, const Shape &pads,
            const Shape &dilations, int64_t group, const Shape &out);
/// {input gradient, weight gradient}.
std::vector<Tensor> convGrad(const Tensor &x, const Tensor &w, const Tensor &dy, const Shape &strides,
                             const Shape &pads, const Shape &dilations, int64_t group);
Tensor einsum(const std::string &equation, const std::vector<const Tensor *> &inputs, const Shape &out);

Tensor softmax(const Tensor &x, int64_t axis, bool log);
Tensor layerNorm(const Tensor &x, const Tensor *scale, const Tensor *bias, int64_t axis, float eps);
Tensor rmsNorm(const Tensor &x, const Tensor *scale, int64_t axis, float eps);
/// {dx, dscale (with a scale), dbias (with hasBias)}, `results` of them.
std::vector<Tensor> layerNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                  bool hasBias, size_t results);
std::vector<Tensor> rmsNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                size_t results);
/// q [..., sq, d], k [..., sk, d], v [..., sk, dv]; causal aligns the last
/// query with the last key; an optional mask (float: added to the scores;
/// integer: zero hides the key) broadcasts to [..., sq, sk].
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal);
/// {dq, dk, dv}.
std::vector<Tensor> attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                  const Tensor &dOut, float scale, bool causal);

/// Softmax cross-entropy of scores [N, C] against labels [N]; reduction
/// "mean" (over labels not ignored), "sum" or "none".
Tensor crossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                    const std::string &reduction);
Tensor crossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                        std::optional<int64_t> ignoreIndex, const std::string &reduction);

Tensor geluGrad(const Tensor &x, const Tensor &dy, bool tanhApproximation);
Tensor siluGrad(const Tensor &x, const Tensor &dy);
/// {output, keep mask}; the mask is the interpreter's (Philox, seed 0).
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
enum class ReduceKind { Sum, Mean, Max };
Tensor reduce(ReduceKind kind, const Tensor &x, const Shape &axes, const Shape &out);
Tensor trilu(const Tensor &x, bool upper, int64_t k);

} // namespace colossal::rt::host

#endif // COLOSSAL_RUNTIME_HOSTTENSOR_H
