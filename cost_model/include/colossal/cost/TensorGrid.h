//===- TensorGrid.h - 2D, 2.5D and 3D tensor parallelism -------------*- C++ -*-===//
//
// Colossal-AI's N-dimensional tensor parallelism splits every weight and
// activation over a grid instead of one axis, so no rank holds a whole
// activation. For a linear layer Y[m, n] = X[m, k] W[k, n] (m = tokens), the
// collectives per rank, with |X|, |W|, |Y| the full sizes in bytes:
//
// 2D (Optimus, SUMMA on a q x q grid, P = q^2). X, W, Y in q x q blocks.
//   forward   q x [broadcast X block |X|/q^2 along the row (tp_col),
//                  broadcast W block |W|/q^2 along the column (tp_row)]
//   backward  dX = dY W^T: q x [broadcast W block (tp_row), reduce dX block (tp_col)]
//             dW = X^T dY: q x [broadcast X block (tp_col), reduce dW block (tp_row)]
//
// 2.5D (Tesseract, P = q^2 d). X split along m into d parts, each on a
//   q x q grid doing SUMMA; W in q x q blocks replicated over the depth.
//   As 2D with |X| / d, plus an all-reduce of the dW block |W|/q^2 over the
//   depth (tp_depth) in the backward pass.
//
// 3D (P = q^3, grid axes i = tp_row, j = tp_col, l = tp_depth). Each rank
//   holds |X|/q^3, |W|/q^3, |Y|/q^3.
//   forward   all-gather X over l, all-gather W over i (full sizes |X|/q^2,
//             |W|/q^2), reduce-scatter the partial Y over j (|Y|/q^2)
//   backward  all-gather dY over j, reduce-scatter dX over l and dW over i
//
// Per rank, 2D moves about 3 (|X| + |W|) / q per layer against 1D's
// all-reduces of |Y|, which is why the grid wins as P grows. Layer norms and
// the vocabulary-parallel loss reduce their statistics over the axis that
// splits the hidden (or vocabulary) dimension. Attention splits heads over
// the grid and needs no communication of its own in this model.
//
// Sources: Xu et al. 2021 (Optimus), Wang et al. 2021 (Tesseract), Bian et
// al. 2021 (3D), and the Colossal-AI documentation (REFERENCE.md).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_TENSORGRID_H
#define COLOSSAL_COST_TENSORGRID_H

#include "colossal/cost/Communication.h"

#include <string>
#include <vector>

namespace colossal::cost {

/// One kind of collective a grid algorithm runs: on which grid axis, on how
/// many bytes (the full size, as collectiveTime takes it), how many times.
struct GridCollective {
  Collective collective;
  std::string axis; // "tp_row", "tp_col" or "tp_depth"
  double bytes;
  int calls;
};

/// Collectives of the forward and of the backward pass of one linear layer.
struct GridLinear {
  std::vector<GridCollective> forward, backward;
};

GridLinear gridLinear(TensorMode mode, int q, int depth, double xBytes, double wBytes,
                      double yBytes);

/// Bytes one rank moves for a list of grid collectives (bytes x calls,
/// scaled by each collective's bus factor on its group of `groupSize`).
double gridVolume(const std::vector<GridCollective> &collectives, int groupSize);

} // namespace colossal::cost

#endif // COLOSSAL_COST_TENSORGRID_H
