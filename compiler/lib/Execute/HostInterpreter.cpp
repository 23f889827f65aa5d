//===- HostInterpreter.cpp - the reference executor of the train dialect --===//

#include "colossal/Execute/HostInterpreter.h"

#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/runtime/DType.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/train/OptimizerStep.h"
#include "colossal/runtime/kernels/Philox.h"
#include "colossal/runtime/kernels/ReferenceAttention.h"
#include "colossal/runtime/kernels/TensorIndexing.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

namespace colossal::execute {

using namespace mlir;
namespace rt = colossal::rt;

int64_t HostValue::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {

/// An op the interpreter cannot evaluate, or bad input; caught per op.
struct Unsupported {
  std::string reason;
};

using rt::indexing::broadcastIndex;
using rt::indexing::nextCoordinate;
using rt::indexing::normalizeAxis;
using rt::indexing::product;
using rt::indexing::stridesOf;

/// The broadcast table (TensorIndexing.h) as a plain vector: the
/// interpreter does not account its memory.
std::vector<int64_t> broadcastTable(const std::vector<int64_t> &out, const std::vector<int64_t> &in) {
  auto table = rt::indexing::broadcastIndex(out, in);
  return std::vector<int64_t>(table.begin(), table.end());
}

bool isF32(Type t) { return t.isF32(); }

/// Rounds a value to what the element type can hold.
double representable(double v, Type t) {
  if (t.isF64())
    return v;
  if (t.isF32())
    return double(float(v));
  if (t.isF16())
    return rt::f16ToFloat(rt::floatToF16(float(v)));
  if (t.isBF16())
    return rt::bf16ToFloat(rt::floatToBf16(float(v)));
  if (auto integer = dyn_cast<IntegerType>(t)) {
    if (integer.getWidth() == 1)
      return v != 0 ? 1.0 : 0.0;
    if (std::isnan(v))
      return 0;
    double truncated = std::trunc(v);
    if (integer.isUnsigned() || integer.isUnsignedInteger()) {
      double range = std::ldexp(1.0, int(integer.getWidth()));
      truncated = std::fmod(truncated, range);
      return truncated < 0 ? truncated + range : truncated;
    }
    return truncated;
  }
  return v;
}

HostValue makeValue(Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  HostValue v;
  v.shape.assign(type.getShape().begin(), type.getShape().end());
  v.elementType = type.getElementType();
  v.data.assign(size_t(v.elements()), 0.0);
  return v;
}

void finish(HostValue &v) {
  for (double &x : v.data)
    x = representable(x, v.elementType);
}

/// Integer operands (indices) held as doubles, as int64; values no int64
/// holds become the largest one, which every range check refuses.
std::vector<int64_t> toIndices(const HostValue &v) {
  std::vector<int64_t> out;
  out.reserve(v.data.size());
  for (double x : v.data)
    out.push_back(std::fabs(x) < 9.2e18 ? int64_t(x) : std::numeric_limits<int64_t>::max());
  return out;
}

HostValue fromAttribute(ElementsAttr attr) {
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    throw Unsupported{"a constant that is not a dense elements attribute"};
  auto type = cast<ShapedType>(dense.getType());
  HostValue v;
  v.shape.assign(type.getShape().begin(), type.getShape().end());
  v.elementType = type.getElementType();
  if (isa<FloatType>(v.elementType)) {
    for (const APFloat &x : dense.getValues<APFloat>())
      v.data.push_back(x.convertToDouble());
  } else if (auto integer = dyn_cast<IntegerType>(v.elementType)) {
    for (const APInt &x : dense.getValues<APInt>())
      v.data.push_back(integer.getWidth() == 1 || integer.isUnsigned() ? double(x.getZExtValue())
                                                                       : double(x.getSExtValue()));
  } else {
    throw Unsupported{"a constant of an unsupported element type"};
  }
  if (dense.isSplat())
    v.data.assign(size_t(v.elements()), v.data.front());
  return v;
}

std::vector<float> toFloat(const HostValue &v) { return std::vector<float>(v.data.begin(), v.data.end()); }


//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

HostValue binary(Operation *op, const HostValue &a, const HostValue &b, double (*f)(double, double, bool)) {
  HostValue out = makeValue(op->getResult(0));
  std::vector<int64_t> ia = broadcastTable(out.shape, a.shape), ib = broadcastTable(out.shape, b.shape);
  bool integer = isa<IntegerType>(a.elementType);
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] = f(a.data[size_t(ia[i])], b.data[size_t(ib[i])], integer);
  finish(out);
  return out;
}

HostValue unary(Operation *op, const HostValue &x, double (*f)(double)) {
  HostValue out = makeValue(op->getResult(0));
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] = f(x.data[i]);
  finish(out);
  return out;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// C[b] = A[b] (m x k) * B[b] (k x n), with per-batch offsets; f32 through
/// the runtime's GEMM, other types in float64.
void batchedMatmul(const HostValue &a, const std::vector<int64_t> &aOffsets, const HostValue &b,
                   const std::vector<int64_t> &bOffsets, HostValue &c, int64_t m, int64_t k, int64_t n,
                   bool transA = false, bool transB = false) {
  size_t batches = aOffsets.size();
  if (isF32(c.elementType)) {
    std::vector<float> fa = toFloat(a), fb = toFloat(b), fc(size_t(m * n));
    for (size_t i = 0; i < batches; ++i) {
      rt::GemmShape g;
      g.m = m, g.n = n, g.k = k, g.transA = transA, g.transB = transB;
      rt::cpu::gemm(rt::Stream{}, g, rt::DType::F32, fa.data() + aOffsets[i], fb.data() + bOffsets[i], fc.data(),
                    1.0f, 0.0f);
      std::copy(fc.begin(), fc.end(), c.data.begin() + long(i) * m * n);
    }
    return;
  }
  for (size_t i = 0; i < batches; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          double av = a.data[size_t(aOffsets[i] + (transA ? p * m + r : r * k + p))];
          double bv = b.data[size_t(bOffsets[i] + (transB ? col * k + p : p * n + col))];
          sum += av * bv;
        }
        c.data[size_t(int64_t(i) * m * n + r * n + col)] = sum;
      }
}

