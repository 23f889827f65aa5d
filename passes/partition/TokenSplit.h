//===- TokenSplit.h - which ops compute each token on its own ----*- C++ -*-===//
//
// What both sequence-parallel passes ask of an op reading activations split
// by tokens: can each rank compute its tokens' part of the result from its
// tokens alone? Megatron's (SequenceParallel.h) runs the ops between
// tensor-parallel blocks that way, the all-to-all and ring ones
// (SequenceAxisParallel.h) every op but attention.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_TOKENSPLIT_H
#define COLOSSAL_PASSES_PARTITION_TOKENSPLIT_H

#include "mlir/IR/Operation.h"

namespace colossal::partition {

/// Whether `op` computes each token from that token alone when its
/// token-split operands are split along dimension `dim` of its result:
/// elementwise ops, norms and softmaxes over another axis, linear layers
/// on the last axis, slices, splits and concatenations along another axis,
/// dropout (whose mask a split run must draw as the rank's slice of the
/// whole tensor's).
bool isPerToken(mlir::Operation *op, int64_t dim);

/// Retargets a per-token op to the rank's tokens where its attributes name
/// the extent of the tokens (a slice whole along them: its limit becomes the
/// rank's `tokens`).
void narrowToTokens(mlir::Operation *op, int64_t dim, int64_t tokens);

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_TOKENSPLIT_H
