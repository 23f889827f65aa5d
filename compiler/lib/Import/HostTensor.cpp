//===- HostTensor.cpp - evaluating shape arithmetic at import ----*- C++ -*-===//

#include "HostTensor.h"

#include <algorithm>
#include <cmath>

namespace colossal::import {

bool isFloatKind(ElementKind kind) {
  return kind == ElementKind::Float || kind == ElementKind::Double ||
         kind == ElementKind::Float16 || kind == ElementKind::BFloat16;
}

const char *elementKindName(ElementKind kind) {
  switch (kind) {
  case ElementKind::Float: return "float32";
  case ElementKind::UInt8: return "uint8";
  case ElementKind::Int8: return "int8";
  case ElementKind::UInt16: return "uint16";
  case ElementKind::Int16: return "int16";
  case ElementKind::Int32: return "int32";
  case ElementKind::Int64: return "int64";
  case ElementKind::Bool: return "bool";
  case ElementKind::Float16: return "float16";
  case ElementKind::Double: return "float64";
  case ElementKind::UInt32: return "uint32";
  case ElementKind::UInt64: return "uint64";
  case ElementKind::BFloat16: return "bfloat16";
  }
  return "unknown";
}

int64_t saturatingMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  if (a < 0 || b < 0 || a > INT64_MAX / b)
    return INT64_MAX;
  return a * b;
}

int64_t numElementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n = saturatingMul(n, d);
  return n;
}

int64_t HostTensor::numElements() const { return numElementsOf(shape); }

/// Truncates toward zero, saturating where C++'s conversion would be undefined.
static int64_t saturatingToInt(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9.2e18)
    return INT64_MAX;
  if (v <= -9.2e18)
    return INT64_MIN;
  return int64_t(v);
}

int64_t HostTensor::asInt(int64_t i) const {
  return isFloat() ? saturatingToInt(floats[i]) : ints[i];
}

HostTensor HostTensor::ofInts(std::vector<int64_t> shape, std::vector<int64_t> values,
                              ElementKind kind) {
  HostTensor t;
  t.shape = std::move(shape);
  t.kind = kind;
  t.ints = std::move(values);
  return t;
}

HostTensor HostTensor::ofFloats(std::vector<int64_t> shape, std::vector<double> values,
                                ElementKind kind) {
  HostTensor t;
  t.shape = std::move(shape);
  t.kind = kind;
  t.floats = std::move(values);
  return t;
}

HostTensor HostTensor::splat(const HostTensor &scalar, std::vector<int64_t> shape) {
  int64_t n = numElementsOf(shape);
  if (scalar.isFloat())
    return ofFloats(std::move(shape), std::vector<double>(n, scalar.floats.at(0)), scalar.kind);
  return ofInts(std::move(shape), std::vector<int64_t>(n, scalar.ints.at(0)), scalar.kind);
}