HostValue matmul(Operation *op, HostValue a, HostValue b) {
  HostValue out = makeValue(op->getResult(0));
  bool vectorA = a.shape.size() == 1, vectorB = b.shape.size() == 1;
  if (vectorA)
    a.shape.insert(a.shape.begin(), 1);
  if (vectorB)
    b.shape.push_back(1);
  int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  std::vector<int64_t> aBatch(a.shape.begin(), a.shape.end() - 2), bBatch(b.shape.begin(), b.shape.end() - 2);
  size_t rank = std::max(aBatch.size(), bBatch.size());
  std::vector<int64_t> batch(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t x = d + aBatch.size() >= rank ? aBatch[d + aBatch.size() - rank] : 1;
    int64_t y = d + bBatch.size() >= rank ? bBatch[d + bBatch.size() - rank] : 1;
    batch[d] = std::max(x, y);
  }
  std::vector<int64_t> ia = broadcastTable(batch, aBatch), ib = broadcastTable(batch, bBatch);
  for (int64_t &x : ia)
    x *= m * k;
  for (int64_t &x : ib)
    x *= k * n;
  HostValue c = out;
  c.data.assign(size_t(product(batch) * m * n), 0.0);
  batchedMatmul(a, ia, b, ib, c, m, k, n);
  out.data = std::move(c.data);
  finish(out);
  return out;
}

HostValue gemm(train::GemmOp op, const HostValue &a, const HostValue &b, const HostValue *c) {
  HostValue out = makeValue(op.getResult());
  bool ta = op.getTransA(), tb = op.getTransB();
  int64_t m = out.shape[0], n = out.shape[1], k = ta ? a.shape[0] : a.shape[1];
  batchedMatmul(a, {0}, b, {0}, out, m, k, n, ta, tb);
  double alpha = op.getAlpha().convertToDouble(), beta = op.getBeta().convertToDouble();
  std::vector<int64_t> ic = c ? broadcastTable(out.shape, c->shape) : std::vector<int64_t>{};
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] = alpha * out.data[i] + (c ? beta * c->data[size_t(ic[i])] : 0.0);
  finish(out);
  return out;
}

HostValue linear(train::LinearOp op, const HostValue &x, const HostValue &w, const HostValue *bias) {
  HostValue out = makeValue(op.getResult());
  bool transposed = op.getTransposeWeight();
  int64_t k = x.shape.back(), n = transposed ? w.shape.front() : w.shape.back(),
          rows = x.elements() / std::max<int64_t>(1, k);
  batchedMatmul(x, {0}, w, {0}, out, rows, k, n, false, transposed);
  if (bias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < n; ++c)
        out.data[size_t(r * n + c)] += bias->data[size_t(c)];
  finish(out);
  return out;
}

HostValue conv(train::ConvOp op, const HostValue &x, const HostValue &w, const HostValue *bias) {
  HostValue out = makeValue(op.getResult());
  int64_t M = w.shape[0], positions = product(out.shape, 2);
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] = bias ? bias->data[size_t((int64_t(i) / positions) % M)] : 0.0;
  rt::indexing::forEachConvTap(x.shape, w.shape, out.shape, op.getStrides(), op.getPads(), op.getDilations(),
                               int64_t(op.getGroup()),
                 [&](size_t xi, size_t wi, size_t yi) { out.data[yi] += x.data[xi] * w.data[wi]; });
  finish(out);
  return out;
}

HostValue einsum(train::EinsumOp op, const std::vector<HostValue> &inputs) {
  HostValue out = makeValue(op.getResult());
  std::vector<const double *> data;
  std::vector<std::vector<int64_t>> shapes;
  for (const HostValue &in : inputs) {
    data.push_back(in.data.data());
    shapes.push_back(in.shape);
  }
  rt::indexing::einsum(op.getEquation().str(), data, shapes, out.shape, out.data.data());
  finish(out);
  return out;
}

//===----------------------------------------------------------------------===//
// Normalisation and attention
//===----------------------------------------------------------------------===//

HostValue softmax(Operation *op, const HostValue &x, int64_t axis, bool log) {
  HostValue out = makeValue(op->getResult(0));
  axis = normalizeAxis(axis, x.shape.size());
  int64_t outer = product(x.shape, 0, size_t(axis)), n = x.shape[size_t(axis)],
          inner = product(x.shape, size_t(axis) + 1);
  if (!log && isF32(x.elementType) && inner == 1) {
    std::vector<float> in = toFloat(x), y(in.size());
    rt::cpu::softmaxForward(rt::Stream{}, in.data(), y.data(), outer, n);
    out.data.assign(y.begin(), y.end());
    finish(out);
    return out;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < n; ++j)
        max = std::max(max, x.data[size_t((o * n + j) * inner + i)]);
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(x.data[size_t((o * n + j) * inner + i)] - max);
      for (int64_t j = 0; j < n; ++j) {
        double v = x.data[size_t((o * n + j) * inner + i)] - max;
        out.data[size_t((o * n + j) * inner + i)] = log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  finish(out);
  return out;
}

HostValue normalize(Operation *op, const HostValue &x, const HostValue *scale, const HostValue *bias, int64_t axis,
                    double eps, bool rms) {
  HostValue out = makeValue(op->getResult(0));
  axis = normalizeAxis(axis, x.shape.size());
  int64_t rows = product(x.shape, 0, size_t(axis)), cols = product(x.shape, size_t(axis));
  if (isF32(x.elementType)) {
    std::vector<float> in = toFloat(x), y(in.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    std::vector<float> gamma = scale ? toFloat(*scale) : std::vector<float>{},
                       beta = bias ? toFloat(*bias) : std::vector<float>{};
    if (rms)
      rt::cpu::rmsNormForward(rt::Stream{}, in.data(), scale ? gamma.data() : nullptr, y.data(), rstd.data(), rows,
                              cols, float(eps));
    else
      rt::cpu::layerNormForward(rt::Stream{}, in.data(), scale ? gamma.data() : nullptr, bias ? beta.data() : nullptr,
                                y.data(), mean.data(), rstd.data(), rows, cols, float(eps));
    out.data.assign(y.begin(), y.end());
    finish(out);
    return out;
  }
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x.data[size_t(r * cols + c)] / double(cols);
    if (rms)
      mean = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double d = x.data[size_t(r * cols + c)] - mean;
      var += d * d / double(cols);
    }
    double inverse = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c)
      out.data[size_t(r * cols + c)] = (x.data[size_t(r * cols + c)] - mean) * inverse *
                                           (scale ? scale->data[size_t(c)] : 1.0) +
                                       (bias ? bias->data[size_t(c)] : 0.0);
  }
  finish(out);
  return out;
}

