//===- TensorOpShapes.cpp - operand checks shared by both targets ---------===//

#include "colossal/runtime/kernels/TensorOpShapes.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/HostTensor.h"
#include "colossal/runtime/kernels/TensorIndexing.h"

#include <algorithm>

namespace colossal::rt::shapes {

using host::describe;

int64_t axisOf(int64_t axis, const Shape &shape, const char *op) {
  int64_t a = indexing::normalizeAxis(axis, shape.size());
  if (a < 0 || a >= int64_t(shape.size()))
    fail(op, "axis " + std::to_string(axis) + " outside a tensor of rank " + std::to_string(shape.size()));
  return a;
}

MatmulDims matmulDims(const Shape &a0, const Shape &b0) {
  Shape a = a0, b = b0;
  if (a.size() == 1)
    a.insert(a.begin(), 1);
  if (b.size() == 1)
    b.push_back(1);
  if (a.empty() || b.empty() || b[b.size() - 2] != a.back())
    fail("matmul", "cannot multiply " + describe(a0) + " by " + describe(b0));
  MatmulDims d;
  d.m = a[a.size() - 2], d.k = a.back(), d.n = b.back();
  d.aBatch.assign(a.begin(), a.end() - 2);
  d.bBatch.assign(b.begin(), b.end() - 2);
  size_t rank = std::max(d.aBatch.size(), d.bBatch.size());
  d.batch.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i + d.aBatch.size() >= rank ? d.aBatch[i + d.aBatch.size() - rank] : 1;
    int64_t y = i + d.bBatch.size() >= rank ? d.bBatch[i + d.bBatch.size() - rank] : 1;
    if (x != y && x != 1 && y != 1)
      fail("matmul", "the batch dimensions of " + describe(a0) + " and " + describe(b0) + " do not broadcast");
    d.batch[i] = std::max(x, y);
  }
  return d;
}

NormRows normRows(const Shape &x, int64_t axis, const std::optional<int64_t> &scaleElements, const char *op) {
  int64_t a = axisOf(axis, x, op);
  NormRows r{indexing::product(x, 0, size_t(a)), indexing::product(x, size_t(a))};
  if (scaleElements && *scaleElements != r.cols)
    fail(op, "a scale of " + std::to_string(*scaleElements) + " elements for rows of " + std::to_string(r.cols));
  return r;
}

AttentionDims attentionDims(const Shape &q, const Shape &k, const Shape &v) {
  size_t rank = q.size();
  // Batch dimensions equal, but for key/value heads that divide the query heads.
  auto batchFits = [&] {
    for (size_t i = 0; i + 2 < rank; ++i)
      if (q[i] != k[i] && (i + 3 != rank || k[i] < 1 || q[i] % k[i] != 0))
        return false;
    return true;
  };
  if (rank < 2 || k.size() != rank || v.size() != rank || !batchFits() ||
      !std::equal(k.begin(), k.end() - 1, v.begin()) || q.back() != k.back())
    fail("attention", "queries " + describe(q) + ", keys " + describe(k) + " and values " + describe(v) +
                          " do not fit one another");
  AttentionDims d;
  d.groups = rank >= 3 ? q[rank - 3] / k[rank - 3] : 1;
  d.batch = indexing::product(q, 0, rank - 2);
  d.queries = q[rank - 2], d.keys = k[rank - 2], d.headDim = q.back(), d.valueDim = v.back();
  d.scores.assign(q.begin(), q.end() - 2);
  d.scores.push_back(d.queries);
  d.scores.push_back(d.keys);
  d.output = q;
  d.output.back() = d.valueDim;
  return d;
}

void requireLossOperands(const Shape &scores, const Shape &labels, bool integerLabels, const char *op) {
  if (!integerLabels || scores.size() != 2 || labels != Shape{scores[0]})
    fail(op, "takes scores [N, C] and integer labels [N], got " + describe(scores) + " and " + describe(labels));
}

int64_t countedLabels(const int64_t *labels, int64_t rows, int64_t classes, int64_t ignore, const char *op) {
  int64_t counted = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (labels[i] == ignore)
      continue;
    if (labels[i] < 0 || labels[i] >= classes)
      fail(op, "row " + std::to_string(i) + " has label " + std::to_string(labels[i]) + ", outside " +
                   std::to_string(classes) + " classes");
    ++counted;
  }
  return counted;
}

double reduceRowLosses(const Floats &perRow, int64_t counted, const std::string &reduction) {
  double total = 0;
  for (float l : perRow)
    total += l;
  if (reduction == "mean")
    return counted > 0 ? total / double(counted) : 0.0;
  return total;
}

Floats rowGradientScales(const Floats &dloss, int64_t rows, int64_t counted, const std::string &reduction) {
  Floats scales = scratch<float>(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    double scale = reduction == "none" ? dloss[size_t(i)] : dloss[0];
    if (reduction == "mean")
      scale /= double(std::max<int64_t>(1, counted));
    scales[size_t(i)] = float(scale);
  }
  return scales;
}

void requireSliceInside(const Shape &in, const Shape &out, const Shape &starts, const Shape &steps, const char *op) {
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t last = starts[d] + (out[d] - 1) * steps[d];
    if (out[d] > 0 && (starts[d] < 0 || starts[d] >= in[d] || last < 0 || last >= in[d]))
      fail(op, "dimension " + std::to_string(d) + " of " + describe(out) + " leaves " + describe(in));
  }
}

} // namespace colossal::rt::shapes
