//===- ReferenceAttention.h - attention with any mask, by definition -*- C++ -*-===//
//
// softmax(q k^T * scale + mask) v with the full score row per query, for
// what the fused kernels do not take: an explicit mask (additive, or boolean
// where zero hides a key, broadcast to [batch..., sq, sk]), value widths
// other than the key width, and attention dropout. Products accumulate in
// double. The compiler's reference interpreter (T = double) and emitted host
// programs (T = float) share it.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_REFERENCEATTENTION_H
#define COLOSSAL_RUNTIME_REFERENCEATTENTION_H

#include "colossal/runtime/kernels/AttentionDropout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace colossal::rt {

struct ReferenceAttentionShape {
  int64_t batch = 1, queries = 0, keys = 0, headDim = 0, valueDim = 0;
  double scale = 1.0;
  bool causal = false;
  /// Dropout on the probabilities (AttentionDropout.h).
  AttentionDropout dropout;
  /// Grouped-query attention: query batch b reads key/value batch b / groups.
  int64_t groups = 1;
};

/// Where a mask broadcast to the scores [batch..., sq, sk] keeps the value
/// of score (b, i, j): batchOffsets[b] + i * queryStride + j * keyStride
/// (b the flattened batch index; a broadcast dimension's stride is 0). One
/// offset per batch, not an index per score.
struct MaskLayout {
  std::vector<int64_t> batchOffsets;
  int64_t queryStride = 0, keyStride = 0;
};

/// The layout of a row-major mask of `maskShape` (right-aligned, each
/// dimension 1 or the scores') broadcast to `scoreShape`.
inline MaskLayout maskLayout(const std::vector<int64_t> &scoreShape, const std::vector<int64_t> &maskShape) {
  size_t rank = scoreShape.size(), offset = rank - maskShape.size();
  std::vector<int64_t> strides(rank, 0);
  for (int64_t d = int64_t(maskShape.size()) - 1, stride = 1; d >= 0; --d) {
    if (maskShape[size_t(d)] != 1)
      strides[size_t(d) + offset] = stride;
    stride *= maskShape[size_t(d)];
  }
  MaskLayout layout;
  layout.queryStride = strides[rank - 2], layout.keyStride = strides[rank - 1];
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < rank; ++d)
    batch *= scoreShape[d];
  layout.batchOffsets.assign(size_t(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rest = b, at = 0;
    for (size_t d = rank - 2; d-- > 0;) {
      at += rest % scoreShape[d] * strides[d];
      rest /= scoreShape[d];
    }
    layout.batchOffsets[size_t(b)] = at;
  }
  return layout;
}

/// An optional mask (values laid out by `layout`) applying to score
/// (b, i, j).
template <typename T>
struct AttentionMask {
  const T *values = nullptr;
  const MaskLayout *layout = nullptr;
  bool boolean = false;

  T at(int64_t b, int64_t i, int64_t j) const {
    return values[layout->batchOffsets[size_t(b)] + i * layout->queryStride + j * layout->keyStride];
  }
};

namespace detail {

/// The probabilities of query row (b, i) into p (length sk); returns false
/// when every key is hidden.
template <typename T>
void attentionRow(const ReferenceAttentionShape &s, const T *q, const T *k, const AttentionMask<T> &mask, int64_t b,
                  int64_t i, std::vector<double> &p) {
  constexpr double kHidden = -std::numeric_limits<double>::infinity();
  double max = kHidden;
  for (int64_t j = 0; j < s.keys; ++j) {
    bool visible = !s.causal || j <= i + s.keys - s.queries;
    if (visible && mask.values && mask.boolean && mask.at(b, i, j) == T(0))
      visible = false;
    double score = kHidden;
    if (visible) {
      double dot = 0;
      for (int64_t c = 0; c < s.headDim; ++c)
        dot += double(q[(b * s.queries + i) * s.headDim + c]) * double(k[(b / s.groups * s.keys + j) * s.headDim + c]);
      score = dot * s.scale + (mask.values && !mask.boolean ? double(mask.at(b, i, j)) : 0.0);
    }
    p[size_t(j)] = score;
    max = std::max(max, score);
  }
  double sum = 0;
  for (double &x : p)
    sum += (x = max == kHidden ? 0.0 : std::exp(x - max));
  for (double &x : p)
    x = sum > 0 ? x / sum : 0.0;
}

} // namespace detail

template <typename T>
void referenceAttentionForward(const ReferenceAttentionShape &s, const T *q, const T *k, const T *v,
                               const AttentionMask<T> &mask, T *out) {
  std::vector<double> p(static_cast<size_t>(s.keys)), acc(static_cast<size_t>(s.valueDim));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.queries; ++i) {
      detail::attentionRow(s, q, k, mask, b, i, p);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < s.keys; ++j) {
        double weight = p[size_t(j)] * s.dropout.factor(b, s.queries, s.keys, i, j);
        for (int64_t c = 0; c < s.valueDim; ++c)
          acc[size_t(c)] += weight * double(v[(b / s.groups * s.keys + j) * s.valueDim + c]);
      }
      for (int64_t c = 0; c < s.valueDim; ++c)
        out[(b * s.queries + i) * s.valueDim + c] = T(acc[size_t(c)]);
    }
}

/// Gradients; dq, dk and dv are zeroed by the caller.
template <typename T>
void referenceAttentionBackward(const ReferenceAttentionShape &s, const T *q, const T *k, const T *v,
                                const AttentionMask<T> &mask, const T *dOut, T *dq, T *dk, T *dv) {
  std::vector<double> p(static_cast<size_t>(s.keys)), dp(static_cast<size_t>(s.keys));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.queries; ++i) {
      detail::attentionRow(s, q, k, mask, b, i, p);
      const int64_t kv = b / s.groups;
      const T *dO = dOut + (b * s.queries + i) * s.valueDim;
      double rowDot = 0;
      for (int64_t j = 0; j < s.keys; ++j) {
        double g = 0, factor = s.dropout.factor(b, s.queries, s.keys, i, j);
        for (int64_t c = 0; c < s.valueDim; ++c)
          g += double(dO[c]) * double(v[(kv * s.keys + j) * s.valueDim + c]);
        dp[size_t(j)] = factor * g;
        rowDot += p[size_t(j)] * dp[size_t(j)];
        for (int64_t c = 0; c < s.valueDim; ++c)
          dv[(kv * s.keys + j) * s.valueDim + c] += T(p[size_t(j)] * factor * double(dO[c]));
      }
      for (int64_t j = 0; j < s.keys; ++j) {
        double ds = p[size_t(j)] * (dp[size_t(j)] - rowDot) * s.scale;
        for (int64_t c = 0; c < s.headDim; ++c) {
          dq[(b * s.queries + i) * s.headDim + c] += T(ds * double(k[(kv * s.keys + j) * s.headDim + c]));
          dk[(kv * s.keys + j) * s.headDim + c] += T(ds * double(q[(b * s.queries + i) * s.headDim + c]));
        }
      }
    }
}

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_REFERENCEATTENTION_H
