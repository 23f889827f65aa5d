//===- Optimizers.h - fused multi-tensor optimizer steps -----------*- C++ -*-===//
//
// One call updates a whole list of tensors (Apex's multi-tensor apply), on
// the host or the device, with the same signatures (see Kernels.h).
//
// Norms are split from updates so they can be completed across shards: a
// ZeRO or tensor-parallel rank holds part of each tensor, computes partial
// sums of squares, all-reduces them, and only then applies the step. LAMB is
// the two-stage form of REFERENCE.md:
//
//   lambStage1: m, v and the update u = m^ / (sqrt(v^) + eps) + wd w, plus
//               per-tensor sums of squares of w and u (partial on a shard)
//   (all-reduce the sums over the shards when sharded)
//   lambStage2: w -= lr * (||w|| / ||u||) * u   (ratio 1 when a norm is 0)
//
// AdamW and SGD follow PyTorch's torch.optim semantics operation by
// operation (so fp32 trajectories agree to rounding); LAMB and LARS follow
// the papers as test/fixtures/optimizers.py writes them. `gradScale`
// multiplies each gradient before use: 1 / loss scale times the clipping
// factor from the global gradient norm.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_OPTIMIZERS_H
#define COLOSSAL_RUNTIME_OPTIMIZERS_H

#include "colossal/runtime/kernels/Kernels.h"

namespace colossal::rt {

struct OptimizerTensor {
  float *param = nullptr;
  float *grad = nullptr;
  /// First moment (Adam, LAMB) or momentum buffer (SGD, LARS).
  float *m = nullptr;
  /// Second moment (Adam, LAMB).
  float *v = nullptr;
  /// LAMB's update between the stages; may be `grad` itself.
  float *update = nullptr;
  int64_t n = 0;
  /// Weight decay applies (biases and normalisation weights usually not).
  bool decay = true;
  /// LARS scales this tensor by its trust ratio (LAMB always does).
  bool trustRatio = true;
};

struct AdamSettings {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weightDecay = 0.0f;
  /// 1 for the first step (bias correction).
  int64_t step = 1;
};

struct SgdSettings {
  float lr = 1e-2f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weightDecay = 0.0f;
  bool nesterov = false;
  /// 1 for the first step (the momentum buffer starts as the gradient).
  int64_t step = 1;
};

struct LarsSettings {
  float lr = 1e-1f;
  float momentum = 0.9f;
  float eta = 1e-3f;
  float weightDecay = 0.0f;
};

namespace cpu {
#include "colossal/runtime/kernels/OptimizerSignatures.inc"
} // namespace cpu

namespace cuda {
#include "colossal/runtime/kernels/OptimizerSignatures.inc"
} // namespace cuda

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_OPTIMIZERS_H