std::optional<std::vector<int64_t>> broadcastShape(const std::vector<int64_t> &a,
                                                   const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// Row-major strides of `shape` as seen from a broadcast result of `outShape`
/// (stride 0 along broadcast dimensions).
static std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                             const std::vector<int64_t> &outShape) {
  std::vector<int64_t> strides(outShape.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    size_t o = i + outShape.size() - shape.size();
    strides[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

/// Calls fn(outIndex, offsetA, offsetB) for every element of the broadcast.
template <typename Fn>
static void forEachBroadcast(const std::vector<int64_t> &outShape,
                             const std::vector<std::vector<int64_t>> &strides, Fn fn) {
  int64_t n = numElementsOf(outShape);
  std::vector<int64_t> index(outShape.size(), 0);
  std::vector<int64_t> offsets(strides.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    fn(e, offsets);
    for (size_t d = outShape.size(); d-- > 0;) {
      ++index[d];
      for (size_t s = 0; s < strides.size(); ++s)
        offsets[s] += strides[s][d];
      if (index[d] < outShape[d])
        break;
      for (size_t s = 0; s < strides.size(); ++s)
        offsets[s] -= strides[s][d] * index[d];
      index[d] = 0;
    }
  }
}

static bool isComparison(BinaryFn fn) {
  return fn == BinaryFn::Equal || fn == BinaryFn::Less || fn == BinaryFn::Greater;
}

Folded<HostTensor> foldBinary(BinaryFn fn, const HostTensor &a, const HostTensor &b) {
  auto shape = broadcastShape(a.shape, b.shape);
  if (!shape)
    return Folded<HostTensor>::fail("shapes do not broadcast");
  if (a.kind != b.kind)
    return Folded<HostTensor>::fail(std::string("element types differ: ") +
                                    elementKindName(a.kind) + " vs " + elementKindName(b.kind));
  std::vector<std::vector<int64_t>> strides{broadcastStrides(a.shape, *shape),
                                            broadcastStrides(b.shape, *shape)};
  int64_t n = numElementsOf(*shape);
  HostTensor out;
  out.shape = *shape;
  out.kind = isComparison(fn) ? ElementKind::Bool : a.kind;
  bool floating = a.isFloat();
  if (out.isFloat())
    out.floats.resize(n);
  else
    out.ints.resize(n);
  bool divideByZero = false;
  forEachBroadcast(*shape, strides, [&](int64_t e, const std::vector<int64_t> &off) {
    if (floating) {
      double x = a.floats[off[0]], y = b.floats[off[1]], r = 0;
      switch (fn) {
      case BinaryFn::Add: r = x + y; break;
      case BinaryFn::Sub: r = x - y; break;
      case BinaryFn::Mul: r = x * y; break;
      case BinaryFn::Div: r = x / y; break;
      case BinaryFn::Pow: r = std::pow(x, y); break;
      case BinaryFn::Max: r = std::max(x, y); break;
      case BinaryFn::Min: r = std::min(x, y); break;
      case BinaryFn::Equal: out.ints[e] = x == y; return;
      case BinaryFn::Less: out.ints[e] = x < y; return;
      case BinaryFn::Greater: out.ints[e] = x > y; return;
      case BinaryFn::And: case BinaryFn::Or: r = 0; break;
      }
      out.floats[e] = r;
      return;
    }
    int64_t x = a.ints[off[0]], y = b.ints[off[1]], r = 0;
    switch (fn) {
    case BinaryFn::Add: r = int64_t(uint64_t(x) + uint64_t(y)); break;
    case BinaryFn::Sub: r = int64_t(uint64_t(x) - uint64_t(y)); break;
    case BinaryFn::Mul: r = int64_t(uint64_t(x) * uint64_t(y)); break;
    case BinaryFn::Div:
      if (y == 0 || (x == INT64_MIN && y == -1)) {
        divideByZero = true;
        return;
      }
      // ONNX integer Div truncates toward zero, as C++ does.
      r = x / y;
      break;
    case BinaryFn::Pow: {
      r = 1;
      for (int64_t i = 0; i < y && i < 64; ++i)
        r = int64_t(uint64_t(r) * uint64_t(x));
      break;
    }
    case BinaryFn::Max: r = std::max(x, y); break;
    case BinaryFn::Min: r = std::min(x, y); break;
    case BinaryFn::Equal: r = x == y; break;
    case BinaryFn::Less: r = x < y; break;
    case BinaryFn::Greater: r = x > y; break;
    case BinaryFn::And: r = x && y; break;
    case BinaryFn::Or: r = x || y; break;
    }
    out.ints[e] = r;
  });
  if (divideByZero)
    return Folded<HostTensor>::fail("integer division by zero in a constant");
  return {out, ""};
}

HostTensor foldUnary(UnaryFn fn, const HostTensor &x) {
  HostTensor out = x;
  if (!x.isFloat()) {
    for (int64_t &v : out.ints) {
      switch (fn) {
      case UnaryFn::Neg: v = int64_t(0 - uint64_t(v)); break;
      case UnaryFn::Abs: v = v < 0 ? int64_t(0 - uint64_t(v)) : v; break;
      case UnaryFn::Relu: v = std::max<int64_t>(v, 0); break;
      case UnaryFn::Not: v = !v; break;
      default: break;
      }
    }
    return out;
  }
  for (double &v : out.floats) {
    switch (fn) {
    case UnaryFn::Neg: v = -v; break;
    case UnaryFn::Abs: v = std::fabs(v); break;
    case UnaryFn::Sqrt: v = std::sqrt(v); break;
    case UnaryFn::Reciprocal: v = 1.0 / v; break;
    case UnaryFn::Exp: v = std::exp(v); break;
    case UnaryFn::Log: v = std::log(v); break;
    case UnaryFn::Sin: v = std::sin(v); break;
    case UnaryFn::Cos: v = std::cos(v); break;
    case UnaryFn::Tanh: v = std::tanh(v); break;
    case UnaryFn::Sigmoid: v = 1.0 / (1.0 + std::exp(-v)); break;
    case UnaryFn::Relu: v = std::max(v, 0.0); break;
    case UnaryFn::Erf: v = std::erf(v); break;
    case UnaryFn::Not: break;
    }
  }
  return out;
}

HostTensor foldCast(const HostTensor &x, ElementKind to) {
  HostTensor out;
  out.shape = x.shape;
  out.kind = to;
  int64_t n = x.numElements();
  if (isFloatKind(to)) {
    out.floats.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      double v = x.asDouble(i);
      out.floats[i] = to == ElementKind::Float ? double(float(v)) : v;
    }
    return out;
  }
  out.ints.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    if (to == ElementKind::Bool) {
      out.ints[i] = x.asDouble(i) != 0;
      continue;
    }
    if (!x.isFloat()) {
      out.ints[i] = x.ints[i];
      continue;
    }
    // Out-of-range float-to-int casts are undefined in C++ and unspecified
    // in ONNX: saturate.
    out.ints[i] = saturatingToInt(x.floats[i]);
  }
  return out;
}

Folded<HostTensor> foldWhere(const HostTensor &cond, const HostTensor &a, const HostTensor &b) {
  auto ab = broadcastShape(a.shape, b.shape);
  if (!ab || a.kind != b.kind)
    return Folded<HostTensor>::fail("branches do not broadcast or differ in type");
  auto shape = broadcastShape(cond.shape, *ab);
  if (!shape)
    return Folded<HostTensor>::fail("condition does not broadcast");
  std::vector<std::vector<int64_t>> strides{broadcastStrides(cond.shape, *shape),
                                            broadcastStrides(a.shape, *shape),
                                            broadcastStrides(b.shape, *shape)};
  HostTensor out;
  out.shape = *shape;
  out.kind = a.kind;
  int64_t n = numElementsOf(*shape);
  if (a.isFloat())
    out.floats.resize(n);
  else
    out.ints.resize(n);
  forEachBroadcast(*shape, strides, [&](int64_t e, const std::vector<int64_t> &off) {
    bool c = cond.asDouble(off[0]) != 0;
    if (a.isFloat())
      out.floats[e] = c ? a.floats[off[1]] : b.floats[off[2]];
    else
      out.ints[e] = c ? a.ints[off[1]] : b.ints[off[2]];
  });
  return {out, ""};
}

/// Copies elements from `x` at the flat offsets `sourceOffsets`.
static HostTensor gatherFlat(const HostTensor &x, std::vector<int64_t> shape,
                             const std::vector<int64_t> &sourceOffsets) {
  HostTensor out;
  out.shape = std::move(shape);
  out.kind = x.kind;
  auto gather = [&](auto &to, const auto &from) {
    to.reserve(sourceOffsets.size());
    for (int64_t o : sourceOffsets)
      to.push_back(from[o]);
  };
  if (x.isFloat())
    gather(out.floats, x.floats);
  else
    gather(out.ints, x.ints);
  return out;
}

/// Copies the element of `x` at base + sum_d index[d] * strides[d] for every
/// index of `shape`, a run of the innermost dimension at a time (slices,
/// transposes and broadcasts of masks and tables with a million elements
/// fold once per microbatch size the search tries).
static HostTensor gatherStrided(const HostTensor &x, std::vector<int64_t> shape, int64_t base,
                                const std::vector<int64_t> &strides) {
  HostTensor out;
  out.shape = std::move(shape);
  out.kind = x.kind;
  int64_t n = numElementsOf(out.shape);
  auto gather = [&](auto &to, const auto &from) {
    to.resize(n);
    if (n == 0)
      return;
    if (out.shape.empty()) {
      to[0] = from[base];
      return;
    }
    size_t outerRank = out.shape.size() - 1;
    int64_t inner = out.shape.back(), innerStride = strides.back(), offset = base;
    std::vector<int64_t> index(outerRank, 0);
    for (int64_t e = 0; e < n; e += inner) {
      if (innerStride == 1)
        std::copy(from.begin() + offset, from.begin() + offset + inner, to.begin() + e);
      else
        for (int64_t i = 0; i < inner; ++i)
          to[e + i] = from[offset + i * innerStride];
      for (size_t d = outerRank; d-- > 0;) {
        offset += strides[d];
        if (++index[d] < out.shape[d])
          break;
        offset -= strides[d] * index[d];
        index[d] = 0;
      }
    }
  };
  if (x.isFloat())
    gather(out.floats, x.floats);
  else
    gather(out.ints, x.ints);
  return out;
}

Folded<HostTensor> foldGather(const HostTensor &data, const HostTensor &indices, int64_t axis) {
  int64_t outer = 1, inner = 1, size = data.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= data.shape[d];
  for (size_t d = axis + 1; d < data.shape.size(); ++d)
    inner *= data.shape[d];
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < indices.numElements(); ++i) {
      int64_t index = indices.asInt(i);
      if (index < -size || index >= size)
        return Folded<HostTensor>::fail("index " + std::to_string(index) +
                                        " is out of range for a dimension of " +
                                        std::to_string(size));
      if (index < 0)
        index += size;
      for (int64_t j = 0; j < inner; ++j)
        offsets.push_back((o * size + index) * inner + j);
    }
  return {gatherFlat(data, std::move(shape), offsets), ""};
}

