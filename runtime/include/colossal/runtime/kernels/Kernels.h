//===- Kernels.h - the compute kernels, one interface for host and device -*- C++ -*-===//
//
// Every kernel exists twice with the same signature: `cpu::` (host target,
// vectorisable loops and a CPU BLAS) and `cuda::` (the device target, in the
// CUDA runtime library). Emitted programs pick the namespace; tests run the
// same calls on both and compare. All layouts are row-major and contiguous;
// element counts are int64_t. Unless noted, kernels compute in fp32; GEMM
// also takes bf16 and f16 operands and accumulates in fp32.
//
// Backward kernels overwrite their outputs, except the parameter gradients
// of embedding (scatter-add into the table's gradient), which accumulate, as
// tied weights need.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_KERNELS_H
#define COLOSSAL_RUNTIME_KERNELS_H

#include "colossal/runtime/DType.h"
#include "colossal/runtime/kernels/AttentionDropout.h"

#include <cstdint>

namespace colossal::rt {

/// Where a kernel runs: a cudaStream_t on the device, ignored on the host.
struct Stream {
  void *handle = nullptr;
};

/// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b < batch, row-major:
/// op(A) is m x k (A is k x m when transA), op(B) is k x n (B is n x k when
/// transB), C is m x n. Strides are in elements between batch entries.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  int64_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
};

enum class GeluApproximation { None, Tanh };

/// Scaled dot-product attention on [batchHeads, queries | keys, headDim]
/// tensors. With `causal`, query i (global position queryOffset + i) sees
/// key j (global position keyOffset + j) only when keyOffset + j <=
/// queryOffset + i; offsets let a ring step attend to another rank's keys.
/// `lse` holds each query row's log-sum-exp of scaled scores (-inf when a
/// row sees no key; its output is then 0). Grouped-query attention: `groups`
/// consecutive query heads share one key/value head, so q is [batchHeads,
/// ...] and k, v are [batchHeads / groups, ...]; dk and dv sum over the
/// group. Under `dropout` the output weighs each value by its probability
/// times the dropout's factor; the log-sum-exp is the undropped softmax's.
struct AttentionShape {
  int64_t batchHeads = 1, queries = 0, keys = 0, headDim = 0, groups = 1;
  float scale = 1.0f;
  bool causal = false;
  int64_t queryOffset = 0, keyOffset = 0;
  AttentionDropout dropout;
};

namespace cpu {
#include "colossal/runtime/kernels/KernelSignatures.inc"
} // namespace cpu

namespace cuda {
#include "colossal/runtime/kernels/KernelSignatures.inc"
} // namespace cuda

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_KERNELS_H
