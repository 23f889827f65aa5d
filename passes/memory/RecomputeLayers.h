//===- RecomputeLayers.h - re-running each layer's forward in the backward -*- C++ -*-===//
//
// Full recomputation (activation checkpointing per layer, Chen et al. 2016;
// Megatron-LM's "full" granularity): the backward pass of
// @forward_backward keeps only each layer's checkpoints, the values that
// leave the layer (its output, the residual stream), and re-runs the rest of
// the layer's forward ops just before the layer's backward needs them. Every
// value made inside a layer then lives from its definition to its last
// forward use, and again from its recomputation to its last backward use,
// so the step holds the checkpoints of every layer plus one layer's
// internals instead of every layer's internals.
//
// The layers are the repeated blocks LayerDetection.h finds in @forward (the
// cost model's own layers); @forward_backward's forward pass is @forward op
// for op. The re-run ops are the same ops on the same inputs, so the
// gradients are bit for bit those without recomputation.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_MEMORY_RECOMPUTELAYERS_H
#define COLOSSAL_PASSES_MEMORY_RECOMPUTELAYERS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace colossal::memory {

enum class Granularity {
  /// Everything but the layer's checkpoints runs again.
  Full,
  /// Everything but the checkpoints and the contractions' results.
  Selective,
};

/// What recomputation did: the layers found and the forward ops re-run.
struct RecomputeSummary {
  int64_t layers = 0;
  int64_t recomputedOps = 0;
};

/// Re-runs each layer's internal forward ops (all of them, or under
/// `Selective` those that are not contractions) in the backward of
/// @forward_backward. Fails with a diagnostic when the module has no
/// @forward and @forward_backward, or when no repeated layers are found.
mlir::FailureOr<RecomputeSummary> recomputeLayers(mlir::ModuleOp module,
                                                  Granularity granularity = Granularity::Full);


} // namespace colossal::memory

#endif // COLOSSAL_PASSES_MEMORY_RECOMPUTELAYERS_H
