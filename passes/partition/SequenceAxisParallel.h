//===- SequenceAxisParallel.h - sequences split over their own axis -*- C++ -*-===//
//
// Sequence parallelism over a mesh axis of its own, `sp`: every rank of the
// axis holds the whole model and its slice of each sequence's tokens, from
// the inputs on. Every op but attention computes each token on its own, so
// it runs on the rank's tokens; attention needs every token of a sequence,
// and the two algorithms differ there:
//
// - all-to-all (DeepSpeed-Ulysses, Jacobs et al. 2023): queries, keys and
//   values trade the split by tokens for a split by heads (a resharding
//   `[-, -, sp, -] -> [-, sp, -, -]`, an all-to-all), attention runs on the
//   rank's heads over all the tokens, and its output trades back;
// - ring (Li et al. 2021; Liu et al. 2023): attention stays on the rank's
//   queries while the key and value blocks pass around the ring of ranks
//   (`train.attention {ring_axis}`, runtime RingAttention.h), folded into
//   each row's softmax online; no rank holds a whole sequence's keys.
//
// The loss sums its rows and counted labels over the axis
// (`train.cross_entropy {token_axis}`), so every rank gets the loss of the
// whole sequences.
//
// The split starts at the @forward arguments whose dimension 1 is the
// sequence (token ids, labels, masks: resharded from whole to split, a local
// slice) and follows the
// tokens through reshapes and transposes; a reshape may merge them with
// the dimensions before (rows of [batch x tokens]) as long as they stay
// innermost. A replicated operand that broadcasts over the tokens (a
// weight, a norm's scale) enters through a copy whose gradient sums the
// ranks' parts; one that has the tokens (position embeddings, rotary
// tables) is cut to the rank's the same way. An attention mask split by key
// tokens is gathered whole for all-to-all (resharded to copies) and travels
// with its keys around the ring. The reshardings become collectives after
// differentiation (Resharding.h).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_SEQUENCEAXISPARALLEL_H
#define COLOSSAL_PASSES_PARTITION_SEQUENCEAXISPARALLEL_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <optional>

namespace colossal::partition {

/// The mesh axis sequence parallelism splits the tokens over.
inline constexpr const char *kSequenceAxis = "sp";

/// How attention sees every token of a sequence split over the ranks.
enum class SequenceAlgorithm { AllToAll, Ring };

/// "all-to-all" or "ring", as `--strategy sp_mode` and the module's
/// `train.sequence_parallel` spell them.
const char *nameOf(SequenceAlgorithm algorithm);
std::optional<SequenceAlgorithm> parseSequenceAlgorithm(llvm::StringRef name);

struct SequenceAxisSummary {
  /// Inputs cut to the rank's tokens, attention layers rewritten,
  /// all-to-alls inserted (three in and one out per attention).
  int64_t inputs = 0, attentions = 0, allToAlls = 0;
  /// Activations computed on the rank's tokens.
  int64_t splitValues = 0;
  /// Replicated operands entering through copies, cut to the rank's tokens,
  /// gathered whole (attention masks, all-to-all).
  int64_t copies = 0, rankSlices = 0, gathers = 0;
};

/// Applies sequence parallelism with `algorithm` over `ranks` ranks of axis
/// `sp` to @forward. Fails naming the op when something mixes tokens other
/// than attention (a mean over the tokens), when the tokens (or, for
/// all-to-all, an attention's heads) do not divide by the ranks, or when
/// the module is already partitioned.
mlir::FailureOr<SequenceAxisSummary> applySequenceAxisParallelism(mlir::ModuleOp module, int64_t ranks,
                                                                  SequenceAlgorithm algorithm);


} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_SEQUENCEAXISPARALLEL_H
