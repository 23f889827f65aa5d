//===- Passes.td - differentiation and the optimizer step -*- tablegen -*-===//

#ifndef COLOSSAL_PASSES_AUTODIFF
#define COLOSSAL_PASSES_AUTODIFF

include "mlir/Pass/PassBase.td"

def MixedPrecisionPass : Pass<"train-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "computes @forward in bf16 or fp16 where safe, over float32 master weights";
  let description = [{
    Runs before `train-autodiff`, with PyTorch autocast's policy: contractions
    (matmul, gemm, linear, conv, einsum, attention) compute in the 16-bit type;
    softmax, norms, the loss, reductions, exp, log, pow, sqrt and reciprocal
    in float32; every other op in the widest float type of its operands.
    Parameters stay float32 and are cast where a 16-bit op reads them, so their
    gradients come back float32; @forward's results stay float32. With
    `precision=fp32` the pass changes nothing.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"bf16\"", "fp32, bf16 or fp16">,
  ];
}

def AutodiffPass : Pass<"train-autodiff", "::mlir::ModuleOp"> {
  let summary = "adds @forward_backward: the loss and the gradient of every trainable parameter";
  let description = [{
    Reverse-mode differentiation of @forward. @forward_backward takes the same
    arguments and returns the loss, then the gradient of every trainable
    parameter in declaration order (`train.name = "loss"`, `"grad:NAME"`).
    Each op's gradient comes from one rule (GradientRules.cpp); an op on a
    path from a trainable parameter to the loss without a rule is an error
    naming it. A parameter read twice (tied weights) sums the gradients of its
    reads; `dist.reshard` is differentiated into the reshard between the dual
    layouts. With `loss-scale-argument` the loss gradient is seeded with a
    last argument (fp16's dynamic loss scale) instead of 1.
  }];
  let options = [
    Option<"lossScaleArgument", "loss-scale-argument", "bool", "false",
           "Seed the loss gradient with a last argument, the loss scale">,
  ];
}

def OptimizerPass : Pass<"train-optimizer", "::mlir::ModuleOp"> {
  let summary = "adds @optimizer_step: one fused train.optimizer_update over every trainable parameter";
  let description = [{
    From the step's learning rate, update count and gradient factor, the
    gradients and the optimizer state, one `train.optimizer_update` yields the
    new weights and state. Which tensors decay and take a trust ratio is
    decided here, in the IR: AdamW and SGD decay every tensor, without a trust
    ratio; LAMB and LARS exempt tensors of rank 0 and 1 from decay, LAMB
    scales every tensor by its trust ratio, LARS those of rank above 1.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"lamb\"", "lamb, adamw, sgd or lars">,
    Option<"beta1", "beta1", "double", "0.9", "LAMB/AdamW first-moment decay">,
    Option<"beta2", "beta2", "double", "0.999", "LAMB/AdamW second-moment decay">,
    Option<"eps", "eps", "double", "-1.0", "Epsilon; negative: the kind's default">,
    Option<"weightDecay", "weight-decay", "double", "0.01", "Decoupled weight decay">,
    Option<"momentum", "momentum", "double", "0.9", "SGD/LARS momentum">,
    Option<"nesterov", "nesterov", "bool", "false", "Nesterov momentum for SGD">,
    Option<"eta", "eta", "double", "1e-3", "LARS trust coefficient">,
  ];
}

#endif // COLOSSAL_PASSES_AUTODIFF
