//===- TensorOpShapes.h - operand checks shared by both targets ---*- C++ -*-===//
//
// The shape rules and checks of the emitted programs' ops, computed on the
// host for the host and CUDA implementations alike, so both refuse the same
// operands with the same message and agree on every derived size.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TENSOROPSHAPES_H
#define COLOSSAL_RUNTIME_TENSOROPSHAPES_H

#include "colossal/runtime/TrackedAllocator.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace colossal::rt::shapes {

using Shape = std::vector<int64_t>;

/// `axis` (negative from the end) as an index into `shape`, or an error.
int64_t axisOf(int64_t axis, const Shape &shape, const char *op);

/// A batched matrix product: m x k times k x n, over numpy-broadcast
/// batch dimensions.
struct MatmulDims {
  int64_t m = 0, k = 0, n = 0;
  Shape aBatch, bBatch, batch;
};
MatmulDims matmulDims(const Shape &a, const Shape &b);

/// Rows and columns of a normalisation over the dimensions from `axis` on;
/// a scale must have one element per column.
struct NormRows {
  int64_t rows = 0, cols = 0;
};
NormRows normRows(const Shape &x, int64_t axis, const std::optional<int64_t> &scaleElements, const char *op);

/// The sizes of attention(q [..., sq, d], k [..., sk, d], v [..., sk, dv]).
/// Grouped-query attention: k and v have fewer heads (the dimension before
/// the tokens) than q, each shared by `groups` consecutive query heads.
struct AttentionDims {
  int64_t batch = 1, queries = 0, keys = 0, headDim = 0, valueDim = 0, groups = 1;
  /// [..., sq, sk]: what a mask broadcasts to.
  Shape scores;
  /// [..., sq, dv].
  Shape output;
};
AttentionDims attentionDims(const Shape &q, const Shape &k, const Shape &v);

/// Checks scores [N, C] and integer labels [N] of a cross-entropy.
void requireLossOperands(const Shape &scores, const Shape &labels, bool integerLabels, const char *op);
/// The labels that count (not `ignore`); an error for one outside [0, C).
int64_t countedLabels(const int64_t *labels, int64_t rows, int64_t classes, int64_t ignore, const char *op);
/// The loss of `reduction` ("mean" over counted labels, "sum") from per-row losses.
double reduceRowLosses(const Floats &perRow, int64_t counted, const std::string &reduction);
/// Each row's share of the loss gradient `dloss` under `reduction`.
Floats rowGradientScales(const Floats &dloss, int64_t rows, int64_t counted,
                                     const std::string &reduction);

/// Checks that a slice with `out` elements per dimension stays inside `in`.
void requireSliceInside(const Shape &in, const Shape &out, const Shape &starts, const Shape &steps, const char *op);

} // namespace colossal::rt::shapes

#endif // COLOSSAL_RUNTIME_TENSOROPSHAPES_H
