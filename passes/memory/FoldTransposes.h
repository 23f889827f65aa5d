//===- FoldTransposes.h - contractions reading operands transposed -*- C++ -*-===//
//
// The contraction rule of autodiff writes a weight gradient as
// `matmul(transpose(x), dy)` and, for a weight read through its transposed
// view, transposes that product back: in a program every transpose is a
// copy, so each linear's backward pass held a copy of its input and two
// weight-sized gradients at once. A matrix kernel reads either operand
// transposed at no cost (`train.gemm`'s `trans_a`/`trans_b`, cuBLAS's
// operation flags), so `train-fold-transposes` rewrites, on matrices:
//
//   matmul(transpose(a), b)      -> gemm(a, b) {trans_a}
//   matmul(a, transpose(b))      -> gemm(a, b) {trans_b}
//   transpose(gemm(a, b))        -> gemm(b, a) with both flags flipped
//                                   ((A B)^T = B^T A^T; the product's one use)
//   transpose(all_reduce(gemm))  -> all_reduce(the product transposed)
//                                   (partial sums of a weight gradient)
//   linear(x, transpose(w), b)   -> linear(x, w, b) {transpose_weight}
//
// so a weight gradient is one product, `dw = gemm(dy, x) {trans_a}`, made in
// the weight's layout, and a linear stored as `nn.Linear` stores it
// (`[out, in]`) is read in place by the forward pass and each re-run of it. Batched (rank > 2) products keep their transposes:
// the runtime's batched kernel reads its operands as stored.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_MEMORY_FOLDTRANSPOSES_H
#define COLOSSAL_PASSES_MEMORY_FOLDTRANSPOSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace colossal::memory {

/// Folds the matrix transposes around the products of @forward_backward
/// into `train.gemm` operand flags and `train.linear`'s `transpose_weight`
/// (@forward, which the planner reads, is left as it is). Returns how many transposes no longer run; fails with a
/// diagnostic when the module has no @forward_backward.
mlir::FailureOr<int64_t> foldTransposesIntoProducts(mlir::ModuleOp module);


} // namespace colossal::memory

#endif // COLOSSAL_PASSES_MEMORY_FOLDTRANSPOSES_H
