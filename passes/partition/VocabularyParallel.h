//===- VocabularyParallel.h - embeddings and losses split by vocabulary -*- C++ -*-===//
//
// Megatron's vocabulary parallelism over the tensor axis. A table whose rows
// are the vocabulary (an embedding looked up by token ids, an output layer
// that scores the vocabulary for a softmax cross-entropy, or one tensor that
// is both, tied) is split by rows: rank t holds rows [t V/T, (t+1) V/T).
//
// - A lookup gathers from the rank's rows only (ids stay global; those
//   outside the slice give zero rows: `train.gather {mesh_axis}`), and the
//   ranks' parts are summed (a resharding from `sum(tp)`), exactly the whole
//   lookup.
// - The output layer computes the rank's columns of the logits from its
//   replicated input (entering as copies over the axis); a bias of
//   the vocabulary and elementwise ops after it are split with them; the
//   loss takes its logits split (`train.cross_entropy {mesh_axis}`: row
//   maxima, softmax denominators and the labels' logits combined over the
//   axis). No rank holds whole logits, the largest activation of a language
//   model.
// - A vocabulary the ranks do not divide is padded with rows of zeros (the
//   loss ignores their columns; nothing reads their rows, so they stay
//   zero and the model trains as unpadded).
//
// train-autodiff then derives the backward pass: the lookups' gradients
// scatter into the rank's rows, the loss's gradient is the rank's columns,
// and the copy's gradient sums the input's partial gradients.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_VOCABULARYPARALLEL_H
#define COLOSSAL_PASSES_PARTITION_VOCABULARYPARALLEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace colossal::partition {

struct VocabularySummary {
  /// Tables split by vocabulary rows (a tied embedding and output layer
  /// count once).
  int64_t tables = 0;
  /// Their lookups and output layers.
  int64_t lookups = 0, outputLayers = 0;
  /// Parameters sliced (tables and vocabulary biases).
  int64_t splitParameters = 0;
  /// Vocabulary tables left whole, each with the reason.
  std::vector<std::string> whole;
  /// Vocabularies padded to a multiple of the ranks.
  std::vector<std::string> padded;
};

/// Token ids: integers computed from a graph input by reshapes and casts
/// alone. Position ids (constants) index tables that stay whole.
bool comesFromInput(mlir::Value indices);

/// Splits @forward's vocabulary tables over the `ranks` ranks of mesh axis
/// `axis`. A vocabulary the ranks do not divide is padded with rows of zeros
/// to a multiple of them (the loss ignores the padding columns; the weights
/// file and checkpoints hold the padded tensor); one so small that a rank
/// would hold padding only stays whole. Parameters already split are left
/// alone.
VocabularySummary splitVocabulary(mlir::ModuleOp module, mlir::func::FuncOp forward, int64_t ranks,
                                  mlir::StringAttr axis);

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_VOCABULARYPARALLEL_H
