//===- GridLinear.h - a linear layer on a q x q grid (SUMMA) -------*- C++ -*-===//
//
// 2D tensor parallelism's matrix product (Optimus: Xu et al. 2021, "An
// Efficient 2D Method for Training Super-Large Deep Learning Models", on
// SUMMA: van de Geijn and Watts 1997). On a q x q grid, rank (i, j) holds
// block (i, j) of X [m, k] and of W [k, n] and makes block (i, j) of
// Y = X W: in step t, the X blocks of column t are broadcast along each row
// and the W blocks of row t along each column, and every rank adds
// X_it W_tj. The backward pass runs the same steps on the duals: dX_it =
// sum_j dY_ij W_tj^T is reduced along row i to column t, dW_tj =
// sum_i X_it^T dY_ij along column j to row t.
//
// Collectives per call and rank, as the cost model prices them
// (cost/TensorGrid.h): forward, q broadcasts of an X block along the row
// and q of a W block along the column; backward, q of each again and q
// reduces of each. `row` names the mesh axis whose groups are a grid row
// (the cost model's "tp_col": its ranks differ in their column), `column`
// the axis whose groups are a grid column ("tp_row").
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_GRIDLINEAR_H
#define COLOSSAL_RUNTIME_GRIDLINEAR_H

#include "colossal/runtime/kernels/HostTensor.h"

#include <string>
#include <vector>

namespace colossal::rt {

class StepCollectives;

namespace host {

/// This rank's block of X W: `x` [..., k / q] (the leading dimensions are
/// rows of X, this rank's m / q of them), `w` [k / q, n / q], or with
/// `transposed` W^T's block [n / q, k / q] (a weight stored [out, in]).
Tensor summaLinear(const Tensor &x, const Tensor &w, StepCollectives &collectives, const std::string &row,
                   const std::string &column, bool transposed = false);

/// {this rank's block of dX, of dW (of dW^T when `transposed`)} for `dy`,
/// its block of dY.
std::vector<Tensor> summaLinearGrad(const Tensor &x, const Tensor &w, const Tensor &dy, StepCollectives &collectives,
                                    const std::string &row, const std::string &column, bool transposed = false);

} // namespace host
} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_GRIDLINEAR_H
