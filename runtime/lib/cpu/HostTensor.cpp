//===- HostTensor.cpp - the ops of emitted host programs ------------------===//

#include "colossal/runtime/kernels/HostTensor.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/kernels/Philox.h"
#include "colossal/runtime/kernels/ReferenceAttention.h"
#include "colossal/runtime/kernels/TensorIndexing.h"
#include "colossal/runtime/kernels/TensorOpShapes.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace colossal::rt::host {

namespace ix = rt::indexing;

Tensor Tensor::zeros(Shape shape, bool integer) {
  Tensor t;
  t.shape = std::move(shape);
  t.integer = integer;
  if (integer)
    t.ints.assign(size_t(ix::product(t.shape)), 0);
  else
    t.floats.assign(size_t(ix::product(t.shape)), 0.0f);
  return t;
}

Tensor Tensor::ofFloats(Shape shape, Floats values) {
  if (int64_t(values.size()) != ix::product(shape))
    fail("constant", std::to_string(values.size()) + " values for shape " + describe(shape));
  Tensor t;
  t.shape = std::move(shape);
  t.floats = std::move(values);
  return t;
}

Tensor Tensor::ofInts(Shape shape, Ints values) {
  if (int64_t(values.size()) != ix::product(shape))
    fail("constant", std::to_string(values.size()) + " values for shape " + describe(shape));
  Tensor t;
  t.shape = std::move(shape);
  t.integer = true;
  t.ints = std::move(values);
  return t;
}


int64_t Tensor::elements() const { return ix::product(shape); }

std::string describe(const Shape &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

void expect(const Tensor &t, const Shape &shape, bool integer, const char *what) {
  if (t.shape != shape || t.integer != integer)
    fail(what, "produced " + std::string(t.integer ? "int64 " : "float ") + describe(t.shape) + ", the program expects " +
                   (integer ? "int64 " : "float ") + describe(shape));
}

namespace {

const Stream host{};

void requireFloat(const Tensor &t, const char *op) {
  if (t.integer)
    fail(op, "takes a floating-point operand, got int64 " + describe(t.shape));
}

void requireInteger(const Tensor &t, const char *op) {
  if (!t.integer)
    fail(op, "takes an integer operand, got float " + describe(t.shape));
}

void requireShape(const Tensor &t, const Shape &shape, const char *op) {
  if (t.shape != shape)
    fail(op, "takes an operand of shape " + describe(shape) + ", got " + describe(t.shape));
}

/// The operand's value at flat index i as a double, whatever its kind.
double valueAt(const Tensor &t, int64_t i) { return t.integer ? double(t.ints[size_t(i)]) : double(t.floats[size_t(i)]); }

/// Fails unless `in` broadcasts to `out` (numpy's rules, right-aligned).
void requireBroadcast(const Shape &out, const Shape &in, const char *op) {
  if (in.size() > out.size())
    fail(op, "cannot broadcast " + describe(in) + " to " + describe(out));
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t want = out[out.size() - in.size() + d];
    if (in[d] != 1 && in[d] != want)
      fail(op, "cannot broadcast " + describe(in) + " to " + describe(out));
  }
}

/// Walks the result of an elementwise op with its operands' broadcast
/// indices (checked), moving by strides: no index table.
template <size_t N, typename F>
void forEachElement(const Shape &out, const std::array<const Shape *, N> &ins, const char *op, F f) {
  for (const Shape *in : ins)
    requireBroadcast(out, *in, op);
  ix::forEachBroadcast<N>(out, ins, f);
}

/// C[i] = A[i] (m x k) * B[i] (k x n) through the host GEMM, for `batch`
/// products with operands at the given offsets.
void batchedGemm(const float *a, const int64_t *aOffsets, const float *b, const int64_t *bOffsets, size_t batch,
                 float *c, int64_t m, int64_t k, int64_t n, bool transA = false, bool transB = false) {
  GemmShape g;
  g.m = m, g.n = n, g.k = k, g.transA = transA, g.transB = transB;
  for (size_t i = 0; i < batch; ++i)
    cpu::gemm(host, g, DType::F32, a + aOffsets[i], b + bOffsets[i], c + int64_t(i) * m * n, 1.0f, 0.0f);
}

/// One product: both operands at offset 0.
void singleGemm(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n, bool transA = false,
                bool transB = false) {
  const int64_t origin = 0;
  batchedGemm(a, &origin, b, &origin, 1, c, m, k, n, transA, transB);
}

using shapes::axisOf;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

} // namespace

