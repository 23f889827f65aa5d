//===- TensorIndexing.h - data movement on row-major tensors ------*- C++ -*-===//
//
// The index arithmetic of the train dialect's data-movement ops (transpose,
// slice, concat, split, gather, broadcast, reductions, trilu) and of their
// gradients, on plain row-major arrays with explicit shapes. Templates over
// the element type: emitted host programs instantiate them for float and
// int64, the compiler's float64 reference interpreter for double, so both
// move data by the same rules.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TENSORINDEXING_H
#define COLOSSAL_RUNTIME_TENSORINDEXING_H

#include "colossal/runtime/Error.h"
#include "colossal/runtime/TrackedAllocator.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace colossal::rt::indexing {

using Shape = std::vector<int64_t>;

/// The product of shape[from, to).
inline int64_t product(const Shape &shape, size_t from = 0, size_t to = SIZE_MAX) {
  auto first = shape.begin() + long(std::min(from, shape.size()));
  auto last = shape.begin() + long(std::min(to, shape.size()));
  return first < last ? std::accumulate(first, last, int64_t(1), std::multiplies<int64_t>()) : 1;
}

inline Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

/// Steps a row-major multi-index through `shape` (last dimension fastest).
inline void nextCoordinate(Shape &coord, const Shape &shape) {
  for (size_t d = coord.size(); d-- > 0;) {
    if (++coord[d] < shape[d])
      return;
    coord[d] = 0;
  }
}

inline int64_t normalizeAxis(int64_t axis, size_t rank) { return axis < 0 ? axis + int64_t(rank) : axis; }

/// For every element of `out`, the flat index of the element of `in` that
/// numpy broadcasting maps to it (shapes right-aligned): a table of the
/// output's size, charged as workspace.
inline TrackedVector<int64_t> broadcastIndex(const Shape &out, const Shape &in) {
  size_t rank = out.size(), offset = rank - in.size();
  Shape inStrides = stridesOf(in);
  TrackedVector<int64_t> index = scratch<int64_t>(size_t(product(out)));
  Shape coord(rank, 0);
  for (size_t flat = 0; flat < index.size(); ++flat) {
    int64_t at = 0;
    for (size_t d = offset; d < rank; ++d)
      if (in[d - offset] != 1)
        at += coord[d] * inStrides[d - offset];
    index[flat] = at;
    nextCoordinate(coord, out);
  }
  return index;
}

/// Walks `out` in row-major order and calls `f(flat, at)`, `at[k]` the flat
/// index in operand k (of shape `ins[k]`, right-aligned, each dimension 1
/// or out's) that numpy broadcasting maps to it: the indices move by
/// strides, no table of them is built.
template <size_t N, typename F>
void forEachBroadcast(const Shape &out, const std::array<const Shape *, N> &ins, F f) {
  size_t rank = out.size();
  std::array<Shape, N> strides;
  for (size_t k = 0; k < N; ++k) {
    const Shape &in = *ins[k];
    Shape inStrides = stridesOf(in);
    strides[k].assign(rank, 0);
    for (size_t d = rank - in.size(); d < rank; ++d)
      if (in[d - (rank - in.size())] != 1)
        strides[k][d] = inStrides[d - (rank - in.size())];
  }
  std::array<int64_t, N> at{};
  Shape coord(rank, 0);
  for (int64_t flat = 0, n = product(out); flat < n; ++flat) {
    f(flat, at);
    for (size_t d = rank; d-- > 0;) {
      for (size_t k = 0; k < N; ++k)
        at[k] += strides[k][d];
      if (++coord[d] < out[d])
        break;
      for (size_t k = 0; k < N; ++k)
        at[k] -= strides[k][d] * out[d];
      coord[d] = 0;
    }
  }
}

