//===- AllToAllSequenceParallel.h - sequence split, heads traded --*- C++ -*-===//
//
// All-to-all sequence parallelism (DeepSpeed-Ulysses, Jacobs et al. 2023)
// over a mesh axis of its own, `sp`: every rank of the axis holds the
// whole model and its slice of each sequence's tokens, from the inputs on.
// Every op but attention computes each token on its own, so it runs on the
// rank's tokens; attention needs every token of a sequence, so its queries,
// keys and values trade the split by tokens for a split by heads
// (`train.all_to_all`), attention runs on the rank's heads over all the
// tokens, and its output trades back. The loss sums its rows and counted
// labels over the axis (`train.cross_entropy {token_axis}`), so every rank
// gets the loss of the whole sequences.
//
// The split starts at the @forward arguments whose dimension 1 is the
// sequence (token ids, labels, masks: `train.rank_slice`) and follows the
// tokens through reshapes and transposes; a reshape may merge them with
// the dimensions before (rows of [batch x tokens]) as long as they stay
// innermost. A replicated operand that broadcasts over the tokens (a
// weight, a norm's scale) enters through a copy whose gradient sums the
// ranks' parts; one that has the tokens (position embeddings, rotary
// tables) is cut to the rank's (`train.rank_slice`); an attention mask
// split by key tokens is gathered whole (`train.all_gather`).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_ALLTOALLSEQUENCEPARALLEL_H
#define COLOSSAL_PASSES_PARTITION_ALLTOALLSEQUENCEPARALLEL_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace colossal::partition {

/// The mesh axis all-to-all sequence parallelism splits the tokens over.
inline constexpr const char *kSequenceAxis = "sp";

struct AllToAllSequenceSummary {
  /// Inputs cut to the rank's tokens, attention layers whose heads are
  /// traded, all-to-alls inserted (three in and one out per attention).
  int64_t inputs = 0, attentions = 0, allToAlls = 0;
  /// Activations computed on the rank's tokens.
  int64_t splitValues = 0;
  /// Replicated operands entering through copies, cut to the rank's tokens,
  /// gathered whole (attention masks).
  int64_t copies = 0, rankSlices = 0, gathers = 0;
};

/// Applies all-to-all sequence parallelism over `ranks` ranks of axis `sp`
/// to @forward. Fails naming the op when something mixes tokens other than
/// attention (a mean over the tokens), when the tokens or an attention's
/// heads do not divide by the ranks, or when the module is already
/// partitioned.
mlir::FailureOr<AllToAllSequenceSummary> applyAllToAllSequenceParallelism(mlir::ModuleOp module, int64_t ranks);

/// The ranks of the sequence axis (1 for a module not split by tokens).
int64_t allToAllSequenceRanks(mlir::ModuleOp module);

std::unique_ptr<mlir::Pass> createAllToAllSequenceParallelPass();
void registerAllToAllSequenceParallelPass();

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_ALLTOALLSEQUENCEPARALLEL_H