Tensor binary(Binary op, const Tensor &a, const Tensor &b, const Shape &out, bool integerResult) {
  Tensor result = Tensor::zeros(out, integerResult);
  // Most operands have the result's shape or are scalars: no index tables.
  if (!integerResult && !a.integer && !b.integer && (a.shape == out || a.elements() == 1) &&
      (b.shape == out || b.elements() == 1)) {
    const float *x = a.floats.data(), *y = b.floats.data();
    float *r = result.floats.data();
    int64_t n = result.elements(), sa = a.shape == out ? 1 : 0, sb = b.shape == out ? 1 : 0;
    switch (op) {
    case Binary::Add: for (int64_t i = 0; i < n; ++i) r[i] = x[i * sa] + y[i * sb]; return result;
    case Binary::Sub: for (int64_t i = 0; i < n; ++i) r[i] = x[i * sa] - y[i * sb]; return result;
    case Binary::Mul: for (int64_t i = 0; i < n; ++i) r[i] = x[i * sa] * y[i * sb]; return result;
    case Binary::Div: for (int64_t i = 0; i < n; ++i) r[i] = x[i * sa] / y[i * sb]; return result;
    default: break;
    }
  }
  if (integerResult) {
    if (!a.integer || !b.integer)
      fail("elementwise op", "an integer result needs integer operands");
    forEachElement<2>(out, {&a.shape, &b.shape}, "elementwise op", [&](int64_t i, const std::array<int64_t, 2> &at) {
      int64_t x = a.ints[size_t(at[0])], y = b.ints[size_t(at[1])], r = 0;
      switch (op) {
      case Binary::Add: r = x + y; break;
      case Binary::Sub: r = x - y; break;
      case Binary::Mul: r = x * y; break;
      case Binary::Div: r = y == 0 ? 0 : x / y; break;
      case Binary::Pow: r = int64_t(std::pow(double(x), double(y))); break;
      case Binary::Max: r = std::max(x, y); break;
      case Binary::Min: r = std::min(x, y); break;
      }
      result.ints[size_t(i)] = r;
    });
    return result;
  }
  forEachElement<2>(out, {&a.shape, &b.shape}, "elementwise op", [&](int64_t i, const std::array<int64_t, 2> &at) {
    float x = float(valueAt(a, at[0])), y = float(valueAt(b, at[1])), r = 0;
    switch (op) {
    case Binary::Add: r = x + y; break;
    case Binary::Sub: r = x - y; break;
    case Binary::Mul: r = x * y; break;
    case Binary::Div: r = x / y; break;
    case Binary::Pow: r = std::pow(x, y); break;
    case Binary::Max: r = std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); break;
    case Binary::Min: r = std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); break;
    }
    result.floats[size_t(i)] = r;
  });
  return result;
}

Tensor compare(Compare op, const Tensor &a, const Tensor &b, const Shape &out) {
  Tensor result = Tensor::zeros(out, true);
  forEachElement<2>(out, {&a.shape, &b.shape}, "comparison", [&](int64_t i, const std::array<int64_t, 2> &at) {
    double x = valueAt(a, at[0]), y = valueAt(b, at[1]);
    result.ints[size_t(i)] = op == Compare::Equal ? x == y : op == Compare::Less ? x < y : x > y;
  });
  return result;
}

Tensor where(const Tensor &condition, const Tensor &a, const Tensor &b, const Shape &out) {
  requireInteger(condition, "where");
  if (a.integer != b.integer)
    fail("where", "both branches must be of one kind");
  Tensor result = Tensor::zeros(out, a.integer);
  forEachElement<3>(out, {&condition.shape, &a.shape, &b.shape}, "where",
                    [&](int64_t i, const std::array<int64_t, 3> &at) {
                      bool take = condition.ints[size_t(at[0])] != 0;
                      if (a.integer)
                        result.ints[size_t(i)] = take ? a.ints[size_t(at[1])] : b.ints[size_t(at[2])];
                      else
                        result.floats[size_t(i)] = take ? a.floats[size_t(at[1])] : b.floats[size_t(at[2])];
                    });
  return result;
}

Tensor unary(Unary op, const Tensor &x) {
  requireFloat(x, "unary op");
  Tensor out = Tensor::zeros(x.shape);
  int64_t n = x.elements();
  const float *in = x.floats.data();
  float *y = out.floats.data();
  switch (op) {
  case Unary::Silu: cpu::siluForward(host, in, y, n); return out;
  case Unary::Gelu: cpu::geluForward(host, in, y, n, GeluApproximation::None); return out;
  case Unary::GeluTanh: cpu::geluForward(host, in, y, n, GeluApproximation::Tanh); return out;
  default: break;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v = in[i];
    switch (op) {
    case Unary::Sqrt: v = std::sqrt(v); break;
    case Unary::Reciprocal: v = 1.0f / v; break;
    case Unary::Neg: v = -v; break;
    case Unary::Abs: v = std::fabs(v); break;
    case Unary::Exp: v = std::exp(v); break;
    case Unary::Log: v = std::log(v); break;
    case Unary::Erf: v = std::erf(v); break;
    case Unary::Tanh: v = std::tanh(v); break;
    case Unary::Sigmoid: v = sigmoid(v); break;
    case Unary::Relu: v = v > 0 ? v : 0.0f; break;
    case Unary::Sin: v = std::sin(v); break;
    case Unary::Cos: v = std::cos(v); break;
    default: break;
    }
    y[i] = v;
  }
  return out;
}