/// Query heads per key/value head (grouped-query attention; 1 otherwise).
int64_t headGroups(const HostValue &q, const HostValue &k) {
  size_t rank = q.shape.size();
  return rank >= 3 ? q.shape[rank - 3] / k.shape[rank - 3] : 1;
}

/// The dropout masks of attention's probabilities: a train.dropout's over
/// them (site `site`, step 0, block 0 under run seed 0, as the dropout op's).
rt::AttentionDropout attentionDropout(double ratio, int64_t site, const HostValue &q, const HostValue &k) {
  if (ratio == 0)
    return {};
  size_t rank = q.shape.size();
  int64_t scores = product(q.shape, 0, rank - 1) * k.shape[rank - 2];
  return rt::attentionDropout(float(ratio), rt::dropoutKeyFor(0, 0, 0, site, scores),
                              rank >= 3 ? q.shape[rank - 3] : 1);
}

/// Where the mask's value for every attention score [batch..., sq, sk] is
/// (empty without a mask).
rt::MaskLayout scoreLayout(const HostValue &q, const HostValue &k, const HostValue *mask) {
  if (!mask)
    return {};
  std::vector<int64_t> scoreShape(q.shape.begin(), q.shape.end() - 2);
  scoreShape.push_back(q.shape[q.shape.size() - 2]);
  scoreShape.push_back(k.shape[k.shape.size() - 2]);
  return rt::maskLayout(scoreShape, mask->shape);
}

rt::AttentionMask<double> maskOf(const HostValue *mask, const rt::MaskLayout &layout) {
  if (!mask)
    return {};
  return {mask->data.data(), &layout, isa<IntegerType>(mask->elementType)};
}

HostValue attention(train::AttentionOp op, const HostValue &q, const HostValue &k, const HostValue &v,
                    const HostValue *mask) {
  HostValue out = makeValue(op.getResult());
  size_t rank = q.shape.size();
  int64_t sq = q.shape[rank - 2], d = q.shape[rank - 1], sk = k.shape[rank - 2], dv = v.shape[rank - 1];
  int64_t batch = product(q.shape, 0, rank - 2);
  double scale = op.getScale().convertToDouble();
  rt::AttentionDropout dropout =
      attentionDropout(op.getDropout().convertToDouble(), int64_t(op.getDropoutSite()), q, k);
  bool causal = op.getCausal();
  if (!mask && d == dv && isF32(q.elementType)) {
    rt::AttentionShape s;
    s.dropout = dropout;
    s.batchHeads = batch, s.queries = sq, s.keys = sk, s.headDim = d, s.groups = headGroups(q, k);
    s.scale = float(scale), s.causal = causal;
    // The kernel's causal rule (key j visible to query i when j <= i) is the
    // op's (j <= i + sk - sq) with the queries' offset sk - sq.
    s.queryOffset = sk - sq;
    std::vector<float> fq = toFloat(q), fk = toFloat(k), fv = toFloat(v), o(out.data.size()),
                       lse(size_t(batch * sq));
    rt::cpu::attentionForward(rt::Stream{}, s, fq.data(), fk.data(), fv.data(), o.data(), lse.data());
    out.data.assign(o.begin(), o.end());
    finish(out);
    return out;
  }
  rt::MaskLayout layout = scoreLayout(q, k, mask);
  rt::ReferenceAttentionShape shape{batch, sq, sk, d, dv, scale, causal, dropout, headGroups(q, k)};
  rt::referenceAttentionForward(shape, q.data.data(), k.data.data(), v.data.data(), maskOf(mask, layout),
                                out.data.data());
  finish(out);
  return out;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Calls f(n, i, label) for each label of labels [N, d...] (i over the
/// trailing positions, `inner` of them) that is not `ignore`, each checked
/// to be one of the C classes.
template <typename F>
void forEachCountedLabel(const HostValue &labels, int64_t N, int64_t inner, int64_t C, std::optional<int64_t> ignore,
                         F f) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t label = int64_t(labels.data[size_t(n * inner + i)]);
      if (ignore && label == *ignore)
        continue;
      if (label < 0 || label >= C)
        throw Unsupported{"label " + std::to_string(label) + " outside " + std::to_string(C) + " classes"};
      f(n, i, label);
    }
}

/// -logp[n, label, ...] over scores laid out [N, C, d...] (class axis 1),
/// reduced as ONNX SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss.
HostValue classLoss(Operation *op, const HostValue &scores, const HostValue &labels, const HostValue *weights,
                    StringRef reduction, std::optional<int64_t> ignore, bool applySoftmax) {
  HostValue out = makeValue(op->getResult(0));
  int64_t N = scores.shape[0], C = scores.shape[1], inner = product(scores.shape, 2);
  std::vector<double> losses(size_t(N * inner), 0.0);
  double weightSum = 0;
  bool kernel = applySoftmax && !weights && inner == 1 && isF32(scores.elementType);
  std::vector<float> kernelLoss;
  if (kernel) {
    std::vector<float> logits = toFloat(scores), lse(static_cast<size_t>(N));
    std::vector<int64_t> ids(labels.data.begin(), labels.data.end());
    kernelLoss.resize(static_cast<size_t>(N));
    rt::cpu::crossEntropyForward(rt::Stream{}, logits.data(), ids.data(), kernelLoss.data(), lse.data(), N, C,
                                 ignore.value_or(std::numeric_limits<int64_t>::min()));
  }
  forEachCountedLabel(labels, N, inner, C, ignore, [&](int64_t n, int64_t i, int64_t label) {
    double w = weights ? weights->data[size_t(label)] : 1.0;
    double logp;
    if (kernel) {
      logp = -double(kernelLoss[size_t(n)]);
    } else if (applySoftmax) {
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t c = 0; c < C; ++c)
        max = std::max(max, scores.data[size_t((n * C + c) * inner + i)]);
      for (int64_t c = 0; c < C; ++c)
        sum += std::exp(scores.data[size_t((n * C + c) * inner + i)] - max);
      logp = scores.data[size_t((n * C + label) * inner + i)] - max - std::log(sum);
    } else {
      logp = scores.data[size_t((n * C + label) * inner + i)];
    }
    losses[size_t(n * inner + i)] = -logp * w;
    weightSum += w;
  });
  if (reduction == "none") {
    out.data = losses;
  } else {
    double total = std::accumulate(losses.begin(), losses.end(), 0.0);
    out.data.assign(1, reduction == "sum" ? total : (weightSum > 0 ? total / weightSum : 0.0));
  }
  finish(out);
  return out;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

