//===- TensorGridSplitter.h - the grid partitioner's state --------*- C++ -*-===//
//
// The splitter behind TensorGrid.h, shared by its two files:
// TensorGrid.cpp (the walk over @forward, how values enter and leave the
// grid, the ops that compute on their parts as they are split, the pass)
// and TensorGridLayers.cpp (linear layers, norms, embedding lookups and the
// loss on the grid). Internal to passes/partition.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_TENSORGRIDSPLITTER_H
#define COLOSSAL_PASSES_PARTITION_TENSORGRIDSPLITTER_H

#include "passes/partition/ParameterSlices.h"
#include "passes/partition/TensorGrid.h"

#include "colossal/Dialect/Dist/DistDialect.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>

namespace colossal::partition::grid {

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

/// The dimensions of a value split over the grid: `row` over the rows' axes
/// (tp_row, with depth tp_depth before it: a batch dimension), `col` over
/// tp_col (its features, or the heads they reshape into).
struct GridDims {
  int64_t row = 0, col = 0;
  /// 3D: which axes split them (CubeVariant); 0 on a 2D or 2.5D grid.
  int variant = 0;
  bool operator==(const GridDims &other) const {
    return row == other.row && col == other.col && variant == other.variant;
  }
  bool operator!=(const GridDims &other) const { return !(*this == other); }
};

/// A block: the rows (first dimension) and the features (last).
inline GridDims blockDims(int64_t rank, int variant = 0) { return {0, rank - 1, variant}; }

/// The grid's shape: q x q ranks in each of `depth` layers (2.5D's depth;
/// 1 for 2D), or a q x q x q cube (3D). On layers the rows are split over
/// the layers, then over each layer's rows: `depth` x q parts, tp_depth
/// major. On the cube a value's rows are split over tp_w and one of tp_in
/// and tp_out, its features over the other (its variant): a linear layer
/// takes variant 0 (rows over tp_w, tp_in; features over tp_out) to
/// variant 1 (rows over tp_w, tp_out; features over tp_in) and back.
struct GridShape {
  int64_t q = 1, depth = 1;
  bool cube = false;
  int64_t rowParts() const { return cube ? q * q : q * depth; }
  SmallVector<std::string, 2> rowAxes(int variant = 0) const {
    if (cube)
      return {kCubeWeightAxis, variant == 0 ? kCubeInputAxis : kCubeOutputAxis};
    if (depth > 1)
      return {kGridDepthAxis, kGridRowAxis};
    return {kGridRowAxis};
  }
  StringRef columnAxis(int variant = 0) const {
    if (cube)
      return variant == 0 ? kCubeOutputAxis : kCubeInputAxis;
    return kGridColumnAxis;
  }
  /// The loss's token axis: the group of every row of one grid column.
  StringRef tokenAxis(int variant = 0) const {
    if (cube)
      return variant == 0 ? kCubeRowsOfOutputAxis : kCubeRowsOfInputAxis;
    return depth > 1 ? kGridRowsAxis : kGridRowAxis;
  }
};

inline Layout gridLayout(int64_t rank, GridDims d, const GridShape &g) {
  Layout layout = wholeLayout(rank);
  for (const std::string &axis : g.rowAxes(d.variant))
    layout.dims[size_t(d.row)].push_back(axis);
  layout.dims[size_t(d.col)].push_back(g.columnAxis(d.variant).str());
  return layout;
}

/// The rank's part of a value of `type` split as `d`.
inline RankedTensorType localType(RankedTensorType type, GridDims d, const GridShape &g) {
  SmallVector<int64_t> shape(type.getShape());
  shape[size_t(d.row)] /= g.rowParts();
  shape[size_t(d.col)] /= g.q;
  return RankedTensorType::get(shape, type.getElementType());
}

class GridSplitter {
public:
  GridSplitter(ModuleOp module, func::FuncOp forward, GridShape grid)
      : module_(module), parameters_(module), forward_(forward), grid_(grid), q_(grid.q) {
    module.walk([&](ParamOp read) { ++reads_[read.getName()]; });
  }

