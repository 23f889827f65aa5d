//===- TensorParallel.h - Megatron's 1D tensor parallelism -------*- C++ -*-===//
//
// Splits the column-then-row pairs of linear layers of @forward over the
// ranks of the mesh axis "tp" (Shoeybi et al. 2019, Megatron-LM): the first
// linear's weight (and bias) by output columns, so each rank computes a
// slice of the hidden features, the elementwise ops between on that slice,
// and the second linear's weight by input rows, so each rank's product is a
// partial sum of the output. Two reshardings make it exact (Resharding.h):
// where a replicated value enters the split region it becomes copies over
// the axis (`[...] -> [...] copies(tp)`: the identity; its gradient is
// all-reduced), and the partial output is summed (`[...] sum(tp) -> [...]`:
// an all-reduce; its gradient passes through); the second linear's bias is
// added after the sum. An MLP block (linear, GELU, linear), a SwiGLU block
// (two column linears of one input multiplied, then a row linear) and an
// attention block with separate query, key and value projections (split by
// heads: the split follows the values between through reshapes to heads,
// transposes, elementwise ops, slices, concatenations and the attention op,
// each along one dimension; operands of size 1 there, like rotary tables and
// padding masks, are replicated and enter through copies) are such pairs;
// the vocabulary tables are split by rows (VocabularyParallel.h); the rest
// of the model stays replicated (a fused QKV projection among it).
//
// Each split parameter's type becomes its slice and it records `split_dim`
// and `splits` (the model file keeps the whole tensor; rank t of the axis
// loads slice t). Run on @forward before differentiation: train-autodiff
// then derives the backward pass's reshardings (the dual layouts), and
// train-lower-resharding turns both into collectives.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_TENSORPARALLEL_H
#define COLOSSAL_PASSES_PARTITION_TENSORPARALLEL_H

#include "passes/partition/VocabularyParallel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace colossal::partition {

/// The mesh axis tensor parallelism splits over.
inline constexpr const char *kTensorAxis = "tp";

struct TensorParallelSummary {
  /// Column-then-row pairs split.
  int64_t pairs = 0;
  /// Parameters that became slices.
  int64_t splitParameters = 0;
  /// The vocabulary tables split (VocabularyParallel.h).
  VocabularySummary vocabulary;
};

/// Splits every column-then-row pair of linear layers of @forward over
/// `ranks` ranks, and its vocabulary tables (VocabularyParallel.h). Fails with a diagnostic
/// naming the op when a pair's hidden width does not divide by `ranks`, or
/// when @forward has nothing to split. Records `train.tensor_parallel =
/// ranks` on the module.
mlir::FailureOr<TensorParallelSummary> partitionTensorParallel(mlir::ModuleOp module, int64_t ranks);

/// The ranks of the tensor axis the module was partitioned for (1 if none).
int64_t tensorParallelRanks(mlir::ModuleOp module);


} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_TENSORPARALLEL_H