HostValue transpose(train::TransposeOp op, const HostValue &x) {
  HostValue out = makeValue(op.getResult());
  rt::indexing::transpose(x.data.data(), x.shape, std::vector<int64_t>(op.getPerm()), out.data.data());
  return out;
}

HostValue gather(train::GatherOp op, const HostValue &data, const HostValue &indices) {
  HostValue out = makeValue(op.getResult());
  int64_t axis = normalizeAxis(int64_t(op.getAxis()), data.shape.size());
  rt::indexing::gather(data.data.data(), data.shape, toIndices(indices).data(), indices.elements(), axis,
                       out.data.data());
  return out;
}

HostValue slice(train::SliceOp op, const HostValue &x) {
  HostValue out = makeValue(op.getResult());
  rt::indexing::slice(x.data.data(), x.shape, std::vector<int64_t>(op.getStarts()), std::vector<int64_t>(op.getSteps()),
                      out.shape, out.data.data());
  return out;
}

HostValue concat(train::ConcatOp op, const std::vector<HostValue> &inputs) {
  HostValue out = makeValue(op.getResult());
  int64_t axis = normalizeAxis(int64_t(op.getAxis()), out.shape.size()), offset = 0;
  for (const HostValue &in : inputs) {
    rt::indexing::insertAlongAxis(in.data.data(), in.shape, out.data.data(), out.shape, axis, offset);
    offset += in.shape[size_t(axis)];
  }
  return out;
}

std::vector<HostValue> split(train::SplitOp op, const HostValue &x) {
  int64_t axis = normalizeAxis(int64_t(op.getAxis()), x.shape.size()), offset = 0;
  std::vector<HostValue> outs;
  for (Value result : op->getResults()) {
    HostValue out = makeValue(result);
    rt::indexing::extractAlongAxis(x.data.data(), x.shape, out.data.data(), out.shape, axis, offset);
    offset += out.shape[size_t(axis)];
    outs.push_back(std::move(out));
  }
  return outs;
}

HostValue reduce(Operation *op, const HostValue &x, ArrayRef<int64_t> axes, rt::indexing::Reduction kind) {
  HostValue out = makeValue(op->getResult(0));
  rt::indexing::reduce(x.data.data(), x.shape, std::vector<int64_t>(axes), kind, out.data.data());
  finish(out);
  return out;
}

HostValue trilu(train::TriluOp op, const HostValue &x) {
  HostValue out = makeValue(op.getResult());
  rt::indexing::trilu(x.data.data(), x.shape, op.getUpper(), int64_t(op.getK()), out.data.data());
  return out;
}


//===----------------------------------------------------------------------===//
// Gradients (the ops train-autodiff emits)
//===----------------------------------------------------------------------===//

double geluDerivative(double x, bool tanhApprox) {
  if (tanhApprox) {
    double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

std::vector<HostValue> normGrad(Operation *op, const HostValue &x, const HostValue *scale, const HostValue &dy,
                                int64_t axis, double eps, bool rms, bool hasBias) {
  axis = normalizeAxis(axis, x.shape.size());
  int64_t rows = product(x.shape, 0, size_t(axis)), cols = product(x.shape, size_t(axis));
  std::vector<HostValue> outs;
  for (Value r : op->getResults())
    outs.push_back(makeValue(r));
  HostValue &dx = outs[0];
  std::vector<double> dgamma(size_t(cols), 0.0), dbeta(size_t(cols), 0.0);
  if (isF32(x.elementType)) {
    std::vector<float> fx = toFloat(x), fdy = toFloat(dy), fdx(fx.size()), mean(static_cast<size_t>(rows)),
                       rstd(static_cast<size_t>(rows)), y(fx.size()), dg(static_cast<size_t>(cols)),
                       db(static_cast<size_t>(cols));
    std::vector<float> gamma = scale ? toFloat(*scale) : std::vector<float>{};
    if (rms) {
      rt::cpu::rmsNormForward(rt::Stream{}, fx.data(), scale ? gamma.data() : nullptr, y.data(), rstd.data(), rows,
                              cols, float(eps));
      rt::cpu::rmsNormBackward(rt::Stream{}, fdy.data(), fx.data(), scale ? gamma.data() : nullptr, rstd.data(),
                               fdx.data(), scale ? dg.data() : nullptr, rows, cols);
    } else {
      rt::cpu::layerNormForward(rt::Stream{}, fx.data(), scale ? gamma.data() : nullptr, nullptr, y.data(),
                                mean.data(), rstd.data(), rows, cols, float(eps));
      rt::cpu::layerNormBackward(rt::Stream{}, fdy.data(), fx.data(), scale ? gamma.data() : nullptr, mean.data(),
                                 rstd.data(), fdx.data(), scale ? dg.data() : nullptr, hasBias ? db.data() : nullptr,
                                 rows, cols);
    }
    dx.data.assign(fdx.begin(), fdx.end());
    dgamma.assign(dg.begin(), dg.end());
    dbeta.assign(db.begin(), db.end());
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c)
        mean += x.data[size_t(r * cols + c)] / double(cols);
      if (rms)
        mean = 0;
      for (int64_t c = 0; c < cols; ++c) {
        double d = x.data[size_t(r * cols + c)] - mean;
        var += d * d / double(cols);
      }
      double inverse = 1.0 / std::sqrt(var + eps), sumG = 0, sumGX = 0;
      for (int64_t c = 0; c < cols; ++c) {
        double g = dy.data[size_t(r * cols + c)] * (scale ? scale->data[size_t(c)] : 1.0);
        double xhat = (x.data[size_t(r * cols + c)] - mean) * inverse;
        sumG += g, sumGX += g * xhat;
        dgamma[size_t(c)] += dy.data[size_t(r * cols + c)] * xhat;
        dbeta[size_t(c)] += dy.data[size_t(r * cols + c)];
      }
      for (int64_t c = 0; c < cols; ++c) {
        double g = dy.data[size_t(r * cols + c)] * (scale ? scale->data[size_t(c)] : 1.0);
        double xhat = (x.data[size_t(r * cols + c)] - mean) * inverse;
        dx.data[size_t(r * cols + c)] =
            inverse * (g - (rms ? 0.0 : sumG / double(cols)) - xhat * sumGX / double(cols));
      }
    }
  }
  finish(dx);
  if (outs.size() > 1) {
    outs[1].data = dgamma;
    finish(outs[1]);
  }
  if (outs.size() > 2) {
    outs[2].data = dbeta;
    finish(outs[2]);
  }
  return outs;
}

