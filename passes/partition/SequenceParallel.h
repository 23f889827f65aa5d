//===- SequenceParallel.h - Megatron's sequence parallelism -------*- C++ -*-===//
//
// Megatron-LM's sequence parallelism (Korthikanti et al. 2022) on a module
// already split by tensor parallelism (TensorParallel.h): outside the split
// blocks, what every tensor rank used to compute whole (layer norms,
// residual adds, dropout, biases added after a block) is computed on the
// rank's slice of the tokens instead, so those activations take 1/T of the
// memory. Only the layouts of tensor parallelism's reshardings change
// (Resharding.h): each block's entry reads copies of a value split by tokens
// (`[-, tp, -] -> [-, -, -] copies(tp)`, lowered to an all-gather), each sum
// at a block's (or a vocabulary lookup's) exit is split by tokens
// (`[-, -, -] sum(tp) -> [-, tp, -]`, a reduce-scatter). A ring all-reduce
// is a reduce-scatter then an all-gather, so the traffic is plain tensor
// parallelism's; the activations between are smaller.
//
// The token-split region grows forward from the reduce-scatters through
// per-token ops (elementwise ops, norms over the hidden axis, linear layers
// on the hidden axis, dropout, whose mask is the rank's slice of the whole
// tensor's, so the run draws the masks one rank would). A replicated operand that
// broadcasts over the tokens (a norm's scale, a bias) enters through a copy
// (its gradient, a sum over each rank's tokens, is all-reduced); one that
// has the tokens (a position embedding) is cut to the rank's tokens (a
// resharding from whole to split, a local slice). The split dimension is the one before the hidden
// one (the sequence of [batch, sequence, hidden]).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_SEQUENCEPARALLEL_H
#define COLOSSAL_PASSES_PARTITION_SEQUENCEPARALLEL_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace colossal::partition {

struct SequenceParallelSummary {
  /// Collectives rewritten: block entries gathered, exits scattered.
  int64_t gathers = 0, scatters = 0;
  /// Activations computed on the rank's tokens.
  int64_t splitValues = 0;
  /// Replicated operands cut to the rank's tokens.
  int64_t rankSlices = 0;
};

/// Applies sequence parallelism over the tensor axis to @forward of a
/// module partitioned by `partitionTensorParallel`. Fails naming the op when
/// something reads the token-split activations that is not per token (a
/// reshape that merges the tokens, a reduction), or when
/// the tokens do not divide by the ranks.
mlir::FailureOr<SequenceParallelSummary> applySequenceParallelism(mlir::ModuleOp module);


} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_SEQUENCEPARALLEL_H