/// A gather index with negative values counted from the end, checked.
inline int64_t gatherIndex(int64_t index, int64_t n) {
  int64_t at = index < 0 ? index + n : index;
  if (at < 0 || at >= n)
    fail("gather", "index " + std::to_string(index) + " outside a dimension of " + std::to_string(n));
  return at;
}

/// out[c] = x[c permuted]: out dimension d is input dimension perm[d]. Walks
/// the output's rows, each a strided run of the input.
template <typename T>
void transpose(const T *x, const Shape &xShape, const Shape &perm, T *out) {
  size_t rank = perm.size();
  Shape outShape(rank), inStrides = stridesOf(xShape);
  for (size_t d = 0; d < rank; ++d)
    outShape[d] = xShape[size_t(perm[d])];
  int64_t total = product(outShape);
  if (rank == 0 || total == 0) {
    if (total)
      out[0] = x[0];
    return;
  }
  int64_t rowLength = outShape.back(), stride = inStrides[size_t(perm.back())];
  Shape rowShape(outShape.begin(), outShape.end() - 1), coord(rank - 1, 0);
  for (int64_t row = 0, rows = total / rowLength; row < rows; ++row) {
    int64_t at = 0;
    for (size_t d = 0; d + 1 < rank; ++d)
      at += coord[d] * inStrides[size_t(perm[d])];
    T *o = out + row * rowLength;
    for (int64_t j = 0; j < rowLength; ++j)
      o[j] = x[at + j * stride];
    nextCoordinate(coord, rowShape);
  }
}

/// Calls f(input flat index, output flat index) for every element of a
/// strided slice of an `inShape` tensor whose result has `outShape`.
template <typename F>
void forEachSliced(const Shape &inShape, const Shape &outShape, const Shape &starts, const Shape &steps, F f) {
  Shape inStrides = stridesOf(inShape), coord(outShape.size(), 0);
  for (int64_t flat = 0, n = product(outShape); flat < n; ++flat) {
    int64_t at = 0;
    for (size_t d = 0; d < coord.size(); ++d)
      at += (starts[d] + coord[d] * steps[d]) * inStrides[d];
    f(at, flat);
    nextCoordinate(coord, outShape);
  }
}

template <typename T>
void slice(const T *x, const Shape &xShape, const Shape &starts, const Shape &steps, const Shape &outShape, T *out) {
  forEachSliced(xShape, outShape, starts, steps, [&](int64_t in, int64_t o) { out[o] = x[in]; });
}

/// The slice's gradient: dy added into the sliced positions of `dx` (zeroed
/// by the caller), which has the input's shape.
template <typename T>
void sliceGrad(const T *dy, const Shape &dyShape, const Shape &starts, const Shape &steps, const Shape &dxShape,
               T *dx) {
  forEachSliced(dxShape, dyShape, starts, steps, [&](int64_t in, int64_t o) { dx[in] += dy[o]; });
}

/// Calls f(whole flat index, part flat index) for every element of `part`,
/// a block of `whole` starting at `offset` along `axis` (both shapes agree
/// except on `axis`).
template <typename F>
void forEachAlongAxis(const Shape &wholeShape, const Shape &partShape, int64_t axis, int64_t offset, F f) {
  int64_t outer = product(wholeShape, 0, size_t(axis)), inner = product(wholeShape, size_t(axis) + 1);
  int64_t total = wholeShape[size_t(axis)], n = partShape[size_t(axis)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n * inner; ++j)
      f((o * total + offset) * inner + j, o * n * inner + j);
}