std::vector<HostValue> attentionGrad(train::AttentionGradOp op, const HostValue &q, const HostValue &k,
                                     const HostValue &v, const HostValue *mask, const HostValue &dO) {
  HostValue dq = makeValue(op.getQueryGrad()), dk = makeValue(op.getKeyGrad()), dv = makeValue(op.getValueGrad());
  size_t rank = q.shape.size();
  int64_t sq = q.shape[rank - 2], d = q.shape[rank - 1], sk = k.shape[rank - 2], dvd = v.shape[rank - 1];
  int64_t batch = product(q.shape, 0, rank - 2);
  double scale = op.getScale().convertToDouble();
  rt::AttentionDropout dropout =
      attentionDropout(op.getDropout().convertToDouble(), int64_t(op.getDropoutSite()), q, k);
  bool causal = op.getCausal();
  if (!mask && d == dvd && isF32(q.elementType)) {
    rt::AttentionShape s;
    s.dropout = dropout;
    s.batchHeads = batch, s.queries = sq, s.keys = sk, s.headDim = d, s.groups = headGroups(q, k);
    s.scale = float(scale), s.causal = causal;
    s.queryOffset = sk - sq;
    std::vector<float> fq = toFloat(q), fk = toFloat(k), fv = toFloat(v), fdo = toFloat(dO), o(fq.size()),
                       lse(static_cast<size_t>(batch * sq)), gq(fq.size()), gk(fk.size()), gv(fv.size());
    rt::cpu::attentionForward(rt::Stream{}, s, fq.data(), fk.data(), fv.data(), o.data(), lse.data());
    rt::cpu::attentionBackward(rt::Stream{}, s, fq.data(), fk.data(), fv.data(), o.data(), fdo.data(), lse.data(),
                               gq.data(), gk.data(), gv.data());
    dq.data.assign(gq.begin(), gq.end());
    dk.data.assign(gk.begin(), gk.end());
    dv.data.assign(gv.begin(), gv.end());
    finish(dq), finish(dk), finish(dv);
    return {dq, dk, dv};
  }
  rt::MaskLayout layout = scoreLayout(q, k, mask);
  rt::ReferenceAttentionShape shape{batch, sq, sk, d, dvd, scale, causal, dropout, headGroups(q, k)};
  rt::referenceAttentionBackward(shape, q.data.data(), k.data.data(), v.data.data(), maskOf(mask, layout),
                                 dO.data.data(), dq.data.data(), dk.data.data(), dv.data.data());
  finish(dq), finish(dk), finish(dv);
  return {dq, dk, dv};
}

HostValue crossEntropyGrad(train::CrossEntropyGradOp op, const HostValue &scores, const HostValue &labels,
                           const HostValue &dloss) {
  HostValue out = makeValue(op.getLogitsGrad());
  int64_t N = scores.shape[0], C = scores.shape[1], inner = product(scores.shape, 2);
  std::optional<int64_t> ignore;
  if (auto i = op.getIgnoreIndex())
    ignore = int64_t(*i);
  StringRef reduction = op.getReduction();
  int64_t counted = 0;
  for (int64_t n = 0; n < N * inner; ++n)
    counted += !(ignore && int64_t(labels.data[size_t(n)]) == *ignore);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t label = int64_t(labels.data[size_t(n * inner + i)]);
      if (ignore && label == *ignore)
        continue;
      double scale = reduction == "none" ? dloss.data[size_t(n * inner + i)] : dloss.data[0];
      if (reduction == "mean")
        scale /= double(std::max<int64_t>(1, counted));
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t c = 0; c < C; ++c)
        max = std::max(max, scores.data[size_t((n * C + c) * inner + i)]);
      for (int64_t c = 0; c < C; ++c)
        sum += std::exp(scores.data[size_t((n * C + c) * inner + i)] - max);
      for (int64_t c = 0; c < C; ++c) {
        double pc = std::exp(scores.data[size_t((n * C + c) * inner + i)] - max) / sum;
        out.data[size_t((n * C + c) * inner + i)] = (pc - (c == label ? 1.0 : 0.0)) * scale;
      }
    }
  finish(out);
  return out;
}

HostValue nllLossGrad(train::NllLossGradOp op, const HostValue &labels, const HostValue *weights,
                      const HostValue &dloss) {
  HostValue out = makeValue(op.getLogProbsGrad());
  std::fill(out.data.begin(), out.data.end(), 0.0);
  int64_t N = out.shape[0], C = out.shape[1], inner = product(out.shape, 2);
  std::optional<int64_t> ignore;
  if (auto i = op.getIgnoreIndex())
    ignore = int64_t(*i);
  StringRef reduction = op.getReduction();
  auto weightOf = [&](int64_t label) { return weights ? weights->data[size_t(label)] : 1.0; };
  double weightSum = 0;
  forEachCountedLabel(labels, N, inner, C, ignore,
                      [&](int64_t, int64_t, int64_t label) { weightSum += weightOf(label); });
  forEachCountedLabel(labels, N, inner, C, ignore, [&](int64_t n, int64_t i, int64_t label) {
    double scale = reduction == "none" ? dloss.data[size_t(n * inner + i)] : dloss.data[0];
    if (reduction == "mean" && weightSum != 0)
      scale /= weightSum;
    out.data[size_t((n * C + label) * inner + i)] = -weightOf(label) * scale;
  });
  finish(out);
  return out;
}

HostValue gatherGrad(train::GatherGradOp op, const HostValue &indices, const HostValue &dy) {
  HostValue out = makeValue(op.getDataGrad());
  int64_t axis = normalizeAxis(int64_t(op.getAxis()), out.shape.size());
  rt::indexing::gatherGrad(toIndices(indices).data(), indices.elements(), dy.data.data(), out.shape, axis,
                           out.data.data());
  finish(out);
  return out;
}

HostValue sliceGrad(train::SliceGradOp op, const HostValue &dy) {
  HostValue out = makeValue(op.getInputGrad());
  rt::indexing::sliceGrad(dy.data.data(), dy.shape, std::vector<int64_t>(op.getStarts()),
                          std::vector<int64_t>(op.getSteps()), out.shape, out.data.data());
  return out;
}