Folded<HostTensor> foldConcat(const std::vector<const HostTensor *> &inputs, int64_t axis) {
  const HostTensor &first = *inputs.front();
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (const HostTensor *t : inputs) {
    if (t->shape.size() != first.shape.size() || t->kind != first.kind)
      return Folded<HostTensor>::fail("inputs differ in rank or element type");
    for (size_t d = 0; d < shape.size(); ++d)
      if ((int64_t)d != axis && t->shape[d] != first.shape[d])
        return Folded<HostTensor>::fail("inputs differ in dimension " + std::to_string(d));
    shape[axis] += t->shape[axis];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  HostTensor out;
  out.shape = shape;
  out.kind = first.kind;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *t : inputs) {
      int64_t chunk = outer ? t->numElements() / outer : 0;
      if (t->isFloat())
        out.floats.insert(out.floats.end(), t->floats.begin() + o * chunk,
                          t->floats.begin() + (o + 1) * chunk);
      else
        out.ints.insert(out.ints.end(), t->ints.begin() + o * chunk,
                        t->ints.begin() + (o + 1) * chunk);
    }
  return {out, ""};
}

HostTensor foldReshape(const HostTensor &x, std::vector<int64_t> shape) {
  HostTensor out = x;
  out.shape = std::move(shape);
  return out;
}

