//===- OptimizerStep.cpp - one optimizer step over a model's tensors -------===//

#include "colossal/runtime/train/OptimizerStep.h"

#include <cmath>

namespace colossal::rt {

const char *nameOf(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::Lamb: return "lamb";
  case OptimizerKind::AdamW: return "adamw";
  case OptimizerKind::Sgd: return "sgd";
  case OptimizerKind::Lars: return "lars";
  }
  return "?";
}

int momentsOf(OptimizerKind kind) { return kind == OptimizerKind::Lamb || kind == OptimizerKind::AdamW ? 2 : 1; }

std::optional<OptimizerKind> parseOptimizer(const std::string &name) {
  for (OptimizerKind k : {OptimizerKind::Lamb, OptimizerKind::AdamW, OptimizerKind::Sgd, OptimizerKind::Lars})
    if (name == nameOf(k))
      return k;
  return std::nullopt;
}

TensorConventions conventionsOf(OptimizerKind kind, size_t rank) {
  bool matrix = rank > 1;
  TensorConventions c;
  // torch.optim decays every tensor; the layer-wise optimizers exempt biases
  // and normalisation weights. LAMB's kernels scale every tensor by its
  // trust ratio; LARS's only those it marks.
  c.decay = kind == OptimizerKind::AdamW || kind == OptimizerKind::Sgd || matrix;
  c.trustRatio = kind == OptimizerKind::Lamb || (kind == OptimizerKind::Lars && matrix);
  return c;
}

void applyConventions(const TensorConventions &conventions, OptimizerTensor &tensor) {
  tensor.decay = conventions.decay;
  tensor.trustRatio = conventions.trustRatio;
}

std::vector<float> tensorSquares(const std::vector<OptimizerTensor> &tensors, const CompleteSquares &complete) {
  std::vector<float> squares(2 * tensors.size());
  cpu::tensorSquares(Stream{}, tensors.data(), int64_t(tensors.size()), 1.0f, squares.data());
  if (complete)
    complete(squares);
  return squares;
}

double gradientNorm(const std::vector<OptimizerTensor> &tensors, const CompleteSquares &complete) {
  std::vector<float> squares = tensorSquares(tensors, complete);
  double sum = 0;
  for (size_t t = 0; t < tensors.size(); ++t)
    sum += squares[2 * t + 1];
  return std::sqrt(sum);
}

AdamSettings adamSettings(const OptimizerConfig &config, double lr, int64_t step) {
  AdamSettings adam;
  adam.lr = float(lr), adam.beta1 = float(config.beta1), adam.beta2 = float(config.beta2);
  adam.eps = float(config.eps), adam.weightDecay = float(config.weightDecay), adam.step = step;
  return adam;
}

SgdSettings sgdSettings(const OptimizerConfig &config, double lr, int64_t step) {
  SgdSettings sgd;
  sgd.lr = float(lr), sgd.momentum = float(config.momentum), sgd.weightDecay = float(config.weightDecay);
  sgd.nesterov = config.nesterov, sgd.step = step;
  return sgd;
}

LarsSettings larsSettings(const OptimizerConfig &config, double lr) {
  LarsSettings lars;
  lars.lr = float(lr), lars.momentum = float(config.momentum), lars.eta = float(config.eta);
  lars.weightDecay = float(config.weightDecay);
  return lars;
}

void optimizerStep(const OptimizerConfig &config, double lr, int64_t step, std::vector<OptimizerTensor> &tensors,
                   float gradScale, const CompleteSquares &complete) {
  const Stream host{};
  int64_t count = int64_t(tensors.size());
  std::vector<float> squares(2 * tensors.size());
  switch (config.kind) {
  case OptimizerKind::Sgd:
    cpu::sgdStep(host, tensors.data(), count, sgdSettings(config, lr, step), gradScale);
    return;
  case OptimizerKind::AdamW:
    cpu::adamwStep(host, tensors.data(), count, adamSettings(config, lr, step), gradScale);
    return;
  case OptimizerKind::Lamb:
    cpu::lambStage1(host, tensors.data(), count, adamSettings(config, lr, step), gradScale, squares.data());
    if (complete)
      complete(squares);
    cpu::lambStage2(host, tensors.data(), count, float(lr), squares.data());
    return;
  case OptimizerKind::Lars:
    cpu::tensorSquares(host, tensors.data(), count, gradScale, squares.data());
    if (complete)
      complete(squares);
    cpu::larsStep(host, tensors.data(), count, larsSettings(config, lr), gradScale, squares.data());
    return;
  }
}

} // namespace colossal::rt