std::vector<HostValue> convGrad(train::ConvGradOp op, const HostValue &x, const HostValue &w, const HostValue &dy) {
  HostValue dx = makeValue(op.getInputGrad()), dw = makeValue(op.getWeightGrad());
  rt::indexing::forEachConvTap(x.shape, w.shape, dy.shape, op.getStrides(), op.getPads(), op.getDilations(),
                               int64_t(op.getGroup()),
                 [&](size_t xi, size_t wi, size_t yi) {
                   dx.data[xi] += w.data[wi] * dy.data[yi];
                   dw.data[wi] += x.data[xi] * dy.data[yi];
                 });
  finish(dx), finish(dw);
  return {dx, dw};
}

//===----------------------------------------------------------------------===//
// The optimizer
//===----------------------------------------------------------------------===//

/// One train.optimizer_update through the runtime's fused host optimizer
/// (what emitted programs run), on float32 copies of the operands.
std::vector<HostValue> optimizerUpdate(train::OptimizerUpdateOp op, const std::vector<const HostValue *> &in) {
  rt::OptimizerConfig config;
  std::optional<rt::OptimizerKind> kind = rt::parseOptimizer(op.getKind().str());
  if (!kind)
    throw Unsupported{"unknown optimizer " + op.getKind().str()};
  config.kind = *kind;
  config.beta1 = op.getBeta1().convertToDouble(), config.beta2 = op.getBeta2().convertToDouble();
  config.eps = op.getEps().convertToDouble(), config.weightDecay = op.getWeightDecay().convertToDouble();
  config.momentum = op.getMomentum().convertToDouble(), config.nesterov = op.getNesterov();
  config.eta = op.getEta().convertToDouble();
  double lr = in[0]->data[0];
  int64_t step = int64_t(in[1]->data[0]);
  float gradScale = float(in[2]->data[0]);
  size_t n = op.getParams().size();
  bool second = !op.getMoment2().empty();
  // Operands: lr, step, grad_scale, then params, grads, moment1, moment2.
  auto operand = [&](size_t group, size_t i) { return in[3 + group * n + i]; };
  std::vector<std::vector<float>> w(n), g(n), m(n), v(n), scratch(n);
  std::vector<rt::OptimizerTensor> tensors;
  for (size_t i = 0; i < n; ++i) {
    w[i] = toFloat(*operand(0, i)), g[i] = toFloat(*operand(1, i)), m[i] = toFloat(*operand(2, i));
    v[i] = second ? toFloat(*operand(3, i)) : std::vector<float>(w[i].size(), 0.0f);
    scratch[i].assign(w[i].size(), 0.0f);
    rt::OptimizerTensor t{w[i].data(), g[i].data(), m[i].data(), v[i].data(), scratch[i].data(), int64_t(w[i].size())};
    rt::applyConventions({op.getDecay()[i], op.getTrustRatio()[i]}, t);
    tensors.push_back(t);
  }
  rt::optimizerStep(config, lr, step, tensors, gradScale);
  std::vector<HostValue> results;
  auto add = [&](const std::vector<float> &values) {
    HostValue out = makeValue(op->getResult(unsigned(results.size())));
    out.data.assign(values.begin(), values.end());
    results.push_back(std::move(out));
  };
  for (auto *list : {&w, &m})
    for (const std::vector<float> &values : *list)
      add(values);
  if (second)
    for (const std::vector<float> &values : v)
      add(values);
  return results;
}

//===----------------------------------------------------------------------===//
// The dispatcher
//===----------------------------------------------------------------------===//