HostTensor foldBroadcast(const HostTensor &x, const std::vector<int64_t> &shape) {
  return gatherStrided(x, shape, 0, broadcastStrides(x.shape, shape));
}

HostTensor foldTranspose(const HostTensor &x, const std::vector<int64_t> &perm) {
  std::vector<int64_t> shape, sourceStrides(x.shape.size()), strides;
  int64_t stride = 1;
  for (size_t d = x.shape.size(); d-- > 0;) {
    sourceStrides[d] = stride;
    stride *= x.shape[d];
  }
  for (int64_t p : perm) {
    shape.push_back(x.shape[p]);
    strides.push_back(sourceStrides[p]);
  }
  return gatherStrided(x, shape, 0, strides);
}

HostTensor foldSlice(const HostTensor &x, const std::vector<int64_t> &starts,
                     const std::vector<int64_t> &limits, const std::vector<int64_t> &steps) {
  std::vector<int64_t> shape, sourceStrides(x.shape.size()), strides;
  int64_t stride = 1, base = 0;
  for (size_t d = x.shape.size(); d-- > 0;) {
    sourceStrides[d] = stride;
    stride *= x.shape[d];
  }
  for (size_t d = 0; d < x.shape.size(); ++d) {
    int64_t extent = steps[d] > 0 ? limits[d] - starts[d] : starts[d] - limits[d];
    uint64_t magnitude = steps[d] > 0 ? uint64_t(steps[d]) : 0 - uint64_t(steps[d]);
    shape.push_back(extent <= 0 ? 0 : int64_t((uint64_t(extent) - 1) / magnitude + 1));
    // A dimension that keeps at most one element never moves by its stride;
    // otherwise the step is smaller than the dimension and the product fits
    // (a step of 2^62 on a dimension of 3 would overflow it).
    strides.push_back(shape.back() <= 1 ? 0 : sourceStrides[d] * steps[d]);
    base += starts[d] * sourceStrides[d];
  }
  return gatherStrided(x, shape, base, strides);
}

