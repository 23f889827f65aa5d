//===- Attention.cpp - host attention, blocked with an online softmax -----===//
//
// Keys are visited in blocks; each query row keeps a running maximum, a
// running sum of exponentials and an unnormalised output (Milakov and
// Gimelshein's online softmax, as FlashAttention uses), so memory stays
// O(block x head_dim) per row instead of O(queries x keys). The backward pass
// recomputes probabilities from the saved log-sum-exp.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/kernels/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace colossal::rt::cpu {

namespace {

constexpr int64_t kKeyBlock = 64;

/// The last key (exclusive) query i may see.
int64_t visibleKeys(const AttentionShape &s, int64_t i) {
  if (!s.causal)
    return s.keys;
  int64_t last = s.queryOffset + i - s.keyOffset; // index of the last visible key
  return std::clamp<int64_t>(last + 1, 0, s.keys);
}

float dot(const float *a, const float *b, int64_t n) {
  float sum = 0;
  for (int64_t d = 0; d < n; ++d)
    sum += a[d] * b[d];
  return sum;
}

} // namespace

void attentionForward(Stream, const AttentionShape &s, const float *q, const float *k, const float *v,
                      float *o, float *lse) {
  const int64_t D = s.headDim;
  std::vector<float> scores(kKeyBlock);
  std::vector<double> accumulator(static_cast<size_t>(D));
  for (int64_t bh = 0; bh < s.batchHeads; ++bh) {
    const int64_t kv = bh / s.groups;
    const float *qb = q + bh * s.queries * D, *kb = k + kv * s.keys * D, *vb = v + kv * s.keys * D;
    for (int64_t i = 0; i < s.queries; ++i) {
      const float *qi = qb + i * D;
      int64_t visible = visibleKeys(s, i);
      double runningMax = -std::numeric_limits<double>::infinity(), runningSum = 0;
      std::fill(accumulator.begin(), accumulator.end(), 0.0);
      for (int64_t j0 = 0; j0 < visible; j0 += kKeyBlock) {
        int64_t j1 = std::min(visible, j0 + kKeyBlock);
        double blockMax = runningMax;
        for (int64_t j = j0; j < j1; ++j) {
          scores[size_t(j - j0)] = dot(qi, kb + j * D, D) * s.scale;
          blockMax = std::max(blockMax, double(scores[size_t(j - j0)]));
        }
        double correction = std::exp(runningMax - blockMax);
        runningSum *= correction;
        for (double &a : accumulator)
          a *= correction;
        for (int64_t j = j0; j < j1; ++j) {
          double p = std::exp(scores[size_t(j - j0)] - blockMax);
          runningSum += p;
          // Dropout weighs the value, not the softmax's denominator.
          double weight = p * s.dropout.factor(bh, s.queries, s.keys, i, j);
          const float *vj = vb + j * D;
          for (int64_t d = 0; d < D; ++d)
            accumulator[size_t(d)] += weight * vj[d];
        }
        runningMax = blockMax;
      }
      float *oi = o + (bh * s.queries + i) * D;
      if (visible == 0) {
        std::fill(oi, oi + D, 0.0f);
        lse[bh * s.queries + i] = -std::numeric_limits<float>::infinity();
        continue;
      }
      for (int64_t d = 0; d < D; ++d)
        oi[d] = float(accumulator[size_t(d)] / runningSum);
      lse[bh * s.queries + i] = float(runningMax + std::log(runningSum));
    }
  }
}

void attentionBackward(Stream, const AttentionShape &s, const float *q, const float *k, const float *v,
                       const float *o, const float *dO, const float *lse, float *dq, float *dk, float *dv) {
  const int64_t D = s.headDim;
  const int64_t keyRows = s.batchHeads / s.groups * s.keys;
  std::fill(dk, dk + keyRows * D, 0.0f);
  std::fill(dv, dv + keyRows * D, 0.0f);
  std::vector<double> dqRow(static_cast<size_t>(D));
  for (int64_t bh = 0; bh < s.batchHeads; ++bh) {
    // A group's query heads add into their shared key/value head in order.
    const int64_t kv = bh / s.groups;
    const float *qb = q + bh * s.queries * D, *kb = k + kv * s.keys * D, *vb = v + kv * s.keys * D;
    float *dkb = dk + kv * s.keys * D, *dvb = dv + kv * s.keys * D;
    for (int64_t i = 0; i < s.queries; ++i) {
      const float *qi = qb + i * D, *oi = o + (bh * s.queries + i) * D, *doi = dO + (bh * s.queries + i) * D;
      float *dqi = dq + (bh * s.queries + i) * D;
      std::fill(dqRow.begin(), dqRow.end(), 0.0);
      int64_t visible = visibleKeys(s, i);
      double rowLse = lse[bh * s.queries + i];
      // D_i = dO_i . O_i is the softmax backward's row term.
      double di = 0;
      for (int64_t d = 0; d < D; ++d)
        di += double(doi[d]) * oi[d];
      for (int64_t j = 0; j < visible; ++j) {
        const float *kj = kb + j * D, *vj = vb + j * D;
        double p = std::exp(double(dot(qi, kj, D)) * s.scale - rowLse);
        double factor = s.dropout.factor(bh, s.queries, s.keys, i, j);
        // The dropped probabilities' gradient, then the softmax's (D_i is
        // dO . O with O under dropout: the row's sum of p * its gradient).
        double dp = factor * double(dot(doi, vj, D));
        double ds = p * (dp - di) * s.scale;
        for (int64_t d = 0; d < D; ++d) {
          dqRow[size_t(d)] += ds * kj[d];
          dkb[j * D + d] += float(ds * qi[d]);
          dvb[j * D + d] += float(p * factor * doi[d]);
        }
      }
      for (int64_t d = 0; d < D; ++d)
        dqi[d] = float(dqRow[size_t(d)]);
    }
  }
}

} // namespace colossal::rt::cpu
