//===- OpCost.h - what one op costs on one rank -----------------*- C++ -*-===//
//
// One op's time on its local shard (a roofline at the cluster's rates), the
// collectives that reshard its inputs forward and their gradients backward
// (with pipeline sends, ring attention overlapped with the attention
// blocks, the vocabulary-parallel loss's sums and the grid algorithms'
// collectives), recomputation's re-runs, and what its backward pass holds
// on top of what is kept.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_OPCOST_H
#define COLOSSAL_COST_LIB_OPCOST_H

#include "EstimateContext.h"

#include <utility>
#include <vector>

namespace colossal::cost {

/// What one op costs on one rank for one microbatch.
struct OpCost {
  double forward = 0, backward = 0, forwardComm = 0, backwardComm = 0;
  /// The op's backward pass holds its outputs' gradients while it makes
  /// its activation inputs' (the transient on top of what is kept).
  double backwardWorking = 0;
  double p2p = 0;
  std::vector<CommEvent> forwardEvents, backwardEvents, recomputedEvents;
};

class OpCoster {
public:
  /// Reads the graph once: parameters' storage layouts, which values carry
  /// a gradient, each value's readers.
  explicit OpCoster(const EstimateContext &ctx);

  OpCost cost(size_t o) const;

private:
  /// An op's cost in the making: its compute, and the collectives so far.
  struct Work {
    double fraction = 0, fwd = 0, bwd = 0;
    double forwardComm = 0, backwardComm = 0;
    std::vector<CommEvent> forwardEvents, backwardEvents;
    /// Ring attention's forward steps: recomputation runs them again.
    std::vector<CommEvent> ringForward;
    double ringSeconds = 0;
  };
  /// The roofline times and the backward pass's working bytes.
  void computeTime(size_t o, Work &work, OpCost &cost) const;
  /// Every input resharded forward, its gradient back, pipeline sends.
  void reshardInputs(size_t o, Work &work, OpCost &cost) const;
  /// Collectives of the op itself: the vocabulary-parallel and sequence-
  /// split loss's sums, ring attention, Megatron-SP's second gathers, the
  /// grid algorithms'.
  void axisCollectives(size_t o, Work &work) const;

  TensorSpec layoutOf(int o, int i, bool gradient) const;
  /// Whether input `i` of op `o` pays for resharding its value (readers in
  /// the same layout share one resharding; the first pays).
  bool firstToRead(size_t o, size_t i, bool gradient) const;

  const EstimateContext &ctx;
  /// Parameters: the first consumer's layout is the storage layout.
  std::vector<int> paramOwnerOp, paramUse;
  std::vector<char> needsGradient;
  /// Each value's readers (op, input) in op order, one flat array indexed
  /// by `readerStart`.
  std::vector<int> readerStart;
  std::vector<std::pair<int, int>> readerList;
};

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_OPCOST_H