std::vector<HostValue> evaluate(Operation *op, const std::vector<const HostValue *> &in,
                                const std::map<std::string, HostValue> &parameters) {
  // One rank's slice of a partitioned op needs the other ranks' slices.
  StringAttr axis = op->getAttrOfType<StringAttr>("mesh_axis");
  for (const char *name : {"token_axis", "ring_axis", "dropout_axis"})
    if (!axis)
      axis = op->getAttrOfType<StringAttr>(name);
  if (axis)
    throw Unsupported{"this op is one rank's part of a computation split over mesh axis '" + axis.getValue().str() +
                      "'; the interpreter runs unpartitioned programs"};
  auto one = [](HostValue v) { return std::vector<HostValue>{std::move(v)}; };
  auto optional = [&](Value operand) -> const HostValue * {
    if (!operand)
      return nullptr;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (op->getOperand(i) == operand)
        return in[i];
    return nullptr;
  };
  if (auto p = dyn_cast<train::ParamOp>(op)) {
    auto it = parameters.find(p.getName().str());
    if (it == parameters.end())
      throw Unsupported{"no value for parameter @" + p.getName().str()};
    HostValue v = it->second;
    HostValue expected = makeValue(p.getResult());
    if (v.shape != expected.shape)
      throw Unsupported{"parameter @" + p.getName().str() + " has the wrong shape"};
    v.elementType = expected.elementType;
    return one(std::move(v));
  }
  if (auto c = dyn_cast<train::ConstantOp>(op))
    return one(fromAttribute(c.getValue()));
  if (auto u = dyn_cast<train::OptimizerUpdateOp>(op))
    return optimizerUpdate(u, in);
  if (isa<train::AddOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) { return a + b; }));
  if (isa<train::SubOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) { return a - b; }));
  if (isa<train::MulOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) { return a * b; }));
  if (isa<train::DivOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool integer) {
      return integer ? (b == 0 ? 0.0 : std::trunc(a / b)) : a / b;
    }));
  if (isa<train::PowOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) { return std::pow(a, b); }));
  if (isa<train::MaxOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) {
      return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
    }));
  if (isa<train::MinOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) {
      return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
    }));
  if (isa<train::EqualOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) { return double(a == b); }));
  if (isa<train::LessOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) { return double(a < b); }));
  if (isa<train::GreaterOp>(op))
    return one(binary(op, *in[0], *in[1], [](double a, double b, bool) { return double(a > b); }));
  if (isa<train::SqrtOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::sqrt(x); }));
  if (isa<train::ReciprocalOp>(op))
    return one(unary(op, *in[0], [](double x) { return 1.0 / x; }));
  if (isa<train::NegOp>(op))
    return one(unary(op, *in[0], [](double x) { return -x; }));
  if (isa<train::AbsOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::fabs(x); }));
  if (isa<train::ExpOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::exp(x); }));
  if (isa<train::LogOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::log(x); }));
  if (isa<train::ErfOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::erf(x); }));
  if (isa<train::TanhOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::tanh(x); }));
  if (isa<train::SigmoidOp>(op))
    return one(unary(op, *in[0], sigmoid));
  if (isa<train::ReluOp>(op))
    return one(unary(op, *in[0], [](double x) { return x > 0 ? x : 0.0; }));
  if (isa<train::SinOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::sin(x); }));
  if (isa<train::CosOp>(op))
    return one(unary(op, *in[0], [](double x) { return std::cos(x); }));
  if (isa<train::SiluOp>(op)) {
    if (isF32(in[0]->elementType)) {
      HostValue out = makeValue(op->getResult(0));
      std::vector<float> x = toFloat(*in[0]), y(x.size());
      rt::cpu::siluForward(rt::Stream{}, x.data(), y.data(), int64_t(x.size()));
      out.data.assign(y.begin(), y.end());
      return one(std::move(out));
    }
    return one(unary(op, *in[0], [](double x) { return x * sigmoid(x); }));
  }
  if (auto g = dyn_cast<train::GeluOp>(op)) {
    bool tanhApprox = g.getApproximate() == "tanh";
    if (isF32(in[0]->elementType)) {
      HostValue out = makeValue(op->getResult(0));
      std::vector<float> x = toFloat(*in[0]), y(x.size());
      rt::cpu::geluForward(rt::Stream{}, x.data(), y.data(), int64_t(x.size()),
                           tanhApprox ? rt::GeluApproximation::Tanh : rt::GeluApproximation::None);
      out.data.assign(y.begin(), y.end());
      return one(std::move(out));
    }
    if (tanhApprox)
      return one(unary(op, *in[0], [](double x) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
      }));
    return one(unary(op, *in[0], [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }));
  }
  if (isa<train::WhereOp>(op)) {
    HostValue out = makeValue(op->getResult(0));
    std::vector<int64_t> ic = broadcastTable(out.shape, in[0]->shape), it = broadcastTable(out.shape, in[1]->shape),
                         ie = broadcastTable(out.shape, in[2]->shape);
    for (size_t i = 0; i < out.data.size(); ++i)
      out.data[i] = in[0]->data[size_t(ic[i])] != 0 ? in[1]->data[size_t(it[i])] : in[2]->data[size_t(ie[i])];
    return one(std::move(out));
  }
  if (isa<train::CastOp>(op)) {
    HostValue out = makeValue(op->getResult(0));
    out.data = in[0]->data;
    finish(out);
    return one(std::move(out));
  }
  if (isa<train::MatMulOp>(op))
    return one(matmul(op, *in[0], *in[1]));
  if (auto g = dyn_cast<train::GemmOp>(op))
    return one(gemm(g, *in[0], *in[1], optional(g.getC())));
  if (auto l = dyn_cast<train::LinearOp>(op))
    return one(linear(l, *in[0], *in[1], optional(l.getBias())));
  if (auto c = dyn_cast<train::ConvOp>(op))
    return one(conv(c, *in[0], *in[1], optional(c.getBias())));
  if (auto e = dyn_cast<train::EinsumOp>(op)) {
    std::vector<HostValue> inputs;
    for (const HostValue *v : in)
      inputs.push_back(*v);
    return one(einsum(e, inputs));
  }
  if (auto s = dyn_cast<train::SoftmaxOp>(op))
    return one(softmax(op, *in[0], int64_t(s.getAxis()), false));
  if (auto s = dyn_cast<train::LogSoftmaxOp>(op))
    return one(softmax(op, *in[0], int64_t(s.getAxis()), true));
  if (auto n = dyn_cast<train::LayerNormOp>(op))
    return one(normalize(op, *in[0], optional(n.getScale()), optional(n.getBias()), int64_t(n.getAxis()),
                         n.getEpsilon().convertToDouble(), false));
  if (auto n = dyn_cast<train::RmsNormOp>(op))
    return one(normalize(op, *in[0], optional(n.getScale()), nullptr, int64_t(n.getAxis()),
                         n.getEpsilon().convertToDouble(), true));
  if (auto a = dyn_cast<train::AttentionOp>(op))
    return one(attention(a, *in[0], *in[1], *in[2], optional(a.getMask())));
  if (auto r = dyn_cast<train::ReduceSumOp>(op))
    return one(reduce(op, *in[0], r.getAxes(), rt::indexing::Reduction::Sum));
  if (auto r = dyn_cast<train::ReduceMeanOp>(op))
    return one(reduce(op, *in[0], r.getAxes(), rt::indexing::Reduction::Mean));
  if (auto r = dyn_cast<train::ReduceMaxOp>(op))
    return one(reduce(op, *in[0], r.getAxes(), rt::indexing::Reduction::Max));
  if (auto d = dyn_cast<train::DropoutOp>(op)) {
    HostValue out = makeValue(op->getResult(0)), mask = makeValue(op->getResult(1));
    float ratio = float(d.getRatio().convertToDouble());
    // The masks of step 0, block 0 under run seed 0: the emitted program's
    // for the same site, step and block.
    rt::DropoutKey key = rt::dropoutKeyFor(0, 0, 0, int64_t(d.getSite()), int64_t(out.data.size()));
    for (size_t i = 0; i < out.data.size(); ++i) {
      bool keep = rt::dropoutKeeps(key.seed, key.step, key.firstIndex + uint64_t(i), ratio);
      mask.data[i] = keep;
      out.data[i] = keep ? in[0]->data[i] / (1.0 - ratio) : 0.0;
    }
    finish(out);
    return {std::move(out), std::move(mask)};
  }
  auto ignoreOf = [](std::optional<uint64_t> v) {
    return v ? std::optional<int64_t>(int64_t(*v)) : std::nullopt;
  };
  if (auto l = dyn_cast<train::SoftmaxCrossEntropyLossOp>(op))
    return one(classLoss(op, *in[0], *in[1], optional(l.getWeights()), l.getReduction(), ignoreOf(l.getIgnoreIndex()),
                         true));
  if (auto l = dyn_cast<train::NegativeLogLikelihoodLossOp>(op))
    return one(classLoss(op, *in[0], *in[1], optional(l.getWeights()), l.getReduction(), ignoreOf(l.getIgnoreIndex()),
                         false));
  if (auto l = dyn_cast<train::CrossEntropyOp>(op))
    return one(classLoss(op, *in[0], *in[1], nullptr, l.getReduction(), ignoreOf(l.getIgnoreIndex()), true));
  if (auto g = dyn_cast<train::GatherOp>(op))
    return one(gather(g, *in[0], *in[1]));
  if (auto s = dyn_cast<train::SliceOp>(op))
    return one(slice(s, *in[0]));
  if (auto c = dyn_cast<train::ConcatOp>(op)) {
    std::vector<HostValue> inputs;
    for (const HostValue *v : in)
      inputs.push_back(*v);
    return one(concat(c, inputs));
  }
  if (auto s = dyn_cast<train::SplitOp>(op))
    return split(s, *in[0]);
  if (isa<train::ReshapeOp>(op)) {
    HostValue out = makeValue(op->getResult(0));
    out.data = in[0]->data;
    return one(std::move(out));
  }
  if (auto t = dyn_cast<train::TransposeOp>(op))
    return one(transpose(t, *in[0]));
  if (isa<train::BroadcastOp>(op)) {
    HostValue out = makeValue(op->getResult(0));
    rt::indexing::broadcastTo(in[0]->data.data(), in[0]->shape, out.shape, out.data.data());
    return one(std::move(out));
  }
  if (auto t = dyn_cast<train::TriluOp>(op))
    return one(trilu(t, *in[0]));
  if (auto g = dyn_cast<train::GeluGradOp>(op)) {
    bool tanhApprox = g.getApproximate() == "tanh";
    HostValue out = makeValue(op->getResult(0));
    if (isF32(in[0]->elementType)) {
      std::vector<float> x = toFloat(*in[0]), dy = toFloat(*in[1]), dx(x.size());
      rt::cpu::geluBackward(rt::Stream{}, x.data(), dy.data(), dx.data(), int64_t(x.size()),
                            tanhApprox ? rt::GeluApproximation::Tanh : rt::GeluApproximation::None);
      out.data.assign(dx.begin(), dx.end());
    } else {
      for (size_t i = 0; i < out.data.size(); ++i)
        out.data[i] = in[1]->data[i] * geluDerivative(in[0]->data[i], tanhApprox);
    }
    finish(out);
    return one(std::move(out));
  }
  if (isa<train::SiluGradOp>(op)) {
    HostValue out = makeValue(op->getResult(0));
    if (isF32(in[0]->elementType)) {
      std::vector<float> x = toFloat(*in[0]), dy = toFloat(*in[1]), dx(x.size());
      rt::cpu::siluBackward(rt::Stream{}, x.data(), dy.data(), dx.data(), int64_t(x.size()));
      out.data.assign(dx.begin(), dx.end());
    } else {
      for (size_t i = 0; i < out.data.size(); ++i) {
        double s = sigmoid(in[0]->data[i]);
        out.data[i] = in[1]->data[i] * s * (1 + in[0]->data[i] * (1 - s));
      }
    }
    finish(out);
    return one(std::move(out));
  }
  if (auto n = dyn_cast<train::LayerNormGradOp>(op))
    return normGrad(op, *in[0], optional(n.getScale()), *optional(n.getResultGrad()), int64_t(n.getAxis()),
                    n.getEpsilon().convertToDouble(), false, n.getHasBias());
  if (auto n = dyn_cast<train::RmsNormGradOp>(op))
    return normGrad(op, *in[0], optional(n.getScale()), *optional(n.getResultGrad()), int64_t(n.getAxis()),
                    n.getEpsilon().convertToDouble(), true, false);
  if (auto a = dyn_cast<train::AttentionGradOp>(op))
    return attentionGrad(a, *in[0], *in[1], *in[2], optional(a.getMask()), *optional(a.getResultGrad()));
  if (auto c = dyn_cast<train::CrossEntropyGradOp>(op))
    return one(crossEntropyGrad(c, *in[0], *in[1], *in[2]));
  if (auto n = dyn_cast<train::NllLossGradOp>(op))
    return one(nllLossGrad(n, *in[0], optional(n.getWeights()), *optional(n.getLossGrad())));
  if (auto g = dyn_cast<train::GatherGradOp>(op))
    return one(gatherGrad(g, *in[0], *in[1]));
  if (auto s = dyn_cast<train::SliceGradOp>(op))
    return one(sliceGrad(s, *in[0]));
  if (auto c = dyn_cast<train::ConvGradOp>(op))
    return convGrad(c, *in[0], *in[1], *in[2]);
  throw Unsupported{"the interpreter has no rule for this op"};
}