/// Calls `run(globalOffset, blockOffset, count)` (in elements) for each
/// contiguous run of a block of shape `shape` placed at `offsets` of a tensor
/// of shape `global` (any dimensions may differ); along `groupDim` the block
/// is `groups` equal parts, part g at offsets + g x (global / groups) (a
/// fused QKV projection's slice: one rank's heads of query, key and value).
template <typename Run>
void forEachBlockRun(const Shape &global, const Shape &shape, const Shape &offsets, int64_t groups, int64_t groupDim,
                     Run run) {
  size_t rank = shape.size();
  if (rank == 0) {
    run(int64_t(0), int64_t(0), int64_t(1));
    return;
  }
  if (product(shape) == 0)
    return;
  auto globalIndex = [&](size_t d, int64_t c) {
    if (groups > 1 && int64_t(d) == groupDim) {
      int64_t part = shape[d] / groups;
      return offsets[d] + c / part * (global[d] / groups) + c % part;
    }
    return offsets[d] + c;
  };
  int64_t last = shape[rank - 1];
  int64_t length = groups > 1 && groupDim == int64_t(rank - 1) ? last / groups : last;
  std::vector<int64_t> c(rank, 0);
  for (int64_t shardRow = 0;; shardRow += last) {
    for (int64_t begin = 0; begin < last; begin += length) {
      c[rank - 1] = begin;
      int64_t at = 0;
      for (size_t d = 0; d < rank; ++d)
        at = at * global[d] + globalIndex(d, c[d]);
      run(at, shardRow + begin, length);
    }
    int d = int(rank) - 2;
    for (; d >= 0; --d) {
      if (++c[size_t(d)] < shape[size_t(d)])
        break;
      c[size_t(d)] = 0;
    }
    if (d < 0)
      return;
  }
}

/// One operand of a concat written into the result.
template <typename T>
void insertAlongAxis(const T *part, const Shape &partShape, T *whole, const Shape &wholeShape, int64_t axis,
                     int64_t offset) {
  forEachAlongAxis(wholeShape, partShape, axis, offset, [&](int64_t w, int64_t p) { whole[w] = part[p]; });
}

/// One result of a split read out of its operand.
template <typename T>
void extractAlongAxis(const T *whole, const Shape &wholeShape, T *part, const Shape &partShape, int64_t axis,
                      int64_t offset) {
  forEachAlongAxis(wholeShape, partShape, axis, offset, [&](int64_t w, int64_t p) { part[p] = whole[w]; });
}

/// out = data taken at `indices` along `axis` (numpy.take); out has shape
/// data[:axis] + indices + data[axis+1:].
template <typename T>
void gather(const T *data, const Shape &dataShape, const int64_t *indices, int64_t count, int64_t axis, T *out) {
  int64_t outer = product(dataShape, 0, size_t(axis)), n = dataShape[size_t(axis)],
          inner = product(dataShape, size_t(axis) + 1);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = gatherIndex(indices[i], n);
      std::copy(data + (o * n + at) * inner, data + (o * n + at + 1) * inner, out + (o * count + i) * inner);
    }
}

/// The gather's gradient: dy summed into the gathered rows of `ddata`
/// (zeroed by the caller); repeated indices accumulate.
template <typename T>
void gatherGrad(const int64_t *indices, int64_t count, const T *dy, const Shape &dataShape, int64_t axis, T *ddata) {
  int64_t outer = product(dataShape, 0, size_t(axis)), n = dataShape[size_t(axis)],
          inner = product(dataShape, size_t(axis) + 1);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = gatherIndex(indices[i], n);
      for (int64_t j = 0; j < inner; ++j)
        ddata[(o * n + at) * inner + j] += dy[(o * count + i) * inner + j];
    }
}

template <typename T>
void broadcastTo(const T *x, const Shape &xShape, const Shape &outShape, T *out) {
  forEachBroadcast<1>(outShape, {&xShape}, [&](int64_t i, const std::array<int64_t, 1> &at) { out[i] = x[at[0]]; });
}

enum class Reduction { Sum, Mean, Max };