HostTensor foldTrilu(const HostTensor &x, bool upper, int64_t k) {
  HostTensor out = x;
  size_t rank = x.shape.size();
  int64_t rows = x.shape[rank - 2], cols = x.shape[rank - 1];
  int64_t matrices = rows * cols ? x.numElements() / (rows * cols) : 0;
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep)
          continue;
        int64_t e = (m * rows + i) * cols + j;
        if (out.isFloat())
          out.floats[e] = 0;
        else
          out.ints[e] = 0;
      }
  return out;
}

Folded<HostTensor> foldRange(const HostTensor &start, const HostTensor &limit,
                             const HostTensor &delta) {
  for (const HostTensor *t : {&start, &limit, &delta})
    if (t->numElements() != 1)
      return Folded<HostTensor>::fail("range start, limit and delta must be scalars");
  if (start.kind != limit.kind || start.kind != delta.kind)
    return Folded<HostTensor>::fail("range start, limit and delta differ in type");
  double s = start.asDouble(0), l = limit.asDouble(0), d = delta.asDouble(0);
  if (d == 0 || std::isnan(d) || std::isnan(s) || std::isnan(l))
    return Folded<HostTensor>::fail("range delta must be a non-zero number");
  double count = std::ceil((l - s) / d);
  if (count > double(kMaxFoldedElements))
    return Folded<HostTensor>::fail("range of " + std::to_string(count) + " elements is too large");
  int64_t n = count > 0 ? int64_t(count) : 0;
  if (start.isFloat()) {
    std::vector<double> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = s + double(i) * d;
    return {HostTensor::ofFloats({n}, values, start.kind), ""};
  }
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = int64_t(uint64_t(start.ints[0]) + uint64_t(i) * uint64_t(delta.ints[0]));
  return {HostTensor::ofInts({n}, values, start.kind), ""};
}

} // namespace colossal::import