std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " at " << op->getLoc();
  return text;
}

} // namespace

bool interpret(func::FuncOp function, const std::vector<HostValue> &arguments,
               const std::map<std::string, HostValue> &parameters, std::vector<HostValue> &results,
               std::string &error) {
  llvm::DenseMap<Value, HostValue> values;
  Block &body = function.getBody().front();
  if (arguments.size() != body.getNumArguments()) {
    error = "the function takes " + std::to_string(body.getNumArguments()) + " arguments, " +
            std::to_string(arguments.size()) + " given";
    return false;
  }
  for (auto [i, argument] : llvm::enumerate(body.getArguments())) {
    HostValue expected = makeValue(argument);
    if (arguments[i].shape != expected.shape || int64_t(arguments[i].data.size()) != expected.elements()) {
      auto text = [](const std::vector<int64_t> &shape) {
        std::string t = "[";
        for (size_t d = 0; d < shape.size(); ++d)
          t += (d ? ", " : "") + std::to_string(shape[d]);
        return t + "]";
      };
      error = "argument " + std::to_string(i) + " has shape " + text(arguments[i].shape) + " and " +
              std::to_string(arguments[i].data.size()) + " values; the function takes " + text(expected.shape);
      return false;
    }
    HostValue v = arguments[i];
    v.elementType = expected.elementType;
    values[argument] = std::move(v);
  }
  for (Operation &op : body.without_terminator()) {
    std::vector<const HostValue *> inputs;
    for (Value operand : op.getOperands()) {
      auto it = values.find(operand);
      if (it == values.end()) {
        error = describe(&op) + ": an operand has no value";
        return false;
      }
      inputs.push_back(&it->second);
    }
    try {
      std::vector<HostValue> outputs = evaluate(&op, inputs, parameters);
      for (auto [result, value] : llvm::zip(op.getResults(), outputs))
        values[result] = std::move(value);
    } catch (const Unsupported &u) {
      error = describe(&op) + ": " + u.reason;
      return false;
    } catch (const rt::Error &e) {
      error = describe(&op) + ": " + e.reason();
      return false;
    }
  }
  results.clear();
  for (Value returned : body.getTerminator()->getOperands())
    results.push_back(values[returned]);
  return true;
}

} // namespace colossal::execute