/// Reduces `axes` (all when empty) of x into `out`, which holds the kept
/// elements in row-major order (keepdims only changes the shape). Sums
/// accumulate in `Acc`.
template <typename T, typename Acc = double>
void reduce(const T *x, const Shape &xShape, const Shape &axes, Reduction kind, T *out) {
  std::vector<bool> reduced(xShape.size(), axes.empty());
  for (int64_t a : axes)
    reduced[size_t(normalizeAxis(a, xShape.size()))] = true;
  Shape keptShape;
  for (size_t d = 0; d < xShape.size(); ++d)
    keptShape.push_back(reduced[d] ? 1 : xShape[d]);
  Shape keptStrides = stridesOf(keptShape), coord(xShape.size(), 0);
  TrackedVector<Acc> acc =
      scratch<Acc>(size_t(product(keptShape)), kind == Reduction::Max ? -std::numeric_limits<Acc>::infinity() : Acc(0));
  auto fold = [&](Acc a, T v) { return kind == Reduction::Max ? std::max(a, Acc(v)) : a + Acc(v); };
  // One run of reduced dimensions (a bias gradient's rows, a norm's last
  // axis): [outer, mid, inner] walked in storage order, so each result
  // takes its elements in the same order as the general walk below.
  size_t first = 0, last = xShape.size();
  while (first < xShape.size() && !reduced[first])
    ++first;
  while (last > first && !reduced[last - 1])
    --last;
  bool oneRun = std::all_of(reduced.begin() + long(first), reduced.begin() + long(last), [](bool r) { return r; });
  if (oneRun && first < last) {
    int64_t outer = product(xShape, 0, first), mid = product(xShape, first, last), inner = product(xShape, last);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t m = 0; m < mid; ++m) {
        const T *row = x + (o * mid + m) * inner;
        Acc *into = acc.data() + o * inner;
        for (int64_t i = 0; i < inner; ++i)
          into[i] = fold(into[i], row[i]);
      }
  } else {
    for (int64_t flat = 0, n = product(xShape); flat < n; ++flat) {
      int64_t at = 0;
      for (size_t d = 0; d < coord.size(); ++d)
        if (!reduced[d])
          at += coord[d] * keptStrides[d];
      acc[size_t(at)] = fold(acc[size_t(at)], x[flat]);
      nextCoordinate(coord, xShape);
    }
  }
  Acc count = Acc(product(xShape)) / Acc(std::max<int64_t>(1, product(keptShape)));
  for (size_t i = 0; i < acc.size(); ++i)
    out[i] = T(kind == Reduction::Mean ? acc[i] / count : acc[i]);
}

/// Keeps the upper (c - r >= k) or lower (c - r <= k) triangle of the last
/// two dimensions.
template <typename T>
void trilu(const T *x, const Shape &shape, bool upper, int64_t k, T *out) {
  size_t rank = shape.size();
  int64_t rows = shape[rank - 2], cols = shape[rank - 1];
  for (int64_t flat = 0, n = product(shape); flat < n; ++flat) {
    int64_t c = flat % cols, r = (flat / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    out[flat] = keep ? x[flat] : T(0);
  }
}

/// Calls f(input index, weight index, output index) for every tap of a
/// grouped, strided, padded, dilated N-d convolution of x [N, C, spatial...]
/// with w [M, C / group, kernel...] into y [N, M, spatial...]; taps that fall
/// in the padding are skipped.
template <typename F>
void forEachConvTap(const Shape &xShape, const Shape &wShape, const Shape &yShape, const Shape &strides,
                    const Shape &pads, const Shape &dilations, int64_t group, F f) {
  size_t spatial = xShape.size() - 2;
  int64_t N = xShape[0], C = xShape[1], M = wShape[0], Cg = C / group, Mg = M / group;
  Shape inSpatial(xShape.begin() + 2, xShape.end()), kSpatial(wShape.begin() + 2, wShape.end()),
      outSpatial(yShape.begin() + 2, yShape.end());
  int64_t outPositions = product(outSpatial), kPositions = product(kSpatial), inPositions = product(inSpatial);
  Shape inStrides = stridesOf(inSpatial), oc(spatial), kc(spatial);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t mo = 0; mo < M; ++mo) {
      int64_t g = mo / Mg;
      for (int64_t o = 0; o < outPositions; ++o) {
        int64_t rest = o;
        for (size_t d = spatial; d-- > 0;)
          oc[d] = rest % outSpatial[d], rest /= outSpatial[d];
        size_t yi = size_t((n * M + mo) * outPositions + o);
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t kp = 0; kp < kPositions; ++kp) {
            int64_t krest = kp, at = 0;
            bool inside = true;
            for (size_t d = spatial; d-- > 0;) {
              kc[d] = krest % kSpatial[d], krest /= kSpatial[d];
              int64_t pos = oc[d] * strides[d] - pads[d] + kc[d] * dilations[d];
              if (pos < 0 || pos >= inSpatial[d])
                inside = false;
              at += pos * inStrides[d];
            }
            if (inside)
              f(size_t((n * C + g * Cg + c) * inPositions + at), size_t((mo * Cg + c) * kPositions + kp), yi);
          }
      }
    }
}