Tensor cast(const Tensor &x, bool toInteger, bool toBool) {
  Tensor out = Tensor::zeros(x.shape, toInteger || toBool);
  for (int64_t i = 0; i < x.elements(); ++i) {
    double v = valueAt(x, i);
    if (toBool)
      out.ints[size_t(i)] = v != 0;
    else if (toInteger)
      out.ints[size_t(i)] = std::isnan(v) || std::fabs(v) >= 9.2e18 ? 0 : int64_t(v);
    else
      out.floats[size_t(i)] = float(v);
  }
  return out;
}

int64_t storageBytes(const Tensor &t) {
  return int64_t(t.floats.size() * sizeof(float) + t.ints.size() * sizeof(int64_t));
}

void release(Tensor &t) { t = Tensor(); }

Tensor roundTo(const Tensor &x, DType storage) { return roundTo(Tensor(x), storage); }

Tensor roundTo(Tensor &&x, DType storage) {
  requireFloat(x, "roundTo");
  if (storage != DType::BF16 && storage != DType::F16)
    fail("roundTo", std::string("rounds to bf16 or f16, not ") + nameOf(storage));
  Tensor out = std::move(x);
  for (float &v : out.floats)
    v = storage == DType::BF16 ? bf16ToFloat(floatToBf16(v)) : f16ToFloat(floatToF16(v));
  return out;
}

Tensor matmul(const Tensor &a, const Tensor &b, const Shape &out) {
  requireFloat(a, "matmul");
  requireFloat(b, "matmul");
  shapes::MatmulDims d = shapes::matmulDims(a.shape, b.shape);
  TrackedVector<int64_t> ia = ix::broadcastIndex(d.batch, d.aBatch), ib = ix::broadcastIndex(d.batch, d.bBatch);
  for (int64_t &x : ia)
    x *= d.m * d.k;
  for (int64_t &x : ib)
    x *= d.k * d.n;
  Tensor result = Tensor::zeros(out);
  if (result.elements() != ix::product(d.batch) * d.m * d.n)
    fail("matmul", "the product of " + describe(a.shape) + " and " + describe(b.shape) + " is not " + describe(out));
  batchedGemm(a.floats.data(), ia.data(), b.floats.data(), ib.data(), ia.size(), result.floats.data(), d.m, d.k,
              d.n);
  return result;
}

Tensor gemm(const Tensor &a, const Tensor &b, const Tensor *c, bool transA, bool transB, float alpha, float beta,
            const Shape &out) {
  requireFloat(a, "gemm");
  requireFloat(b, "gemm");
  Tensor result = Tensor::zeros(out);
  int64_t m = out[0], n = out[1], k = transA ? a.shape[0] : a.shape[1];
  singleGemm(a.floats.data(), b.floats.data(), result.floats.data(), m, k, n, transA, transB);
  if (!c) {
    for (float &x : result.floats)
      x *= alpha;
    return result;
  }
  forEachElement<1>(out, {&c->shape}, "gemm", [&](int64_t i, const std::array<int64_t, 1> &at) {
    result.floats[size_t(i)] = alpha * result.floats[size_t(i)] + beta * c->floats[size_t(at[0])];
  });
  return result;
}

Tensor linear(const Tensor &x, const Tensor &w, const Tensor *bias, const Shape &out, bool transposedWeight) {
  requireFloat(x, "linear");
  requireFloat(w, "linear");
  if (w.shape.size() != 2)
    fail("linear", "the weight " + describe(w.shape) + " is not a matrix");
  int64_t k = x.shape.back(), n = w.shape[transposedWeight ? 0 : 1], rows = x.elements() / std::max<int64_t>(1, k);
  if (w.shape[transposedWeight ? 1 : 0] != k)
    fail("linear", "cannot multiply " + describe(x.shape) + " by " + describe(w.shape) +
                       (transposedWeight ? " transposed" : ""));
  Tensor result = Tensor::zeros(out);
  singleGemm(x.floats.data(), w.floats.data(), result.floats.data(), rows, k, n, false, transposedWeight);
  if (bias) {
    requireShape(*bias, {n}, "linear bias");
    cpu::addRowBias(host, result.floats.data(), bias->floats.data(), result.floats.data(), rows, n);
  }
  return result;
}

Tensor conv(const Tensor &x, const Tensor &w, const Tensor *bias, const Shape &strides, const Shape &pads,
            const Shape &dilations, int64_t group, const Shape &out) {
  requireFloat(x, "conv");
  requireFloat(w, "conv");
  Tensor result = Tensor::zeros(out);
  int64_t M = w.shape[0], positions = ix::product(out, 2);
  TrackedVector<double> acc = scratch<double>(result.floats.size());
  for (size_t i = 0; i < acc.size(); ++i)
    acc[i] = bias ? bias->floats[size_t((int64_t(i) / positions) % M)] : 0.0;
  ix::forEachConvTap(x.shape, w.shape, out, strides, pads, dilations, group, [&](size_t xi, size_t wi, size_t yi) {
    acc[yi] += double(x.floats[xi]) * w.floats[wi];
  });
  std::copy(acc.begin(), acc.end(), result.floats.begin());
  return result;
}

