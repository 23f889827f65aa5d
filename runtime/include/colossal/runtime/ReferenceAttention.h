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

#include "colossal/runtime/Philox.h"

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
  /// Attention dropout (Philox with seed 0, as the interpreter's).
  double dropout = 0.0;
};

/// An optional mask: mask[index[(b * sq + i) * sk + j]] applies to score
/// (b, i, j).
template <typename T>
struct AttentionMask {
  const T *values = nullptr;
  const int64_t *index = nullptr;
  bool boolean = false;
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
    int64_t at = (b * s.queries + i) * s.keys + j;
    bool visible = !s.causal || j <= i + s.keys - s.queries;
    if (visible && mask.values && mask.boolean && mask.values[mask.index[at]] == T(0))
      visible = false;
    double score = kHidden;
    if (visible) {
      double dot = 0;
      for (int64_t c = 0; c < s.headDim; ++c)
        dot += double(q[(b * s.queries + i) * s.headDim + c]) * double(k[(b * s.keys + j) * s.headDim + c]);
      score = dot * s.scale + (mask.values && !mask.boolean ? double(mask.values[mask.index[at]]) : 0.0);
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
        double weight = p[size_t(j)];
        if (s.dropout > 0)
          weight = dropoutKeeps(0, 0, uint64_t((b * s.queries + i) * s.keys + j), float(s.dropout))
                       ? weight / (1 - s.dropout)
                       : 0.0;
        for (int64_t c = 0; c < s.valueDim; ++c)
          acc[size_t(c)] += weight * double(v[(b * s.keys + j) * s.valueDim + c]);
      }
      for (int64_t c = 0; c < s.valueDim; ++c)
        out[(b * s.queries + i) * s.valueDim + c] = T(acc[size_t(c)]);
    }
}

/// Gradients without dropout; dq, dk and dv are zeroed by the caller.
template <typename T>
void referenceAttentionBackward(const ReferenceAttentionShape &s, const T *q, const T *k, const T *v,
                                const AttentionMask<T> &mask, const T *dOut, T *dq, T *dk, T *dv) {
  std::vector<double> p(static_cast<size_t>(s.keys)), dp(static_cast<size_t>(s.keys));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.queries; ++i) {
      detail::attentionRow(s, q, k, mask, b, i, p);
      const T *dO = dOut + (b * s.queries + i) * s.valueDim;
      double rowDot = 0;
      for (int64_t j = 0; j < s.keys; ++j) {
        double g = 0;
        for (int64_t c = 0; c < s.valueDim; ++c)
          g += double(dO[c]) * double(v[(b * s.keys + j) * s.valueDim + c]);
        dp[size_t(j)] = g;
        rowDot += p[size_t(j)] * g;
        for (int64_t c = 0; c < s.valueDim; ++c)
          dv[(b * s.keys + j) * s.valueDim + c] += T(p[size_t(j)] * double(dO[c]));
      }
      for (int64_t j = 0; j < s.keys; ++j) {
        double ds = p[size_t(j)] * (dp[size_t(j)] - rowDot) * s.scale;
        for (int64_t c = 0; c < s.headDim; ++c) {
          dq[(b * s.queries + i) * s.headDim + c] += T(ds * double(k[(b * s.keys + j) * s.headDim + c]));
          dk[(b * s.keys + j) * s.headDim + c] += T(ds * double(q[(b * s.queries + i) * s.headDim + c]));
        }
      }
    }
}

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_REFERENCEATTENTION_H
