//===- Optimizer.h - the optimizer step as an op of the IR ---------*- C++ -*-===//
//
// `train-optimizer` adds @optimizer_step next to @forward_backward: from the
// step's learning rate, update count and gradient factor, the gradients and
// the optimizer state of every trainable parameter (declaration order), one
// `train.optimizer_update` yields the new weights and state. The settings
// and the conventions of which tensors decay and take a trust ratio are
// decided here, visible in the IR, and the emitted program follows them:
//   - AdamW and SGD (torch.optim) decay every tensor and have no trust ratio;
//   - LAMB and LARS exempt tensors of rank 0 and 1 (biases, normalisation
//     weights) from weight decay; LAMB scales every tensor by its trust
//     ratio, LARS only the tensors of rank above 1.
//
// Arguments: lr, step, grad_scale, then "grad:NAME", "optimizer.m:NAME" and
// (LAMB, AdamW) "optimizer.v:NAME" per trainable parameter; results: NAME,
// then the new moments under the same names (train.name attributes).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_AUTODIFF_OPTIMIZER_H
#define COLOSSAL_PASSES_AUTODIFF_OPTIMIZER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace colossal::autodiff {

struct OptimizerOptions {
  /// lamb, adamw, sgd or lars.
  std::string kind = "lamb";
  double beta1 = 0.9, beta2 = 0.999;
  /// Negative: the kind's default (1e-6 for LAMB, 1e-8 for AdamW).
  double eps = -1.0;
  double weightDecay = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double eta = 1e-3;
};

/// Builds @optimizer_step; diagnostics name what is wrong (no
/// @forward_backward, a gradient it lacks, a setting out of range).
mlir::LogicalResult buildOptimizerStep(mlir::ModuleOp module, const OptimizerOptions &options);


} // namespace colossal::autodiff

#endif // COLOSSAL_PASSES_AUTODIFF_OPTIMIZER_H