std::vector<Tensor> convGrad(const Tensor &x, const Tensor &w, const Tensor &dy, const Shape &strides,
                             const Shape &pads, const Shape &dilations, int64_t group) {
  TrackedVector<double> dx = scratch<double>(size_t(x.elements())), dw = scratch<double>(size_t(w.elements()));
  ix::forEachConvTap(x.shape, w.shape, dy.shape, strides, pads, dilations, group, [&](size_t xi, size_t wi, size_t yi) {
    dx[xi] += double(w.floats[wi]) * dy.floats[yi];
    dw[wi] += double(x.floats[xi]) * dy.floats[yi];
  });
  return results(Tensor::ofFloats(x.shape, Floats(dx.begin(), dx.end())),
                 Tensor::ofFloats(w.shape, Floats(dw.begin(), dw.end())));
}

Tensor einsum(const std::string &equation, const std::vector<const Tensor *> &inputs, const Shape &out) {
  std::vector<const float *> data;
  std::vector<Shape> shapes;
  for (const Tensor *t : inputs) {
    requireFloat(*t, "einsum");
    data.push_back(t->floats.data());
    shapes.push_back(t->shape);
  }
  Tensor result = Tensor::zeros(out);
  ix::einsum(equation, data, shapes, out, result.floats.data());
  return result;
}

Tensor softmax(const Tensor &x, int64_t axis, bool log) {
  requireFloat(x, "softmax");
  axis = axisOf(axis, x.shape, "softmax");
  int64_t outer = ix::product(x.shape, 0, size_t(axis)), n = x.shape[size_t(axis)],
          inner = ix::product(x.shape, size_t(axis) + 1);
  Tensor out = Tensor::zeros(x.shape);
  if (!log && inner == 1) {
    cpu::softmaxForward(host, x.floats.data(), out.floats.data(), outer, n);
    return out;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return size_t((o * n + j) * inner + i); };
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j)
        max = std::max(max, x.floats[at(j)]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(double(x.floats[at(j)]) - max);
      for (int64_t j = 0; j < n; ++j) {
        double v = double(x.floats[at(j)]) - max;
        out.floats[at(j)] = float(log ? v - std::log(sum) : std::exp(v) / sum);
      }
    }
  return out;
}

namespace {

shapes::NormRows normalizedRows(const Tensor &x, int64_t axis, const Tensor *scale, const char *op) {
  requireFloat(x, op);
  return shapes::normRows(x.shape, axis, scale ? std::optional<int64_t>(scale->elements()) : std::nullopt, op);
}

const float *dataOrNull(const Tensor *t) { return t ? t->floats.data() : nullptr; }

} // namespace

Tensor layerNorm(const Tensor &x, const Tensor *scale, const Tensor *bias, int64_t axis, float eps) {
  shapes::NormRows r = normalizedRows(x, axis, scale, "layer_norm");
  Tensor out = Tensor::zeros(x.shape);
  Floats mean = scratch<float>(size_t(r.rows)), rstd = scratch<float>(size_t(r.rows));
  cpu::layerNormForward(host, x.floats.data(), dataOrNull(scale), dataOrNull(bias), out.floats.data(), mean.data(),
                        rstd.data(), r.rows, r.cols, eps);
  return out;
}

Tensor rmsNorm(const Tensor &x, const Tensor *scale, int64_t axis, float eps) {
  shapes::NormRows r = normalizedRows(x, axis, scale, "rms_norm");
  Tensor out = Tensor::zeros(x.shape);
  Floats rstd = scratch<float>(size_t(r.rows));
  cpu::rmsNormForward(host, x.floats.data(), dataOrNull(scale), out.floats.data(), rstd.data(), r.rows, r.cols, eps);
  return out;
}

std::vector<Tensor> layerNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                  bool hasBias, size_t results) {
  shapes::NormRows r = normalizedRows(x, axis, scale, "layer_norm_grad");
  requireShape(dy, x.shape, "layer_norm_grad");
  // The forward pass again for the row statistics (its output unused).
  Floats mean = scratch<float>(size_t(r.rows)), rstd = scratch<float>(size_t(r.rows)),
         y = scratch<float>(x.floats.size());
  Tensor dx = Tensor::zeros(x.shape), dscale = Tensor::zeros({r.cols}), dbias = Tensor::zeros({r.cols});
  cpu::layerNormForward(host, x.floats.data(), dataOrNull(scale), nullptr, y.data(), mean.data(), rstd.data(), r.rows,
                        r.cols, eps);
  cpu::layerNormBackward(host, dy.floats.data(), x.floats.data(), dataOrNull(scale), mean.data(), rstd.data(),
                         dx.floats.data(), scale ? dscale.floats.data() : nullptr,
                         hasBias ? dbias.floats.data() : nullptr, r.rows, r.cols);
  std::vector<Tensor> out = host::results(std::move(dx), std::move(dscale), std::move(dbias));
  out.resize(std::min<size_t>(results, 3));
  if (scale && out.size() > 1)
    out[1].shape = scale->shape;
  if (scale && out.size() > 2)
    out[2].shape = scale->shape;
  return out;
}

