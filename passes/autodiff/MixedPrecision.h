//===- MixedPrecision.h - 16-bit compute over float32 master weights -*- C++ -*-===//
//
// `train-mixed-precision` rewrites @forward (before train-autodiff) to
// compute in bf16 or fp16 where that is safe, the policy of PyTorch's
// autocast:
//   - contractions (matmul, gemm, linear, conv, einsum, attention) compute in
//     the 16-bit type, their float operands cast down;
//   - ops whose range or accumulation 16 bits cannot hold (softmax,
//     log_softmax, layer_norm, rms_norm, cross_entropy, reductions, exp, log,
//     pow, sqrt, reciprocal) compute in float32, their operands cast up;
//   - every other op computes in the widest float type among its operands.
// Parameters stay float32 (the master weights the optimizer updates) and are
// cast where a 16-bit op reads them, so their gradients come back float32
// through the casts' gradients; @forward's results stay float32.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_AUTODIFF_MIXEDPRECISION_H
#define COLOSSAL_PASSES_AUTODIFF_MIXEDPRECISION_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace colossal::autodiff {

/// Rewrites @forward to compute in `precision` ("bf16" or "fp16"; "fp32"
/// changes nothing). Records it as the module attribute `train.precision`.
mlir::LogicalResult applyMixedPrecision(mlir::ModuleOp module, const std::string &precision);


} // namespace colossal::autodiff

#endif // COLOSSAL_PASSES_AUTODIFF_MIXEDPRECISION_H
