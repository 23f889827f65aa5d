//===- CrossEntropy.cpp - host cross-entropy and embedding ----------------===//

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace colossal::rt::cpu {

namespace {
void requireLabel(int64_t label, int64_t row, int64_t vocab, int64_t ignoreIndex, const char *what) {
  if (label != ignoreIndex && (label < 0 || label >= vocab))
    fail(what, "row " + std::to_string(row) + " has label " + std::to_string(label) +
                   ", outside the vocabulary of " + std::to_string(vocab));
}
} // namespace

void crossEntropyForward(Stream, const float *logits, const int64_t *labels, float *loss, float *lse,
                         int64_t rows, int64_t vocab, int64_t ignoreIndex) {
  for (int64_t r = 0; r < rows; ++r) {
    requireLabel(labels[r], r, vocab, ignoreIndex, "cross_entropy");
    const float *x = logits + r * vocab;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < vocab; ++c)
      max = std::max(max, x[c]);
    double sum = 0;
    for (int64_t c = 0; c < vocab; ++c)
      sum += std::exp(double(x[c]) - max);
    double rowLse = max + std::log(sum);
    lse[r] = float(rowLse);
    loss[r] = labels[r] == ignoreIndex ? 0.0f : float(rowLse - x[labels[r]]);
  }
}

void crossEntropyBackward(Stream, const float *logits, const int64_t *labels, const float *lse,
                          const float *dloss, float *dlogits, int64_t rows, int64_t vocab, int64_t ignoreIndex) {
  for (int64_t r = 0; r < rows; ++r) {
    float *out = dlogits + r * vocab;
    if (labels[r] == ignoreIndex) {
      std::fill(out, out + vocab, 0.0f);
      continue;
    }
    requireLabel(labels[r], r, vocab, ignoreIndex, "cross_entropy backward");
    const float *x = logits + r * vocab;
    for (int64_t c = 0; c < vocab; ++c)
      out[c] = float(std::exp(double(x[c]) - lse[r])) * dloss[r];
    out[labels[r]] -= dloss[r];
  }
}

void embeddingForward(Stream, const float *table, const int64_t *ids, float *out, int64_t tokens, int64_t vocab,
                      int64_t dim) {
  for (int64_t t = 0; t < tokens; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab)
      fail("embedding", "token " + std::to_string(t) + " has id " + std::to_string(ids[t]) +
                            ", outside the table of " + std::to_string(vocab) + " rows");
    std::copy(table + ids[t] * dim, table + (ids[t] + 1) * dim, out + t * dim);
  }
}

void embeddingBackward(Stream, const float *dout, const int64_t *ids, float *dtable, int64_t tokens,
                       int64_t vocab, int64_t dim) {
  for (int64_t t = 0; t < tokens; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab)
      fail("embedding backward", "token " + std::to_string(t) + " has id " + std::to_string(ids[t]) +
                                     ", outside the table of " + std::to_string(vocab) + " rows");
    float *row = dtable + ids[t] * dim;
    for (int64_t d = 0; d < dim; ++d)
      row[d] += dout[t * dim + d];
  }
}

} // namespace colossal::rt::cpu