std::vector<Tensor> rmsNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                size_t results) {
  shapes::NormRows r = normalizedRows(x, axis, scale, "rms_norm_grad");
  requireShape(dy, x.shape, "rms_norm_grad");
  Floats rstd = scratch<float>(size_t(r.rows)), y = scratch<float>(x.floats.size());
  Tensor dx = Tensor::zeros(x.shape), dscale = Tensor::zeros(scale ? scale->shape : Shape{r.cols});
  cpu::rmsNormForward(host, x.floats.data(), dataOrNull(scale), y.data(), rstd.data(), r.rows, r.cols, eps);
  cpu::rmsNormBackward(host, dy.floats.data(), x.floats.data(), dataOrNull(scale), rstd.data(), dx.floats.data(),
                       scale ? dscale.floats.data() : nullptr, r.rows, r.cols);
  std::vector<Tensor> out = host::results(std::move(dx), std::move(dscale));
  out.resize(std::min<size_t>(results, 2));
  return out;
}

namespace {

struct AttentionOperands {
  ReferenceAttentionShape shape;
  /// The fused kernels take this case: no mask, equal key and value widths.
  bool fused = false;
  /// The mask's values (as floats) and where each score finds its own.
  MaskLayout maskLayout;
  Floats maskValues = scratch<float>(0);
  bool booleanMask = false, masked = false;
  Shape outShape;

  AttentionMask<float> mask() const {
    return masked ? AttentionMask<float>{maskValues.data(), &maskLayout, booleanMask} : AttentionMask<float>{};
  }

  AttentionShape kernelShape() const {
    AttentionShape s;
    s.batchHeads = shape.batch, s.queries = shape.queries, s.keys = shape.keys, s.headDim = shape.headDim;
    s.groups = shape.groups, s.scale = float(shape.scale), s.causal = shape.causal, s.dropout = shape.dropout;
    // The kernel's causal rule (key j visible to query i when j <= i) is the
    // op's (j <= i + sk - sq) with the queries' offset sk - sq.
    s.queryOffset = shape.keys - shape.queries;
    return s;
  }
};

AttentionOperands attentionOperands(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale,
                                    bool causal, const AttentionDropout &dropout) {
  requireFloat(q, "attention");
  requireFloat(k, "attention");
  requireFloat(v, "attention");
  shapes::AttentionDims d = shapes::attentionDims(q.shape, k.shape, v.shape);
  AttentionOperands a;
  a.shape.batch = d.batch, a.shape.queries = d.queries, a.shape.keys = d.keys;
  a.shape.headDim = d.headDim, a.shape.valueDim = d.valueDim, a.shape.groups = d.groups, a.outShape = d.output;
  a.shape.scale = scale, a.shape.causal = causal, a.shape.dropout = dropout;
  a.fused = !mask && a.shape.headDim == a.shape.valueDim;
  if (mask) {
    requireBroadcast(d.scores, mask->shape, "attention mask");
    a.maskLayout = maskLayout(d.scores, mask->shape);
    if (mask->integer)
      a.maskValues.assign(mask->ints.begin(), mask->ints.end());
    else
      a.maskValues.assign(mask->floats.begin(), mask->floats.end());
    a.booleanMask = mask->integer, a.masked = true;
  }
  return a;
}

} // namespace

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal,
                 const AttentionDropout &dropout) {
  AttentionOperands a = attentionOperands(q, k, v, mask, scale, causal, dropout);
  Tensor out = Tensor::zeros(a.outShape);
  if (!a.fused) {
    referenceAttentionForward(a.shape, q.floats.data(), k.floats.data(), v.floats.data(), a.mask(), out.floats.data());
    return out;
  }
  Floats lse = scratch<float>(size_t(a.shape.batch * a.shape.queries));
  cpu::attentionForward(host, a.kernelShape(), q.floats.data(), k.floats.data(), v.floats.data(), out.floats.data(),
                        lse.data());
  return out;
}

