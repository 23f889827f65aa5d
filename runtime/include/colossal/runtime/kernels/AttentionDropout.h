//===- AttentionDropout.h - dropout on attention probabilities, in place -*- C++ -*-===//
//
// Attention under dropout keeps probability (b, h, i, j) with the mask a
// `train.dropout` over the whole [batch, heads, sq, sk] probabilities would
// draw there (Philox.h, keyed by the site, step and the element's place in
// the step's global batch), so the fused kernels need no s x s matrix and
// draw what the unfused ops draw. A rank of a tensor axis holding a slice of
// the heads indexes the whole tensor's heads. Host and device share it.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_ATTENTIONDROPOUT_H
#define COLOSSAL_RUNTIME_ATTENTIONDROPOUT_H

#include "colossal/runtime/kernels/Philox.h"

namespace colossal::rt {

struct AttentionDropout {
  /// 0: no dropout.
  float ratio = 0;
  DropoutKey key;
  /// Heads per batch row here and in the whole tensor, and the index of the
  /// first here among the whole's (a tensor rank's slice of the heads).
  int64_t heads = 1, wholeHeads = 1, headOffset = 0;

  /// The factor probability (bh, i, j) of [batch x heads, sq, sk] scores
  /// takes: 0 when dropped, 1 / (1 - ratio) when kept, 1 without dropout.
  COLOSSAL_HOST_DEVICE float factor(int64_t bh, int64_t queries, int64_t keys, int64_t i, int64_t j) const {
    if (ratio == 0)
      return 1.0f;
    int64_t head = bh / heads * wholeHeads + headOffset + bh % heads;
    uint64_t whole = uint64_t((head * queries + i) * keys + j);
    return dropoutKeeps(key.seed, key.step, key.firstIndex + whole, ratio) ? 1.0f / (1.0f - ratio) : 0.0f;
  }
};

/// Dropout of `ratio` with the masks `key` draws over the whole
/// probabilities, on slice `slice` of `slices` equal slices of their heads
/// (`heads` per batch row here).
inline AttentionDropout attentionDropout(float ratio, DropoutKey key, int64_t heads, int64_t slice = 0,
                                         int64_t slices = 1) {
  AttentionDropout dropout;
  dropout.ratio = ratio, dropout.key = key;
  dropout.heads = heads, dropout.wholeHeads = heads * slices, dropout.headOffset = heads * slice;
  return dropout;
}

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_ATTENTIONDROPOUT_H
