//===- RingAttention.h - attention over tokens split around a ring -*- C++ -*-===//
//
// Ring self-attention (Li et al. 2021, "Sequence Parallelism: Long Sequence
// Training from System Perspective"; Liu et al. 2023, "Ring Attention"):
// rank r of a mesh axis of P ranks holds block r of a sequence's tokens of
// the queries, keys and values. The key and value blocks, with their slice
// of a key mask, pass around the ring (rank r sends to r + 1 and receives
// from r - 1) while each rank folds every block into its queries' softmax
// online (a running maximum, denominator and weighted sum per row, in
// double), so no rank holds more than two blocks of keys. Under `causal` a
// block of keys after the rank's own is skipped (fully masked), and the
// diagonal block masks itself.
//
// The backward pass runs the forward ring again for the rows' log-sum-exp,
// then passes the key and value blocks around once more together with
// their gradients' partial sums, each rank adding its queries' part; one
// last step hands every block's gradients to the rank that holds it.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_RINGATTENTION_H
#define COLOSSAL_RUNTIME_RINGATTENTION_H

#include "colossal/runtime/kernels/HostTensor.h"

#include <string>
#include <vector>

namespace colossal::rt {

class StepCollectives;

namespace host {

/// `train.attention {ring_axis}`: this rank's rows of softmax(scale q k^T +
/// mask) v, q [batch, heads, tokens, d], k and v [batch, heads, tokens, d|dv]
/// this rank's blocks; `mask`, when given, the additive mask of this rank's
/// keys, [batch or 1, 1, 1, tokens]. `dropout` keys the whole sequence's
/// probabilities: a rank's queries and each block's keys index them by their
/// place in the whole sequence.
Tensor ringAttention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal,
                     StepCollectives &collectives, const std::string &axis, const AttentionDropout &dropout = {});

/// Its gradients for this rank's q, k and v blocks.
std::vector<Tensor> ringAttentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                      const Tensor &dOut, float scale, bool causal, StepCollectives &collectives,
                                      const std::string &axis, const AttentionDropout &dropout = {});

} // namespace host
} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_RINGATTENTION_H