std::vector<Tensor> attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                  const Tensor &dOut, float scale, bool causal, const AttentionDropout &dropout) {
  AttentionOperands a = attentionOperands(q, k, v, mask, scale, causal, dropout);
  requireShape(dOut, a.outShape, "attention_grad");
  Tensor dq = Tensor::zeros(q.shape), dk = Tensor::zeros(k.shape), dv = Tensor::zeros(v.shape);
  if (!a.fused) {
    referenceAttentionBackward(a.shape, q.floats.data(), k.floats.data(), v.floats.data(), a.mask(), dOut.floats.data(),
                               dq.floats.data(), dk.floats.data(), dv.floats.data());
    return results(std::move(dq), std::move(dk), std::move(dv));
  }
  // The forward pass again: its output and log-sum-exp, which the backward reads.
  Floats o = scratch<float>(dOut.floats.size()), lse = scratch<float>(size_t(a.shape.batch * a.shape.queries));
  AttentionShape s = a.kernelShape();
  cpu::attentionForward(host, s, q.floats.data(), k.floats.data(), v.floats.data(), o.data(), lse.data());
  cpu::attentionBackward(host, s, q.floats.data(), k.floats.data(), v.floats.data(), o.data(), dOut.floats.data(),
                         lse.data(), dq.floats.data(), dk.floats.data(), dv.floats.data());
  return results(std::move(dq), std::move(dk), std::move(dv));
}

namespace {

struct LossRows {
  int64_t rows, classes, ignore, counted;
  Floats loss = scratch<float>(0), lse = scratch<float>(0);
};

LossRows crossEntropyRows(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                          const char *op) {
  requireFloat(scores, op);
  shapes::requireLossOperands(scores.shape, labels.shape, labels.integer, op);
  LossRows r;
  r.rows = scores.shape[0], r.classes = scores.shape[1];
  r.ignore = ignoreIndex.value_or(std::numeric_limits<int64_t>::min());
  r.counted = shapes::countedLabels(labels.ints.data(), r.rows, r.classes, r.ignore, op);
  r.loss.resize(size_t(r.rows)), r.lse.resize(size_t(r.rows));
  cpu::crossEntropyForward(host, scores.floats.data(), labels.ints.data(), r.loss.data(), r.lse.data(), r.rows,
                           r.classes, r.ignore);
  return r;
}

} // namespace

Tensor crossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                    const std::string &reduction) {
  LossRows r = crossEntropyRows(scores, labels, ignoreIndex, "cross_entropy");
  if (reduction == "none")
    return Tensor::ofFloats({r.rows}, r.loss);
  return Tensor::ofFloats({}, {float(shapes::reduceRowLosses(r.loss, r.counted, reduction))});
}

Tensor crossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                        std::optional<int64_t> ignoreIndex, const std::string &reduction) {
  LossRows r = crossEntropyRows(scores, labels, ignoreIndex, "cross_entropy_grad");
  requireFloat(dloss, "cross_entropy_grad");
  Floats perRow = shapes::rowGradientScales(dloss.floats, r.rows, r.counted, reduction);
  Tensor out = Tensor::zeros(scores.shape);
  cpu::crossEntropyBackward(host, scores.floats.data(), labels.ints.data(), r.lse.data(), perRow.data(),
                            out.floats.data(), r.rows, r.classes, r.ignore);
  return out;
}

namespace {

/// The counted terms of a negative log-likelihood: for each label position,
/// the flat index of its log-probability and its weight (0 when ignored).
struct NllTerms {
  std::vector<int64_t> at;
  std::vector<double> weight;
  double weightSum = 0;
};

NllTerms nllTerms(const Shape &logProbs, const Tensor &labels, const Tensor *weights,
                  std::optional<int64_t> ignoreIndex, const char *op) {
  Shape labelShape = logProbs;
  if (labelShape.size() >= 2)
    labelShape.erase(labelShape.begin() + 1);
  if (logProbs.size() < 2 || !labels.integer || labels.shape != labelShape)
    fail(op, "takes log-probabilities [N, C, d...] and integer labels [N, d...], got " + describe(logProbs) + " and " +
                 describe(labels.shape));
  int64_t classes = logProbs[1], inner = ix::product(Shape(logProbs.begin() + 2, logProbs.end()));
  if (weights) {
    requireFloat(*weights, op);
    requireShape(*weights, {classes}, op);
  }
  NllTerms t;
  t.at.resize(labels.ints.size()), t.weight.assign(labels.ints.size(), 0.0);
  for (size_t p = 0; p < labels.ints.size(); ++p) {
    int64_t label = labels.ints[p], n = int64_t(p) / inner, i = int64_t(p) % inner;
    if (ignoreIndex && label == *ignoreIndex)
      continue;
    if (label < 0 || label >= classes)
      fail(op, "label position " + std::to_string(p) + " has label " + std::to_string(label) + ", outside " +
                   std::to_string(classes) + " classes");
    t.at[p] = (n * classes + label) * inner + i;
    t.weight[p] = weights ? double(weights->floats[size_t(label)]) : 1.0;
    t.weightSum += t.weight[p];
  }
  return t;
}

/// What "mean" divides by; an empty mean is 0, as for the cross-entropy.
double meanDivisor(const NllTerms &t) { return t.weightSum != 0 ? t.weightSum : 1.0; }

} // namespace

