//===- Autodiff.h - reverse-mode differentiation of the train dialect -*- C++ -*-===//
//
// `train-autodiff` adds @forward_backward next to @forward: the same
// arguments, returning the loss and then the gradient of the loss with
// respect to every trainable parameter, in the module's declaration order
// (result attributes train.name = "loss" and "grad:NAME"). Each op's
// gradient comes from one rule in GradientRules.cpp; an op on the path from
// a trainable parameter to the loss without a rule is an error naming it.
// Values that do not depend on a trainable parameter (masks, indices,
// labels, shapes, integer casts) get no gradient; a parameter read more than
// once (tied weights) sums the gradients of its reads; a trainable parameter
// the loss does not depend on gets zeros. The loss gradient is seeded with
// 1, or with a last argument (tensor<f32>, train.name = "loss_scale") when
// `lossScaleArgument`: fp16 training scales its loss by a factor that
// changes from step to step.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_AUTODIFF_AUTODIFF_H
#define COLOSSAL_PASSES_AUTODIFF_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace colossal::autodiff {

/// Builds @forward_backward from @forward; diagnostics explain a failure.
mlir::FailureOr<mlir::func::FuncOp> buildForwardBackward(mlir::ModuleOp module, bool lossScaleArgument = false);


} // namespace colossal::autodiff

#endif // COLOSSAL_PASSES_AUTODIFF_AUTODIFF_H
