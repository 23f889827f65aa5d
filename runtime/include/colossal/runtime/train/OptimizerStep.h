//===- OptimizerStep.h - one optimizer step over a model's tensors -*- C++ -*-===//
//
// The choice of optimizer, its settings and the conventions of which tensors
// decay, as one step over the fused host kernels. LAMB is the default (the
// large-batch optimizer); AdamW and SGD follow torch.optim (every tensor
// decays); LAMB and LARS exclude rank-1 tensors (biases, normalisation
// weights) from weight decay, and LARS gives them no trust ratio.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_OPTIMIZERSTEP_H
#define COLOSSAL_RUNTIME_OPTIMIZERSTEP_H

#include "colossal/runtime/kernels/Optimizers.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt {

enum class OptimizerKind { Lamb, AdamW, Sgd, Lars };
const char *nameOf(OptimizerKind kind);
/// LAMB and AdamW keep two moments per weight; SGD and LARS one (the
/// momentum buffer), so their OptimizerTensor::v may be null. LAMB's update
/// between its stages may overwrite the gradient (read first, element by
/// element), so no optimizer needs a buffer beyond its moments.
int momentsOf(OptimizerKind kind);
std::optional<OptimizerKind> parseOptimizer(const std::string &name);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Lamb;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-6;
  double weightDecay = 0.01;
  /// SGD and LARS.
  double momentum = 0.9;
  bool nesterov = false;
  /// LARS's trust coefficient.
  double eta = 1e-3;
  /// Clip the global gradient norm to this (0: no clipping).
  double clipGradNorm = 0;
};

/// Whether a tensor takes weight decay and a trust ratio. A compiled
/// program carries them per tensor (train.optimizer_update's `decay` and
/// `trust_ratio`); `conventionsOf` gives the defaults by tensor rank, the
/// rules the compiler applies too.
struct TensorConventions {
  bool decay = true;
  bool trustRatio = true;
};
TensorConventions conventionsOf(OptimizerKind kind, size_t rank);

/// Sets `tensor.decay` and `tensor.trustRatio`.
void applyConventions(const TensorConventions &conventions, OptimizerTensor &tensor);

/// The kernels' settings for `config` at learning rate `lr` and 1-based
/// `step`.
AdamSettings adamSettings(const OptimizerConfig &config, double lr, int64_t step);
SgdSettings sgdSettings(const OptimizerConfig &config, double lr, int64_t step);
LarsSettings larsSettings(const OptimizerConfig &config, double lr);

/// Completes per-tensor sums of squares (two per tensor, in order) that
/// each rank computed over its own slice of some tensors: tensor
/// parallelism sums the split tensors' over the tensor axis, so the norms
/// are the whole tensors'. Empty: every tensor is whole.
using CompleteSquares = std::function<void(std::vector<float> &squares)>;

/// The global norm's sum of squared gradients from each tensor's completed
/// squares (two per tensor, the gradient's second): a pipeline counts a
/// weight that k stages hold 1/k on each and sums over its axis. Empty: the
/// plain sum.
using TotalSquares = std::function<double(const std::vector<float> &squares)>;

/// Each tensor's squared gradient and weight norms (two per tensor, the
/// gradient's second), completed by `complete`.
std::vector<float> tensorSquares(const std::vector<OptimizerTensor> &tensors, const CompleteSquares &complete = {});

/// The global gradient norm (before clipping) of `tensors`.
double gradientNorm(const std::vector<OptimizerTensor> &tensors, const CompleteSquares &complete = {});

/// One step (1-based `step`, learning rate `lr`) on the host; gradients are
/// first scaled by `gradScale` (clipping, loss-scale removal). LAMB's and
/// LARS's per-tensor norms go through `complete`.
void optimizerStep(const OptimizerConfig &config, double lr, int64_t step, std::vector<OptimizerTensor> &tensors,
                   float gradScale = 1.0f, const CompleteSquares &complete = {});

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_OPTIMIZERSTEP_H