Tensor nllLoss(const Tensor &logProbs, const Tensor &labels, const Tensor *weights, std::optional<int64_t> ignoreIndex,
               const std::string &reduction) {
  requireFloat(logProbs, "nll_loss");
  NllTerms t = nllTerms(logProbs.shape, labels, weights, ignoreIndex, "nll_loss");
  Tensor perLabel = Tensor::zeros(labels.shape);
  double total = 0;
  for (size_t p = 0; p < t.at.size(); ++p)
    if (t.weight[p] != 0) {
      double term = -t.weight[p] * double(logProbs.floats[size_t(t.at[p])]);
      perLabel.floats[p] = float(term);
      total += term;
    }
  if (reduction == "none")
    return perLabel;
  return Tensor::ofFloats({}, {float(reduction == "mean" ? total / meanDivisor(t) : total)});
}

Tensor nllLossGrad(const Shape &logProbs, const Tensor &labels, const Tensor *weights, const Tensor &dloss,
                   std::optional<int64_t> ignoreIndex, const std::string &reduction) {
  requireFloat(dloss, "nll_loss_grad");
  NllTerms t = nllTerms(logProbs, labels, weights, ignoreIndex, "nll_loss_grad");
  requireShape(dloss, reduction == "none" ? labels.shape : Shape{}, "nll_loss_grad");
  Tensor out = Tensor::zeros(logProbs);
  double divisor = reduction == "mean" ? meanDivisor(t) : 1.0;
  for (size_t p = 0; p < t.at.size(); ++p)
    if (t.weight[p] != 0) {
      double dy = reduction == "none" ? dloss.floats[p] : dloss.floats[0];
      out.floats[size_t(t.at[p])] = float(-t.weight[p] * dy / divisor);
    }
  return out;
}

Tensor geluGrad(const Tensor &x, const Tensor &dy, bool tanhApproximation) {
  requireFloat(x, "gelu_grad");
  requireShape(dy, x.shape, "gelu_grad");
  Tensor out = Tensor::zeros(x.shape);
  cpu::geluBackward(host, x.floats.data(), dy.floats.data(), out.floats.data(), x.elements(),
                    tanhApproximation ? GeluApproximation::Tanh : GeluApproximation::None);
  return out;
}

Tensor siluGrad(const Tensor &x, const Tensor &dy) {
  requireFloat(x, "silu_grad");
  requireShape(dy, x.shape, "silu_grad");
  Tensor out = Tensor::zeros(x.shape);
  cpu::siluBackward(host, x.floats.data(), dy.floats.data(), out.floats.data(), x.elements());
  return out;
}

std::vector<Tensor> dropout(const Tensor &x, float ratio, const DropoutKey &key) {
  requireFloat(x, "dropout");
  Tensor out = Tensor::zeros(x.shape), mask = Tensor::zeros(x.shape, true);
  if (ratio == 0) { // inference-style dropout layers: keep everything
    out.floats = x.floats;
    std::fill(mask.ints.begin(), mask.ints.end(), 1);
    return results(std::move(out), std::move(mask));
  }
  for (int64_t i = 0; i < x.elements(); ++i) {
    bool keep = dropoutKeeps(key.seed, key.step, key.firstIndex + uint64_t(i), ratio);
    mask.ints[size_t(i)] = keep;
    out.floats[size_t(i)] = keep ? float(double(x.floats[size_t(i)]) / (1.0 - double(ratio))) : 0.0f;
  }
  return results(std::move(out), std::move(mask));
}

Tensor reshape(const Tensor &x, const Shape &out) {
  if (ix::product(out) != x.elements())
    fail("reshape", "cannot reshape " + describe(x.shape) + " into " + describe(out));
  Tensor result = x;
  result.shape = out;
  return result;
}

Tensor reshape(Tensor &&x, const Shape &out) {
  if (ix::product(out) != x.elements())
    fail("reshape", "cannot reshape " + describe(x.shape) + " into " + describe(out));
  Tensor result = std::move(x);
  result.shape = out;
  return result;
}

namespace {

/// Runs f on the tensor's data, whichever kind it holds.
template <typename F>
void withData(const Tensor &in, Tensor &out, F f) {
  if (in.integer)
    f(in.ints.data(), out.ints.data());
  else
    f(in.floats.data(), out.floats.data());
}

} // namespace