/// Einstein summation over explicit letters ("ij,jk->ik"; an implicit
/// output keeps the letters used once, in alphabetical order). No ellipsis.
/// Products accumulate in double.
template <typename T>
void einsum(std::string equation, const std::vector<const T *> &inputs, const std::vector<Shape> &shapes,
            const Shape &outShape, T *out) {
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  if (equation.find('.') != std::string::npos)
    fail("einsum", "an ellipsis in '" + equation + "' is not supported");
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow), rhs;
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1)
    terms.push_back(lhs.substr(start, comma - start));
  terms.push_back(lhs.substr(start));
  if (terms.size() != inputs.size())
    fail("einsum", "'" + equation + "' names " + std::to_string(terms.size()) + " operands, " +
                       std::to_string(inputs.size()) + " given");
  int64_t sizes[128] = {}, counts[128] = {};
  for (size_t t = 0; t < terms.size(); ++t)
    for (size_t d = 0; d < terms[t].size(); ++d) {
      unsigned char letter = static_cast<unsigned char>(terms[t][d]) & 127;
      sizes[letter] = shapes[t][d];
      ++counts[letter];
    }
  if (arrow != std::string::npos) {
    rhs = equation.substr(arrow + 2);
  } else {
    for (int letter = 0; letter < 128; ++letter)
      if (counts[letter] == 1)
        rhs += char(letter);
  }
  std::vector<char> letters;
  int position[128] = {};
  for (int letter = 0; letter < 128; ++letter)
    if (counts[letter]) {
      position[letter] = int(letters.size());
      letters.push_back(char(letter));
    }
  Shape loopShape, coord(letters.size(), 0);
  for (char l : letters)
    loopShape.push_back(sizes[int(l)]);
  std::vector<Shape> termStrides;
  for (const Shape &shape : shapes)
    termStrides.push_back(stridesOf(shape));
  Shape outStrides = stridesOf(outShape);
  TrackedVector<double> acc = scratch<double>(size_t(product(outShape)), 0.0);
  for (int64_t flat = 0, total = product(loopShape); flat < total; ++flat) {
    double value = 1;
    for (size_t t = 0; t < terms.size(); ++t) {
      int64_t at = 0;
      for (size_t d = 0; d < terms[t].size(); ++d)
        at += coord[size_t(position[int(terms[t][d]) & 127])] * termStrides[t][d];
      value *= double(inputs[t][at]);
    }
    int64_t at = 0;
    for (size_t d = 0; d < rhs.size(); ++d)
      at += coord[size_t(position[int(rhs[d]) & 127])] * outStrides[d];
    acc[size_t(at)] += value;
    nextCoordinate(coord, loopShape);
  }
  for (size_t i = 0; i < acc.size(); ++i)
    out[i] = T(acc[i]);
}

} // namespace colossal::rt::indexing

#endif // COLOSSAL_RUNTIME_TENSORINDEXING_H
