//===- TensorGrid.h - 2D, 2.5D and 3D tensor parallelism ----------*- C++ -*-===//
//
// Optimus (Xu et al. 2021, "An Efficient 2D Method for Training Super-Large
// Deep Learning Models"), as Colossal-AI builds it: the tensor ranks form a
// q x q grid whose rank (i, j) is rank i of mesh axis "tp_row" and rank j
// of "tp_col". An activation [b, ..., h] is held in blocks: its rows (the
// leading dimension) split over tp_row, its features over tp_col. Every
// linear layer is SUMMA's product of the input's block and the weight's
// (`dist.grid_linear`): the weight [k, n] split by rows over tp_row and by
// columns over tp_col, a 1/q^2 block per rank; its bias split over tp_col
// (each grid row holds the columns it adds to, its gradient summed over the
// rows). A layer or RMS norm over the features normalises the block with
// its row's statistics completed over tp_col (one value per row), its scale
// and bias split as biases are. Elementwise ops and residual adds compute
// on the blocks; reshapes, transposes, slices and concatenations carry the
// split to other dimensions (a projection's features into its heads), and
// attention runs by heads on the rank's rows; the
// cross-entropy is vocabulary-parallel over tp_col and sums its rows over
// tp_row, so no rank holds whole logits. The graph's inputs enter as the
// rank's block (a slice: nothing moves).
//
// Split parameters record their layout as a `dist.sharding` attribute (the
// model file keeps the whole tensor; each rank loads its block). Any other
// op reading a block (a dropout that drops) computes on the whole value,
// its blocks gathered over both axes, and a whole value entering the grid
// is sliced: the step stays exact, and the report names what ran whole. A
// fused projection whose output is split into equal parts (query, key and
// value) has its output features in groups, each split over the columns
// (the parameter's `block_groups`), so each part of the rank's block is
// its block of that part. An
// embedding table read once is split by vocabulary rows over the grid's
// rows and by features over its columns (Colossal-AI's vocabulary-parallel
// 2D/2.5D/3D embeddings): each rank looks the token ids up in its rows and
// the partial sums are reduce-scattered into the rank's block. On the 2D
// grid and 2.5D's layers a table tied to the output layer is split as that
// layer's SUMMA weight (vocabulary over tp_col, features over tp_row; on
// the layers read as copies over tp_depth, each layer looking up its own
// rows' ids), and its lookup's partial sums are moved into the block; on
// the cube it is split as an untied table, which is the output layer's
// weight block for an input of variant 0, read gathered over tp_w.
//
// 2.5D (Wang et al. 2021, "Tesseract"; Colossal-AI's 2.5D layers): d layers
// of a q x q grid, mesh axis "tp_depth" the layer. The rows are split over
// the layers, then over each layer's rows (d x q blocks, tp_depth major);
// each layer runs the 2D algorithm on its rows with the same weight blocks,
// so a weight is held 1/q^2 per rank (as Colossal-AI's 2.5D table states)
// and read as copies over tp_depth: its gradient, each layer's rows' part,
// is summed over the depth. Biases and norm scales are copies over every
// row (tp_depth and tp_row); the loss sums its rows over "tp_rows", the
// group of one grid column's ranks across the layers.
//
// 3D (Bian et al. 2021, "Maximizing Parallelism in Distributed Training
// for Huge Neural Networks"; Colossal-AI's 3D layers): a q x q x q cube,
// mesh axes "tp_in", "tp_w" and "tp_out". An activation holds 1/q^3: its
// rows over tp_w and one of tp_in and tp_out, its features over the other,
// which each linear layer swaps. A linear layer's input rows are gathered
// over their axis other than tp_w, its weight block (k over the input
// features' axis and tp_w, n over the other: 1/q^3 per rank) over tp_w, the
// local product's partial sums reduce-scattered over the input features'
// axis into the rows; all three are reshardings, so the backward pass is
// their duals (the weight gradient reduce-scattered over tp_w). Biases and
// norm scales split over the features' axis are copies over the rows' two.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_TENSORGRID_H
#define COLOSSAL_PASSES_PARTITION_TENSORGRID_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace colossal::partition {

/// The grid's axes: a rank's row is its rank on `kGridRowAxis` (whose
/// groups are grid columns), its column its rank on `kGridColumnAxis`.
inline constexpr const char *kGridRowAxis = "tp_row";
inline constexpr const char *kGridColumnAxis = "tp_col";
/// 2.5D: the layer a rank's grid is (its rows' block of the rows), and the
/// group of every rank of one grid column over all layers (the loss's rows).
inline constexpr const char *kGridDepthAxis = "tp_depth";
inline constexpr const char *kGridRowsAxis = "tp_rows";
/// 3D: the cube's input, weight and output axes (Colossal-AI's 3D modes),
/// and the groups of one tp_in or one tp_out column's rows (the loss's).
inline constexpr const char *kCubeInputAxis = "tp_in";
inline constexpr const char *kCubeWeightAxis = "tp_w";
inline constexpr const char *kCubeOutputAxis = "tp_out";
inline constexpr const char *kCubeRowsOfInputAxis = "tp_rows_in";
inline constexpr const char *kCubeRowsOfOutputAxis = "tp_rows_out";

struct TensorGridSummary {
  int64_t linears = 0, norms = 0, splitParameters = 0, losses = 0, lookups = 0;
  /// Blocks gathered whole for the ops the grid does not split, and those
  /// ops' names (in order).
  int64_t gathers = 0;
  std::vector<std::string> wholeOps;
};

/// Splits @forward over `depth` layers of a `side` x `side` grid of tensor
/// ranks (depth 1: 2D), or over a `side`^3 cube (`cube`: 3D). Fails naming
/// the op that the grid cannot split or whose dimension does not divide.
/// Records `train.tensor_parallel` (the ranks), `train.tensor_grid = side`
/// and, beyond one layer, `train.tensor_grid_depth = depth` (on the cube,
/// `train.tensor_cube`) on the module.
mlir::FailureOr<TensorGridSummary> partitionTensorGrid(mlir::ModuleOp module, int64_t side, int64_t depth = 1,
                                                       bool cube = false);

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_TENSORGRID_H