Tensor transpose(const Tensor &x, const Shape &perm) {
  if (perm.size() != x.shape.size())
    fail("transpose", "a permutation of " + std::to_string(perm.size()) + " for a tensor of rank " +
                          std::to_string(x.shape.size()));
  Shape out(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    out[d] = x.shape[size_t(perm[d])];
  Tensor result = Tensor::zeros(out, x.integer);
  withData(x, result, [&](const auto *in, auto *o) { ix::transpose(in, x.shape, perm, o); });
  return result;
}

Tensor broadcast(const Tensor &x, const Shape &out) {
  requireBroadcast(out, x.shape, "broadcast");
  Tensor result = Tensor::zeros(out, x.integer);
  withData(x, result, [&](const auto *in, auto *o) { ix::broadcastTo(in, x.shape, out, o); });
  return result;
}

Tensor slice(const Tensor &x, const Shape &starts, const Shape &steps, const Shape &out) {
  shapes::requireSliceInside(x.shape, out, starts, steps, "slice");
  Tensor result = Tensor::zeros(out, x.integer);
  withData(x, result, [&](const auto *in, auto *o) { ix::slice(in, x.shape, starts, steps, out, o); });
  return result;
}

Tensor sliceGrad(const Tensor &dy, const Shape &starts, const Shape &steps, const Shape &inputShape) {
  requireFloat(dy, "slice_grad");
  Tensor result = Tensor::zeros(inputShape);
  ix::sliceGrad(dy.floats.data(), dy.shape, starts, steps, inputShape, result.floats.data());
  return result;
}

Tensor concat(const std::vector<const Tensor *> &inputs, int64_t axis, const Shape &out) {
  axis = axisOf(axis, out, "concat");
  Tensor result = Tensor::zeros(out, !inputs.empty() && inputs[0]->integer);
  int64_t offset = 0;
  for (const Tensor *in : inputs) {
    if (in->integer != result.integer)
      fail("concat", "operands of different kinds");
    if (result.integer)
      ix::insertAlongAxis(in->ints.data(), in->shape, result.ints.data(), out, axis, offset);
    else
      ix::insertAlongAxis(in->floats.data(), in->shape, result.floats.data(), out, axis, offset);
    offset += in->shape[size_t(axis)];
  }
  if (offset != out[size_t(axis)])
    fail("concat", "operands cover " + std::to_string(offset) + " of " + std::to_string(out[size_t(axis)]));
  return result;
}

std::vector<Tensor> split(const Tensor &x, int64_t axis, const std::vector<Shape> &outs) {
  axis = axisOf(axis, x.shape, "split");
  std::vector<Tensor> results;
  int64_t offset = 0;
  for (const Shape &shape : outs) {
    if (offset + shape[size_t(axis)] > x.shape[size_t(axis)])
      fail("split", "parts larger than " + describe(x.shape));
    Tensor part = Tensor::zeros(shape, x.integer);
    if (x.integer)
      ix::extractAlongAxis(x.ints.data(), x.shape, part.ints.data(), shape, axis, offset);
    else
      ix::extractAlongAxis(x.floats.data(), x.shape, part.floats.data(), shape, axis, offset);
    offset += shape[size_t(axis)];
    results.push_back(std::move(part));
  }
  return results;
}

Tensor gather(const Tensor &data, const Tensor &indices, int64_t axis, const Shape &out) {
  requireInteger(indices, "gather");
  axis = axisOf(axis, data.shape, "gather");
  Tensor result = Tensor::zeros(out, data.integer);
  if (result.elements() != ix::product(data.shape) / data.shape[size_t(axis)] * indices.elements())
    fail("gather", "cannot take " + describe(indices.shape) + " from " + describe(data.shape) + " into " +
                       describe(out));
  withData(data, result, [&](const auto *in, auto *o) {
    ix::gather(in, data.shape, indices.ints.data(), indices.elements(), axis, o);
  });
  return result;
}

Tensor gatherGrad(const Tensor &indices, const Tensor &dy, int64_t axis, const Shape &dataShape) {
  requireInteger(indices, "gather_grad");
  requireFloat(dy, "gather_grad");
  axis = axisOf(axis, dataShape, "gather_grad");
  Tensor result = Tensor::zeros(dataShape);
  ix::gatherGrad(indices.ints.data(), indices.elements(), dy.floats.data(), dataShape, axis, result.floats.data());
  return result;
}

Tensor reduce(ReduceKind kind, const Tensor &x, const Shape &axes, const Shape &out) {
  requireFloat(x, "reduce");
  for (int64_t a : axes)
    axisOf(a, x.shape, "reduce");
  Tensor result = Tensor::zeros(out);
  ix::Reduction k = kind == ReduceKind::Sum ? ix::Reduction::Sum
                    : kind == ReduceKind::Mean ? ix::Reduction::Mean
                                               : ix::Reduction::Max;
  ix::reduce(x.floats.data(), x.shape, axes, k, result.floats.data());
  return result;
}

Tensor trilu(const Tensor &x, bool upper, int64_t k) {
  if (x.shape.size() < 2)
    fail("trilu", "takes a tensor of rank 2 or more, got " + describe(x.shape));
  Tensor result = Tensor::zeros(x.shape, x.integer);
  withData(x, result, [&](const auto *in, auto *o) { ix::trilu(in, x.shape, upper, k, o); });
  return result;
}

} // namespace colossal::rt::host
