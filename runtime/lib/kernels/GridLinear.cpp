//===- GridLinear.cpp - SUMMA on the host ----------------------------------===//

#include "colossal/runtime/kernels/GridLinear.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/train/StepInterface.h"

namespace colossal::rt::host {

namespace {

/// The grid's side and this rank's (row, column), checked against the
/// blocks' shapes.
struct GridPlace {
  int64_t q = 1, i = 0, j = 0;
};

GridPlace placeOf(StepCollectives &c, const std::string &row, const std::string &column, const Tensor &x,
                  const Tensor &w, bool transposed) {
  GridPlace p;
  p.q = c.ranksOn(row);
  if (c.ranksOn(column) != p.q)
    fail("summa", "a grid of " + std::to_string(p.q) + " columns ('" + row + "') and " +
                      std::to_string(c.ranksOn(column)) + " rows ('" + column + "') is not square");
  // A rank's index in its row group is its column, in its column group its row.
  p.j = c.rankOn(row);
  p.i = c.rankOn(column);
  if (x.shape.size() < 2 || w.shape.size() != 2 || x.shape.back() != w.shape[transposed ? 1 : 0])
    fail("summa", "blocks " + describe(x.shape) + " and " + describe(w.shape) + (transposed ? " (transposed)" : "") +
                      " do not multiply");
  return p;
}

/// `t` as a matrix of its last dimension's columns (shares no storage).
Tensor asMatrix(const Tensor &t) {
  int64_t columns = t.shape.back();
  return Tensor::ofFloats({int64_t(t.floats.size()) / columns, columns}, t.floats);
}

/// `t`'s values as a tensor of `shape` allocated in the caller's category:
/// the blocks received and the partial sums sent are communication buffers
/// (below); only the result is the step's value.
Tensor resultOf(const Tensor &t, Shape shape) { return Tensor::ofFloats(std::move(shape), t.floats); }

} // namespace

Tensor summaLinear(const Tensor &x, const Tensor &w, StepCollectives &c, const std::string &row,
                   const std::string &column, bool transposed) {
  GridPlace p = placeOf(c, row, column, x, w, transposed);
  int64_t n = w.shape[transposed ? 0 : 1];
  Shape outShape = x.shape;
  outShape.back() = n;
  Tensor y;
  {
    MemoryScope scope(MemoryCategory::Communication);
    Tensor xm = asMatrix(x);
    Shape out{xm.shape[0], n};
    y = Tensor::zeros(out);
    for (int64_t t = 0; t < p.q; ++t) {
      Tensor xt = c.broadcast(xm, row, t);
      Tensor wt = c.broadcast(w, column, t);
      y = gemm(xt, wt, &y, false, transposed, 1.0f, 1.0f, out);
    }
  }
  return resultOf(y, outShape);
}

std::vector<Tensor> summaLinearGrad(const Tensor &x, const Tensor &w, const Tensor &dy, StepCollectives &c,
                                    const std::string &row, const std::string &column, bool transposed) {
  GridPlace p = placeOf(c, row, column, x, w, transposed);
  int64_t k = w.shape[transposed ? 1 : 0], n = w.shape[transposed ? 0 : 1];
  MemoryCategory caller = MemoryScope::category();
  MemoryScope scope(MemoryCategory::Communication);
  Tensor xm = asMatrix(x), dym = asMatrix(dy);
  if (dym.shape[0] != xm.shape[0] || dym.shape[1] != n)
    fail("summa", "gradient block " + describe(dy.shape) + " does not match " + describe(x.shape) + " times " +
                      describe(w.shape));
  Tensor dx, dw;
  for (int64_t t = 0; t < p.q; ++t) {
    // dX_it: this rank's dY_ij W_tj^T, summed along the row at column t.
    Tensor wt = c.broadcast(w, column, t);
    Tensor partX = gemm(dym, wt, nullptr, false, !transposed, 1.0f, 0.0f, {xm.shape[0], k});
    Tensor sumX = c.reduceTo(partX, row, t);
    if (p.j == t)
      dx = std::move(sumX);
    // dW_tj: X_it^T dY_ij, summed along the column at row t.
    Tensor xt = c.broadcast(xm, row, t);
    // (dW^T = dY^T X for a transposed block.)
    Tensor partW = transposed ? gemm(dym, xt, nullptr, true, false, 1.0f, 0.0f, w.shape)
                              : gemm(xt, dym, nullptr, true, false, 1.0f, 0.0f, w.shape);
    Tensor sumW = c.reduceTo(partW, column, t);
    if (p.i == t)
      dw = std::move(sumW);
  }
  // (Moved in: a braced list would copy each result once more.)
  MemoryScope results(caller);
  std::vector<Tensor> grads;
  grads.reserve(2);
  grads.push_back(resultOf(dx, x.shape));
  grads.push_back(resultOf(dw, w.shape));
  return grads;
}

} // namespace colossal::rt::host