  LogicalResult run(TensorGridSummary &summary);

private:
  /// The grid's mesh, declared once.
  FlatSymbolRefAttr mesh();
  Value reshard(OpBuilder &b, Location loc, Value input, RankedTensorType type, const Layout &from, const Layout &to) {
    MLIRContext *context = module_.getContext();
    return ReshardOp::create(b, loc, type, input, ShardingAttr::get(context, from), ShardingAttr::get(context, to),
                             mesh());
  }
  std::optional<GridDims> dimsOf(Value v) const {
    auto it = split_.find(v);
    return it == split_.end() ? std::nullopt : std::optional<GridDims>(it->second);
  }
  /// Whether `v` is held as a block (of any variant on the cube).
  bool isBlock(Value v) const {
    std::optional<GridDims> d = dimsOf(v);
    return d && *d == blockDims(typeOf(v).getRank(), d->variant);
  }
  /// The whole value's type of `v` (its own when it is whole).
  RankedTensorType wholeTypeOf(Value v) const;
  /// Records that `v` (of its local type) is held split as `d`.
  Value mark(Value v, GridDims d) {
    split_[v] = d;
    return v;
  }
  /// `value` split as `d`: a slice of a whole value (nothing moves; its
  /// gradient is gathered), or the value itself when it is split so; a
  /// value split otherwise is gathered first.
  FailureOr<Value> into(OpBuilder &b, Operation *user, Value value, GridDims d);
  FailureOr<Value> block(OpBuilder &b, Operation *user, Value value) {
    return into(b, user, value, blockDims(wholeTypeOf(value).getRank()));
  }
  /// `value` whole: gathered over both axes (its gradient is the rank's
  /// part of the whole gradient).
  Value whole(OpBuilder &b, Location loc, Value value);
  /// A whole operand of an op computing on parts split as `d` (result
  /// shape `result`, numpy broadcasting): sliced along each split
  /// dimension it spans, copies over the axes it is broadcast along (its
  /// gradient summed over them); null when it spans a split dimension with
  /// another size.
  Value broadcastInto(OpBuilder &b, Location loc, Value operand, RankedTensorType result, GridDims d);
  bool soleRead(SplitOperand operand) { return reads_[operand.read.getName()] == 1; }
  /// Makes the parameter of `operand` its block: its dimension
  /// `axes[d]`-split for each operand dimension d (empty: whole). Its
  /// readers see it as `readAs` (a layout over the parameter's dimensions)
  /// when given: 2.5D's layers read the same block as copies over
  /// tp_depth (their gradients, each layer's rows', are summed); 3D
  /// gathers the block over tp_w (its gradient reduce-scattered back).
  /// With `groups` > 1, dimension `groupDim` is that many equal groups,
  /// each cut into the blocks (a fused projection's query, key and value).
  using BlockAxes = ArrayRef<std::pair<int64_t, SmallVector<std::string, 2>>>;
  void splitOnGrid(SplitOperand operand, BlockAxes dims, std::optional<Layout> readAs = std::nullopt,
                   int64_t groupDim = -1, int64_t groups = 1);
  /// "a q x q grid" or "d layers of q x q grids", for errors.
  std::string describe() const {
    std::string side = std::to_string(q_) + " x " + std::to_string(q_);
    if (grid_.cube)
      return "a " + side + " x " + std::to_string(q_) + " cube (3D)";
    return grid_.depth > 1 ? std::to_string(grid_.depth) + " layers of " + side + " grids (2.5D)"
                           : "a " + side + " grid (2D)";
  }

  LogicalResult splitLinear(LinearOp linear, bool &split);
  /// Whether `lookup` was split (otherwise it computes whole).
  bool splitLookup(GatherOp lookup);
  LogicalResult splitLoss(CrossEntropyOp loss, bool &split);
  void splitNorm(Operation *norm, bool &split);
  /// Ops that compute on their parts as they are split (elementwise ops,
  /// views, attention by heads): true when `op` was split.
  bool splitInPlace(OpBuilder &b, Operation *op);
  /// A per-feature parameter ([h]: a bias, a norm's scale) as the rank's
  /// columns (of each of `groups` equal groups), read as copies over the
  /// grid's rows; null when it is not a parameter read once.
  Value columnsOf(OpBuilder &b, Location loc, Value vector, int variant = 0, int64_t groups = 1);
  /// How many equal groups a linear layer's output features make when its
  /// result only reaches one split of its features into that many equal
  /// parts (a fused query-key-value projection, possibly through reshapes
  /// that keep its features), so that its blocks can hold each part's
  /// columns; 1 otherwise.
  int64_t fusedGroupsOf(LinearOp linear) const;
  /// 3D: y = x W + b on the cube (Bian et al. 2021), for an input of
  /// variant v: x gathered over its row axis that is not tp_w, the weight
  /// block gathered over tp_w, the local product's partial sums
  /// reduce-scattered over x's column axis into the rows: variant 1 - v.
  /// With `groups` > 1 its output features are that many groups
  /// (fusedGroupsOf). With `tiedView`, the weight is that transposed view
  /// of a table its lookup split (splitLookup) instead of `w`.
  LogicalResult splitCubeLinear(LinearOp linear, std::optional<SplitOperand> w, std::optional<SplitOperand> bias,
                                int64_t groups = 1, TransposeOp tiedView = nullptr);

  ModuleOp module_;
  /// The module's symbols, looked up once per parameter read.
  SymbolTable parameters_;
  func::FuncOp forward_;
  GridShape grid_;
  int64_t q_;
  llvm::StringMap<int> reads_;
  /// Tables split by a lookup as the output layer tied to them reads them.
  llvm::StringSet<> tiedTables_;
  FlatSymbolRefAttr mesh_;
  /// Values held split, and how.
  DenseMap<Value, GridDims> split_;
  /// Blocks whose columns are equal groups, each split over the columns
  /// (fusedGroupsOf): only reshapes keeping them and their split read them.
  DenseMap<Value, int64_t> grouped_;
  /// Whole values already sliced (by value and split), and split values
  /// already gathered.
  DenseMap<std::pair<Value, int64_t>, Value> sliced_;
  DenseMap<Value, Value> gathered_;
  /// 3D: blocks gathered over their rows' axis other than tp_w, by variant.
  DenseMap<std::pair<Value, int>, Value> gatheredRows_;
  TensorGridSummary *summary_ = nullptr;
};

} // namespace colossal::partition::grid

#endif // COLOSSAL_PASSES_PARTITION_TENSORGRIDSPLITTER_H
