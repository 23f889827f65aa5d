//===- TensorGrid.cpp -----------------------------------------------------===//

#include "passes/partition/TensorGrid.h"
#include "passes/partition/Passes.h"

#include "passes/partition/ParameterSlices.h"
#include "passes/partition/VocabularyParallel.h"

#include "colossal/Dialect/Dist/PlannedSetting.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace colossal::partition {

#define GEN_PASS_DEF_TENSORGRIDPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

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
GridDims blockDims(int64_t rank, int variant = 0) { return {0, rank - 1, variant}; }

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

Layout gridLayout(int64_t rank, GridDims d, const GridShape &g) {
  Layout layout = wholeLayout(rank);
  for (const std::string &axis : g.rowAxes(d.variant))
    layout.dims[size_t(d.row)].push_back(axis);
  layout.dims[size_t(d.col)].push_back(g.columnAxis(d.variant).str());
  return layout;
}

/// The rank's part of a value of `type` split as `d`.
RankedTensorType localType(RankedTensorType type, GridDims d, const GridShape &g) {
  SmallVector<int64_t> shape(type.getShape());
  shape[size_t(d.row)] /= g.rowParts();
  shape[size_t(d.col)] /= g.q;
  return RankedTensorType::get(shape, type.getElementType());
}

class GridSplitter {
public:
  GridSplitter(ModuleOp module, func::FuncOp forward, GridShape grid)
      : module_(module), forward_(forward), grid_(grid), q_(grid.q) {
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
  using BlockAxes = ArrayRef<std::pair<int64_t, SmallVector<std::string, 2>>>;
  void splitOnGrid(SplitOperand operand, BlockAxes dims, std::optional<Layout> readAs = std::nullopt);
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
  /// columns, read as copies over the grid's rows; null when it is not a
  /// parameter read once.
  Value columnsOf(OpBuilder &b, Location loc, Value vector, int variant = 0);
  /// 3D: y = x W + b on the cube (Bian et al. 2021), for an input of
  /// variant v: x gathered over its row axis that is not tp_w, the weight
  /// block gathered over tp_w, the local product's partial sums
  /// reduce-scattered over x's column axis into the rows: variant 1 - v.
  LogicalResult splitCubeLinear(LinearOp linear, SplitOperand w, std::optional<SplitOperand> bias);

  ModuleOp module_;
  func::FuncOp forward_;
  GridShape grid_;
  int64_t q_;
  llvm::StringMap<int> reads_;
  /// Tables split by a lookup as the output layer tied to them reads them.
  llvm::StringSet<> tiedTables_;
  FlatSymbolRefAttr mesh_;
  /// Values held split, and how.
  DenseMap<Value, GridDims> split_;
  /// Whole values already sliced (by value and split), and split values
  /// already gathered.
  DenseMap<std::pair<Value, int64_t>, Value> sliced_;
  DenseMap<Value, Value> gathered_;
  /// 3D: blocks gathered over their rows' axis other than tp_w, by variant.
  DenseMap<std::pair<Value, int>, Value> gatheredRows_;
  TensorGridSummary *summary_ = nullptr;
};

FlatSymbolRefAttr GridSplitter::mesh() {
  if (mesh_)
    return mesh_;
  OpBuilder builder(module_.getContext());
  SmallVector<StringRef, 3> axes;
  SmallVector<int64_t, 3> sizes;
  if (grid_.cube) {
    axes.append({kCubeInputAxis, kCubeWeightAxis, kCubeOutputAxis});
    sizes.append({q_, q_, q_});
  } else {
    if (grid_.depth > 1)
      axes.push_back(kGridDepthAxis), sizes.push_back(grid_.depth);
    axes.append({kGridRowAxis, kGridColumnAxis});
    sizes.append({q_, q_});
  }
  auto mesh = MeshOp::create(builder, module_.getLoc(), builder.getStringAttr("tp_grid"), builder.getStrArrayAttr(axes),
                             builder.getDenseI64ArrayAttr(sizes), DenseI64ArrayAttr());
  SymbolTable(module_).insert(mesh, module_.getBody()->begin());
  return mesh_ = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
}

RankedTensorType GridSplitter::wholeTypeOf(Value v) const {
  RankedTensorType t = typeOf(v);
  std::optional<GridDims> d = dimsOf(v);
  if (!d)
    return t;
  SmallVector<int64_t> shape(t.getShape());
  shape[size_t(d->row)] *= grid_.rowParts();
  shape[size_t(d->col)] *= q_;
  return RankedTensorType::get(shape, t.getElementType());
}

FailureOr<Value> GridSplitter::into(OpBuilder &b, Operation *user, Value value, GridDims d) {
  if (std::optional<GridDims> held = dimsOf(value)) {
    if (*held == d)
      return value;
    value = whole(b, user->getLoc(), value);
  }
  int64_t key = (int64_t(d.variant) << 20) + d.row * 1024 + d.col;
  if (Value known = sliced_.lookup({value, key}))
    return known;
  RankedTensorType type = typeOf(value);
  if (type.getDimSize(d.row) % grid_.rowParts() != 0 || type.getDimSize(d.col) % q_ != 0)
    return user->emitError() << "tensor parallelism on " << describe() << " splits dimension " << d.row << " of "
                             << type << " read by " << user->getName() << " in " << grid_.rowParts()
                             << " and dimension " << d.col << " in " << q_ << ", which do not divide (at "
                             << user->getLoc() << ")";
  OpBuilder::InsertionGuard guard(b);
  if (Operation *def = value.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(&forward_.getBody().front());
  Value sliced = reshard(b, value.getLoc(), value, localType(type, d, grid_), wholeLayout(type.getRank()),
                         gridLayout(type.getRank(), d, grid_));
  sliced_[{value, key}] = sliced;
  return mark(sliced, d);
}

Value GridSplitter::whole(OpBuilder &b, Location loc, Value value) {
  std::optional<GridDims> d = dimsOf(value);
  if (!d)
    return value;
  if (Value known = gathered_.lookup(value))
    return known;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(value);
  Value gathered = reshard(b, loc, value, wholeTypeOf(value), gridLayout(typeOf(value).getRank(), *d, grid_),
                           wholeLayout(typeOf(value).getRank()));
  gathered_[value] = gathered;
  ++summary_->gathers;
  return gathered;
}

Value GridSplitter::broadcastInto(OpBuilder &b, Location loc, Value operand, RankedTensorType result, GridDims d) {
  RankedTensorType type = typeOf(operand);
  int64_t offset = result.getRank() - type.getRank();
  Layout from = wholeLayout(type.getRank()), to = from;
  SmallVector<int64_t> shape(type.getShape());
  SmallVector<std::string, 2> columnAxis = {grid_.columnAxis(d.variant).str()};
  for (auto [dim, axes, parts] :
       {std::tuple(d.row, grid_.rowAxes(d.variant), grid_.rowParts()), {d.col, columnAxis, q_}}) {
    int64_t at = dim - offset;
    if (at >= 0 && type.getDimSize(at) != 1) {
      if (type.getDimSize(at) != result.getDimSize(dim))
        return Value();
      llvm::append_range(to.dims[size_t(at)], axes);
      shape[size_t(at)] /= parts;
    } else {
      llvm::append_range(to.copies, axes);
    }
  }
  return reshard(b, loc, operand, RankedTensorType::get(shape, type.getElementType()), from, to);
}

void GridSplitter::splitOnGrid(SplitOperand operand, BlockAxes dims, std::optional<Layout> readAs) {
  auto parameter = module_.lookupSymbol<ParameterOp>(operand.read.getName());
  RankedTensorType type = parameter.getTensorType();
  Layout layout = wholeLayout(type.getRank());
  SmallVector<int64_t> shape(type.getShape()), blocks(type.getRank(), 1);
  for (const auto &[dim, axes] : dims)
    for (const std::string &axis : axes) {
      shape[size_t(dim)] /= q_;
      blocks[size_t(dim)] *= q_;
      layout.dims[size_t(dim)].push_back(axis);
    }
  parameter.setBlockSplits(blocks);
  auto sliced = RankedTensorType::get(shape, type.getElementType());
  parameter.setTypeAttr(TypeAttr::get(sliced));
  parameter->setAttr("dist.sharding", ShardingAttr::get(module_.getContext(), layout));
  operand.read.getResult().setType(sliced);
  if (readAs) {
    SmallVector<int64_t> seen(type.getShape());
    for (auto [dim, axes] : llvm::enumerate(readAs->dims))
      seen[dim] /= int64_t(std::pow(q_, double(axes.size())));
    OpBuilder b(operand.read);
    b.setInsertionPointAfter(operand.read);
    Value read = operand.read.getResult();
    Value as =
        reshard(b, operand.read.getLoc(), read, RankedTensorType::get(seen, type.getElementType()), layout, *readAs);
    read.replaceAllUsesExcept(as, as.getDefiningOp());
  }
  for (TransposeOp view : operand.views)
    retypeTranspose(view);
  ++summary_->splitParameters;
}

/// y = x W + b as SUMMA's product of blocks, then the bias block (copies
/// over the grid's rows: its gradient is summed over them); on the cube,
/// splitCubeLinear.
LogicalResult GridSplitter::splitLinear(LinearOp linear, bool &split) {
  split = false;
  RankedTensorType input = typeOf(linear.getInput()), weight = typeOf(linear.getWeight());
  std::optional<SplitOperand> w = traceToParameter(linear.getWeight(), 0);
  std::optional<SplitOperand> bias =
      linear.getBias() ? traceToParameter(linear.getBias(), 0) : std::optional<SplitOperand>();
  // The output layer of a table its lookup split (splitLookup): the
  // weight, the table's transposed view, is its block already.
  auto view = linear.getWeight().getDefiningOp<TransposeOp>();
  auto table = view ? view.getInput().getDefiningOp<ParamOp>() : nullptr;
  bool tied = !w && table && tiedTables_.contains(table.getName()) && !linear.getBias();
  // A weight read elsewhere too (a tied embedding not split) stays whole.
  if (!tied && (!w || !soleRead(*w) || (linear.getBias() && (!bias || !bias->views.empty() || !soleRead(*bias)))))
    return success();
  // (An input already in blocks holds 1/q of the rows; a tied table's
  // block 1/q of its features and its vocabulary.)
  int64_t k = weight.getDimSize(0) * (tied ? q_ : 1), n = weight.getDimSize(1) * (tied ? q_ : 1);
  int64_t rows = input.getRank() < 2 ? 0 : wholeTypeOf(linear.getInput()).getShape().front();
  if (input.getRank() < 2 || rows % grid_.rowParts() != 0 || k % q_ != 0 || n % q_ != 0)
    return linear.emitError() << "tensor parallelism on " << describe() << " splits this linear layer's " << rows
                              << " rows in " << grid_.rowParts() << " and its " << k << " input and " << n
                              << " output features in " << q_ << ", which must divide (at " << linear.getLoc() << ")";
  if (grid_.cube) {
    if (k % (q_ * q_) != 0)
      return linear.emitError() << "tensor parallelism on " << describe() << " splits this linear layer's " << k
                                << " input features in " << q_ * q_ << ", which must divide (at " << linear.getLoc()
                                << ")";
    split = true;
    return splitCubeLinear(linear, *w, bias);
  }
  OpBuilder b(linear);
  FailureOr<Value> x = block(b, linear, linear.getInput());
  if (failed(x))
    return failure();
  b.setInsertionPoint(linear);
  // The weight [k, n] is the operand seen through transposes: its
  // dimension 0 (k) split over the rows' axis, 1 (n) over the columns'.
  if (!tied) {
    int64_t kDim = w->parameterDim, nDim = 1 - kDim;
    std::optional<Layout> readAs;
    if (grid_.depth > 1) {
      readAs = wholeLayout(2);
      readAs->dims[size_t(kDim)].push_back(kGridRowAxis);
      readAs->dims[size_t(nDim)].push_back(kGridColumnAxis);
      readAs->copies.push_back(kGridDepthAxis);
    }
    splitOnGrid(*w, {{kDim, {kGridRowAxis}}, {nDim, {kGridColumnAxis}}}, readAs);
  }
  RankedTensorType resultType =
      localType(typeOf(linear.getResult()), blockDims(typeOf(linear.getResult()).getRank()), grid_);
  Value y = GridLinearOp::create(b, linear.getLoc(), resultType, *x, linear.getWeight(),
                                 b.getStringAttr(kGridColumnAxis), b.getStringAttr(kGridRowAxis), UnitAttr());
  if (bias) {
    // (A bias read once, of n elements, which q divides: checked above.)
    Value columns = columnsOf(b, linear.getLoc(), linear.getBias());
    y = AddOp::create(b, linear.getLoc(), resultType, y, columns);
  }
  mark(y, blockDims(resultType.getRank()));
  linear.getResult().replaceAllUsesWith(y);
  linear.erase();
  ++summary_->linears;
  split = true;
  return success();
}

LogicalResult GridSplitter::splitCubeLinear(LinearOp linear, SplitOperand w, std::optional<SplitOperand> bias) {
  OpBuilder b(linear);
  Location loc = linear.getLoc();
  Value input = linear.getInput();
  int64_t rank = wholeTypeOf(input).getRank();
  int variant = isBlock(input) ? dimsOf(input)->variant : 0;
  FailureOr<Value> x = into(b, linear, input, blockDims(rank, variant));
  if (failed(x))
    return failure();
  b.setInsertionPoint(linear);
  // x's rows are over tp_w and `gathered`, its features over `summed`.
  std::string gathered = grid_.rowAxes(variant)[1], summed = grid_.columnAxis(variant).str();
  Value rows = gatheredRows_.lookup({*x, variant});
  if (!rows) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(*x);
    Layout from = gridLayout(rank, blockDims(rank, variant), grid_), to = from;
    to.dims.front() = {kCubeWeightAxis};
    // (Read by every rank of `gathered`, each with its weight columns: its
    // gradient is their sum, reduce-scattered back.)
    to.copies.push_back(gathered);
    RankedTensorType local = typeOf(*x);
    SmallVector<int64_t> shape(local.getShape());
    shape.front() *= q_;
    rows = reshard(b, loc, *x, RankedTensorType::get(shape, local.getElementType()), from, to);
    gatheredRows_[{*x, variant}] = rows;
  }
  // The weight [k, n]: k over (summed, tp_w), n over `gathered`; read
  // gathered over tp_w, a [k/q, n/q] block.
  int64_t kDim = w.parameterDim, nDim = 1 - kDim;
  Layout readAs = wholeLayout(2);
  readAs.dims[size_t(kDim)] = {summed};
  readAs.dims[size_t(nDim)] = {gathered};
  readAs.copies.push_back(kCubeWeightAxis);
  splitOnGrid(w, {{kDim, {summed, kCubeWeightAxis}}, {nDim, {gathered}}}, readAs);
  RankedTensorType rowsType = typeOf(rows);
  SmallVector<int64_t> partShape(rowsType.getShape());
  partShape.back() = typeOf(linear.getWeight()).getDimSize(1);
  auto partType = RankedTensorType::get(partShape, rowsType.getElementType());
  Value part = LinearOp::create(b, loc, partType, rows, linear.getWeight(), Value());
  // The partial sums over `summed`, reduce-scattered into the rows.
  Layout partial = wholeLayout(rank);
  partial.dims.front() = {kCubeWeightAxis};
  partial.dims.back() = {gathered};
  partial.sums.push_back(summed);
  int next = 1 - variant;
  GridDims out = blockDims(rank, next);
  RankedTensorType resultType = localType(typeOf(linear.getResult()), out, grid_);
  Value y = reshard(b, loc, part, resultType, partial, gridLayout(rank, out, grid_));
  if (bias)
    y = AddOp::create(b, loc, resultType, y, columnsOf(b, loc, linear.getBias(), next));
  mark(y, out);
  linear.getResult().replaceAllUsesWith(y);
  linear.erase();
  ++summary_->linears;
  return success();
}

Value GridSplitter::columnsOf(OpBuilder &b, Location loc, Value vector, int variant) {
  std::optional<SplitOperand> p = traceToParameter(vector, 0);
  if (!p || !p->views.empty() || !soleRead(*p) || typeOf(vector).getRank() != 1 ||
      typeOf(vector).getDimSize(0) % q_ != 0)
    return Value();
  std::string column = grid_.columnAxis(variant).str();
  splitOnGrid(*p, {{0, {column}}});
  Layout columns = wholeLayout(1);
  columns.dims[0].push_back(column);
  if (grid_.cube) {
    // (Copies over the rows' other axis, then over tp_w: the gradient is
    // summed over each in turn, so tp_w's gathers and scatters stay the
    // weights' alone.)
    Layout within = columns;
    within.copies.push_back(grid_.rowAxes(variant)[1]);
    Layout shared = within;
    shared.copies.push_back(kCubeWeightAxis);
    Value copies = reshard(b, loc, vector, typeOf(vector), columns, within);
    return reshard(b, loc, copies, typeOf(vector), within, shared);
  }
  Layout copies = columns;
  llvm::append_range(copies.copies, grid_.rowAxes(variant));
  return reshard(b, loc, vector, typeOf(vector), columns, copies);
}

/// A layer or RMS norm over the features of a block (Optimus's layer norm):
/// each rank sums its features, the row's sums are completed over tp_col
/// (an all-reduce of one value per row; its gradient's too), and the rank
/// normalises its block; scale and bias split over the columns as biases
/// are. Norms over more than the last dimension, or with a scale or bias
/// that is not a parameter read once, stay whole.
void GridSplitter::splitNorm(Operation *norm, bool &split) {
  split = false;
  auto layer = dyn_cast<LayerNormOp>(norm);
  auto rms = dyn_cast<RmsNormOp>(norm);
  // A whole input (the embeddings' sum before the first layer) enters the
  // grid here, so that every layer is split alike.
  if (!layer && !rms)
    return;
  Value x = norm->getOperand(0);
  RankedTensorType whole = wholeTypeOf(x);
  if ((!isBlock(x) && dimsOf(x)) || whole.getRank() < 2 || whole.getShape().front() % grid_.rowParts() != 0 ||
      whole.getShape().back() % q_ != 0)
    return;
  // (A block keeps its variant; a whole value enters as variant 0.)
  int variant = dimsOf(x) ? dimsOf(x)->variant : 0;
  RankedTensorType xt = localType(whole, blockDims(whole.getRank(), variant), grid_);
  int64_t rank = xt.getRank(), axis = layer ? int64_t(layer.getAxis()) : int64_t(rms.getAxis());
  Value scale = layer ? layer.getScale() : rms.getScale(), bias = layer ? layer.getBias() : Value();
  // (A scale or bias broadcast from fewer features stays whole, and so does
  // the norm.)
  auto isVectorParameter = [&](Value v) {
    std::optional<SplitOperand> p = v ? traceToParameter(v, 0) : std::nullopt;
    return !v || (p && p->views.empty() && soleRead(*p) && typeOf(v).getShape() == whole.getShape().take_back());
  };
  if ((axis < 0 ? axis + rank : axis) != rank - 1 || !isVectorParameter(scale) || !isVectorParameter(bias))
    return;
  OpBuilder b(norm);
  Location loc = norm->getLoc();
  FailureOr<Value> entered = into(b, norm, x, blockDims(whole.getRank(), variant));
  if (failed(entered))
    return;
  x = *entered;
  b.setInsertionPoint(norm);
  Type element = xt.getElementType();
  double features = double(xt.getShape().back() * q_);
  SmallVector<int64_t> rowShape(xt.getShape());
  rowShape.back() = 1;
  auto rowType = RankedTensorType::get(rowShape, element);
  Layout rows = wholeLayout(rank);
  llvm::append_range(rows.dims.front(), grid_.rowAxes(variant));
  Layout partial = rows, copies = rows;
  partial.sums.push_back(grid_.columnAxis(variant).str());
  copies.copies.push_back(grid_.columnAxis(variant).str());
  auto scalar = [&](double value) -> Value {
    auto type = RankedTensorType::get({}, element);
    return ConstantOp::create(b, loc, cast<ElementsAttr>(DenseElementsAttr::get(type, b.getFloatAttr(element, value))));
  };
  // The mean over the whole row of features: the rank's sum, completed
  // over the row's ranks, divided by the features.
  auto rowMean = [&](Value v) -> Value {
    Value sum = ReduceSumOp::create(b, loc, rowType, v, b.getDenseI64ArrayAttr({rank - 1}), b.getBoolAttr(true));
    Value whole = reshard(b, loc, sum, rowType, partial, copies);
    return MulOp::create(b, loc, rowType, whole, scalar(1.0 / features));
  };
  Value centred = x;
  if (layer)
    centred = SubOp::create(b, loc, xt, x, rowMean(x));
  Value meanSquare = rowMean(MulOp::create(b, loc, xt, centred, centred));
  float epsilon = layer ? layer.getEpsilon().convertToFloat() : rms.getEpsilon().convertToFloat();
  Value spread = SqrtOp::create(b, loc, rowType, AddOp::create(b, loc, rowType, meanSquare, scalar(epsilon)));
  Value y = MulOp::create(b, loc, xt, centred, ReciprocalOp::create(b, loc, rowType, spread));
  if (scale)
    y = MulOp::create(b, loc, xt, y, columnsOf(b, loc, scale, variant));
  if (bias)
    y = AddOp::create(b, loc, xt, y, columnsOf(b, loc, bias, variant));
  mark(y, blockDims(rank, variant));
  norm->getResult(0).replaceAllUsesWith(y);
  norm->erase();
  ++summary_->norms;
  split = true;
}

/// The loss of blocks of logits: vocabulary-parallel over the grid's
/// columns, its rows summed over the grid's rows.
/// An embedding lookup from a table [V, h] read once, as Colossal-AI's
/// vocabulary-parallel embeddings on the grid: the table in blocks, its
/// vocabulary over the rows' axis (tp_row; on the cube tp_in) and its
/// features over the columns' (on the cube also over tp_w: 1/q^3 per rank,
/// as the cube's weights). Each rank looks every token id up in its
/// vocabulary rows (ids outside them give zeros: `mesh_axis`), which makes
/// its columns of the whole result as a partial sum over the rows' axis;
/// the sum is reduce-scattered into the rank's block (on 2.5D's layers and
/// the cube, the rank's rows over the other row axis sliced first). The
/// backward pass is the duals: the block's gradient gathered whole over the
/// rows, scattered into the rank's vocabulary rows.
/// The transposed view through which an output layer reads the table
/// `lookup` looks up (a tied embedding: the table's one read used by the
/// lookup and by a transpose that a bias-free linear layer reads as its
/// weight); null when there is none.
TransposeOp tiedOutputView(GatherOp lookup) {
  auto read = lookup.getData().getDefiningOp<ParamOp>();
  if (!read || std::distance(read->use_begin(), read->use_end()) != 2)
    return nullptr;
  for (Operation *user : read->getUsers()) {
    if (user == lookup.getOperation())
      continue;
    auto view = dyn_cast<TransposeOp>(user);
    if (!view || view.getPerm() != ArrayRef<int64_t>{1, 0} || !view.getResult().hasOneUse())
      return nullptr;
    auto linear = dyn_cast<LinearOp>(*view.getResult().getUsers().begin());
    return linear && linear.getWeight() == view.getResult() && !linear.getBias() ? view : nullptr;
  }
  return nullptr;
}

bool GridSplitter::splitLookup(GatherOp lookup) {
  RankedTensorType result = typeOf(lookup.getResult()), table = typeOf(lookup.getData());
  std::optional<SplitOperand> t = traceToParameter(lookup.getData(), 0);
  // A table tied to the output layer (on a 2D grid): split as that layer's
  // SUMMA weight is, its vocabulary (the product's columns) over tp_col and
  // its features (the rows) over tp_row.
  TransposeOp tied = !t && !grid_.cube && grid_.depth == 1 ? tiedOutputView(lookup) : nullptr;
  if (tied)
    t = SplitOperand{lookup.getData().getDefiningOp<ParamOp>(), 0, {tied}, 1, 0};
  int64_t axis = int64_t(lookup.getAxis());
  // (Token ids, whose leading dimension is the batch's rows; a table of
  // positions, looked up by constants, stays whole.)
  if (!t || (!tied && !t->views.empty()) || !soleRead(*t) || table.getRank() != 2 || (axis != 0 && axis != -2) ||
      lookup.getMeshAxis() || dimsOf(lookup.getIndices()) || !comesFromInput(lookup.getIndices()) ||
      result.getRank() < 2)
    return false;
  // The vocabulary over the rows' axis that is not shared by every layer
  // (2.5D) or tp_w (3D); the features over the columns' (on the cube, and
  // then over tp_w: a 1/q^3 block, moved into the rows by the resharding).
  std::string vocabularyAxis = tied ? kGridColumnAxis : grid_.rowAxes().back();
  SmallVector<std::string, 2> featureAxes = {tied ? kGridRowAxis : grid_.columnAxis().str()};
  if (grid_.cube)
    featureAxes.push_back(kCubeWeightAxis);
  int64_t featureParts = grid_.cube ? q_ * q_ : q_;
  // A vocabulary (or width) the grid does not divide is looked up whole,
  // as the report says; rows it does not divide are refused where the
  // layers split them.
  int64_t vocabulary = table.getDimSize(0), features = table.getDimSize(1), rows = result.getDimSize(0);
  if (vocabulary % q_ != 0 || features % featureParts != 0 || rows % grid_.rowParts() != 0)
    return false;
  splitOnGrid(*t, {{0, {vocabularyAxis}}, {1, featureAxes}});
  if (tied)
    tiedTables_.insert(t->read.getName());
  int64_t rank = result.getRank();
  SmallVector<int64_t> shape(result.getShape());
  shape.back() /= featureParts;
  lookup.getResult().setType(RankedTensorType::get(shape, result.getElementType()));
  lookup.setMeshAxisAttr(StringAttr::get(module_.getContext(), vocabularyAxis));
  OpBuilder b(lookup);
  b.setInsertionPointAfter(lookup);
  Layout partial = wholeLayout(rank);
  partial.dims.back().assign(featureAxes.begin(), featureAxes.end());
  partial.sums = {vocabularyAxis};
  GridDims block = blockDims(rank);
  Value y = reshard(b, lookup.getLoc(), lookup.getResult(), localType(result, block, grid_), partial,
                    gridLayout(rank, block, grid_));
  lookup.getResult().replaceAllUsesExcept(y, y.getDefiningOp());
  mark(y, block);
  ++summary_->lookups;
  return true;
}

LogicalResult GridSplitter::splitLoss(CrossEntropyOp loss, bool &split) {
  split = false;
  Value logits = loss.getLogits();
  RankedTensorType labels = typeOf(loss.getLabels());
  if (!isBlock(logits) || typeOf(logits).getRank() != 2 || labels.getRank() != 1 || loss.getMeshAxis() ||
      loss.getTokenAxis() || dimsOf(loss.getLabels()))
    return success();
  OpBuilder b(loss);
  int variant = dimsOf(logits)->variant;
  Layout rows = wholeLayout(1);
  llvm::append_range(rows.dims[0], grid_.rowAxes(variant));
  RankedTensorType local = RankedTensorType::get({labels.getDimSize(0) / grid_.rowParts()}, labels.getElementType());
  Value mine = reshard(b, loss.getLoc(), loss.getLabels(), local, wholeLayout(1), rows);
  loss.getLabelsMutable().assign(mine);
  loss.setMeshAxis(grid_.columnAxis(variant));
  loss.setTokenAxis(grid_.tokenAxis(variant));
  ++summary_->losses;
  split = true;
  return success();
}

bool GridSplitter::splitInPlace(OpBuilder &b, Operation *op) {
  if (op->getNumResults() != 1)
    return false;
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  auto finish = [&](GridDims d) {
    op->getResult(0).setType(localType(resultType, d, grid_));
    mark(op->getResult(0), d);
    return true;
  };
  // Elementwise, unary: as the operand is split.
  if (isSliceWise(op)) {
    std::optional<GridDims> d = dimsOf(op->getOperand(0));
    return d && finish(*d);
  }
  // Elementwise, binary (numpy broadcasting): the split operand's parts; a
  // whole one of the result's shape sliced alike, a broadcast one sliced or
  // read as copies along each split dimension.
  if (isa<AddOp, SubOp, MulOp, DivOp>(op)) {
    std::optional<GridDims> l = dimsOf(op->getOperand(0)), r = dimsOf(op->getOperand(1));
    if ((!l && !r) || (l && r && *l != *r))
      return false;
    GridDims d = l ? *l : *r;
    SmallVector<Value, 2> parts;
    for (Value operand : op->getOperands()) {
      if (dimsOf(operand)) {
        if (wholeTypeOf(operand).getShape() != resultType.getShape())
          return false;
        parts.push_back(operand);
        continue;
      }
      // (A whole operand of the result's shape divides as the split one does.)
      Value part;
      if (typeOf(operand).getShape() != resultType.getShape())
        part = broadcastInto(b, op->getLoc(), operand, resultType, d);
      else if (FailureOr<Value> sliced = into(b, op, operand, d); succeeded(sliced))
        part = *sliced;
      if (!part)
        return false;
      parts.push_back(part);
    }
    for (auto [i, part] : llvm::enumerate(parts))
      op->setOperand(unsigned(i), part);
    return finish(d);
  }
  // A reshape carries a split dimension to the one it leads (merged
  // dimensions) or to the leading one of those it is cut into.
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    std::optional<GridDims> d = dimsOf(reshape.getInput());
    if (!d)
      return false;
    ArrayRef<int64_t> from = wholeTypeOf(reshape.getInput()).getShape(), to = resultType.getShape();
    auto carried = [&](int64_t dim, int64_t parts) -> std::optional<int64_t> {
      if (auto groups = reshapeGroups(from, to))
        for (auto [t, group] : llvm::enumerate(*groups))
          if (group.first == dim && group.second > group.first)
            return int64_t(t);
      if (auto groups = reshapeGroups(to, from); groups && (*groups)[size_t(dim)].second > (*groups)[size_t(dim)].first)
        if (int64_t lead = (*groups)[size_t(dim)].first; to[size_t(lead)] % parts == 0)
          return lead;
      return std::nullopt;
    };
    std::optional<int64_t> row = carried(d->row, grid_.rowParts()), col = carried(d->col, q_);
    return row && col && *row != *col && finish({*row, *col, d->variant});
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    std::optional<GridDims> d = dimsOf(transpose.getInput());
    if (!d)
      return false;
    ArrayRef<int64_t> perm = transpose.getPerm();
    auto moved = [&](int64_t dim) { return int64_t(llvm::find(perm, dim) - perm.begin()); };
    return finish({moved(d->row), moved(d->col), d->variant});
  }
  // Attention by heads: rows and heads (batch dimensions of the op) split,
  // each rank attends with its heads of its rows.
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    std::optional<GridDims> d = dimsOf(attention.getQuery());
    int64_t rank = resultType.getRank();
    if (!d || dimsOf(attention.getKey()) != d || dimsOf(attention.getValue()) != d || d->row >= rank - 2 ||
        d->col >= rank - 2 || !attention.getDropout().isZero() || attention.getRingAxis())
      return false;
    if (Value mask = attention.getMask()) {
      if (dimsOf(mask))
        return false;
      Value part = broadcastInto(b, op->getLoc(), mask, resultType, *d);
      if (!part)
        return false;
      attention.getMaskMutable().assign(part);
    }
    return finish(*d);
  }
  // A slice along dimensions that are not split; the split ones whole.
  if (auto slice = dyn_cast<SliceOp>(op)) {
    std::optional<GridDims> d = dimsOf(slice.getInput());
    if (!d)
      return false;
    ArrayRef<int64_t> whole = wholeTypeOf(slice.getInput()).getShape();
    SmallVector<int64_t> limits(slice.getLimits());
    for (auto [dim, parts] : {std::pair(d->row, grid_.rowParts()), {d->col, q_}}) {
      if (slice.getStarts()[size_t(dim)] != 0 || slice.getSteps()[size_t(dim)] != 1 ||
          limits[size_t(dim)] < whole[size_t(dim)])
        return false;
      limits[size_t(dim)] = whole[size_t(dim)] / parts;
    }
    slice.setLimits(limits);
    return finish(*d);
  }
  // A concatenation along a dimension that is not split.
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    std::optional<GridDims> d;
    for (Value input : concat.getInputs())
      if (std::optional<GridDims> held = dimsOf(input)) {
        if (d && *d != *held)
          return false;
        d = held;
      }
    int64_t axis =
        int64_t(concat.getAxis()) < 0 ? int64_t(concat.getAxis()) + resultType.getRank() : int64_t(concat.getAxis());
    if (!d || axis == d->row || axis == d->col)
      return false;
    for (OpOperand &input : concat->getOpOperands()) {
      FailureOr<Value> part = into(b, op, input.get(), *d);
      if (failed(part))
        return false;
      input.set(*part);
    }
    return finish(*d);
  }
  return false;
}

LogicalResult GridSplitter::run(TensorGridSummary &summary) {
  summary_ = &summary;
  SmallVector<Operation *> ops;
  for (Operation &op : forward_.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops) {
    bool split = false;
    if (auto linear = dyn_cast<LinearOp>(op)) {
      if (failed(splitLinear(linear, split)))
        return failure();
      if (split)
        continue;
    }
    if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
      if (failed(splitLoss(loss, split)))
        return failure();
      if (split)
        continue;
    }
    if (auto lookup = dyn_cast<GatherOp>(op); lookup && splitLookup(lookup))
      continue;
    splitNorm(op, split);
    if (split)
      continue;
    // A dropout of ratio 0 (an export's inference-off dropout) is the
    // identity on the part.
    if (auto dropout = dyn_cast<DropoutOp>(op);
        dropout && dropout.getRatio().isZero() && dimsOf(dropout.getInput()) && dropout.getMask().use_empty()) {
      dropout.getOutput().replaceAllUsesWith(dropout.getInput());
      dropout->erase();
      continue;
    }
    OpBuilder b(op);
    if (splitInPlace(b, op))
      continue;
    // Anything else computes on whole values: blocks it reads are gathered.
    bool gathered = false;
    for (OpOperand &operand : op->getOpOperands())
      if (dimsOf(operand.get())) {
        operand.set(whole(b, op->getLoc(), operand.get()));
        gathered = true;
      }
    if (gathered && !isa<func::ReturnOp>(op))
      summary.wholeOps.push_back(op->getName().getStringRef().str());
  }
  return success();
}

} // namespace

FailureOr<TensorGridSummary> partitionTensorGrid(ModuleOp module, int64_t side, int64_t depth, bool cube) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "grid tensor parallelism partitions @forward, and the module has none";
  if (side < 2 || depth < 1)
    return module.emitError() << "grid tensor parallelism needs layers of at least 2 x 2 ranks, not " << depth << " of "
                              << side << " x " << side;
  if (module->hasAttr("train.tensor_parallel") || module->hasAttr("train.sequence_parallel_ranks"))
    return module.emitError() << "the module is already partitioned; grid tensor parallelism beside another model "
                                 "axis is not built yet";
  TensorGridSummary summary;
  GridSplitter splitter(module, forward, GridShape{side, cube ? 1 : depth, cube});
  if (failed(splitter.run(summary)))
    return failure();
  if (summary.linears == 0)
    return forward.emitError() << "grid tensor parallelism splits linear layers (each weight read once), and "
                                  "@forward has none";
  Builder b(module.getContext());
  module->setAttr("train.tensor_parallel", b.getI64IntegerAttr(side * side * (cube ? side : depth)));
  module->setAttr("train.tensor_grid", b.getI64IntegerAttr(side));
  if (depth > 1 && !cube)
    module->setAttr("train.tensor_grid_depth", b.getI64IntegerAttr(depth));
  if (cube)
    module->setAttr("train.tensor_cube", b.getUnitAttr());
  return summary;
}

namespace {

/// The partitioner's remark: the grid, what it split, what ran whole.
void reportSplit(ModuleOp module, const std::string &grid, StringRef products, const TensorGridSummary &split) {
  InFlightDiagnostic remark = module.emitRemark();
  remark << grid << ": " << split.linears << " linear layers " << products << ", " << split.norms
         << " norms on blocks, " << split.splitParameters << " parameters in blocks, " << split.losses
         << " losses vocabulary-parallel over the columns, " << split.lookups << " embedding lookups by vocabulary";
  if (split.wholeOps.empty())
    return;
  remark << "; computed whole (their inputs gathered, " << split.gathers << " gathers):";
  llvm::StringMap<int> counts;
  std::vector<std::string> order;
  for (const std::string &name : split.wholeOps)
    if (counts[name]++ == 0)
      order.push_back(name);
  for (const std::string &name : order)
    remark << " " << name << " x" << counts[name];
}

/// The side q of `ranks` = q^power x depth ranks, or 0 when there is none.
int64_t sideOf(int64_t ranks, int power, int64_t depth) {
  for (int64_t q = 1; q <= ranks; ++q) {
    int64_t n = depth;
    for (int i = 0; i < power; ++i)
      n *= q;
    if (n == ranks)
      return q;
    if (n > ranks)
      break;
  }
  return 0;
}

struct TensorGridPass : impl::TensorGridPassBase<TensorGridPass> {
  using TensorGridPassBase::TensorGridPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef pass = getArgument();
    FailureOr<int64_t> planned = plannedRanks(
        module, pass, ranks, [](PlanAttr plan) { return plan.getTpMode() != "1d" ? plan.getTp() : int64_t(1); });
    FailureOr<std::optional<int64_t>> layers = plannedSetting<int64_t>(
        module, pass, "depth", depth ? std::optional<int64_t>(depth) : std::nullopt,
        [](PlanAttr plan) { return plan.getTpMode() == "2.5d" ? plan.getTpDepth() : int64_t(1); });
    FailureOr<std::optional<bool>> onCube =
        plannedSetting<bool>(module, pass, "cube", cube ? std::optional<bool>(true) : std::nullopt,
                             [](PlanAttr plan) { return plan.getTpMode() == "3d"; });
    if (failed(planned) || failed(layers) || failed(onCube))
      return signalPassFailure();
    int64_t tensorRanks = *planned, d = layers->value_or(1);
    bool onCubeGrid = onCube->value_or(false);
    if (tensorRanks == 1)
      return;
    PlanAttr plan = PlanAttr::on(module);
    bool layered = d > 1 || (plan && plan.getTpMode() == "2.5d");
    int64_t q = onCubeGrid ? sideOf(tensorRanks, 3, 1) : d >= 1 ? sideOf(tensorRanks, 2, d) : 0;
    if (q < 2) {
      InFlightDiagnostic error = module.emitError() << pass << ": ";
      if (onCubeGrid)
        error << "tp_mode=3d needs a cube number of tensor ranks (q x q x q), not tp=" << tensorRanks;
      else if (layered)
        error << "tp_mode=2.5d with tp_depth=" << d << " needs tp = q x q x " << d << " tensor ranks (" << d
              << " layers of a q x q grid), not tp=" << tensorRanks;
      else
        error << "tp_mode=2d needs a square number of tensor ranks (a q x q grid), not tp=" << tensorRanks;
      return signalPassFailure();
    }
    FailureOr<TensorGridSummary> split = partitionTensorGrid(module, q, onCubeGrid ? 1 : d, onCubeGrid);
    if (failed(split))
      return signalPassFailure();
    if (!report)
      return;
    std::string side = std::to_string(q) + " x " + std::to_string(q), tp = "tp=" + std::to_string(tensorRanks);
    if (onCubeGrid)
      reportSplit(module, tp + " as a " + side + " x " + std::to_string(q) + " cube (3D)",
                  "as gathered blocks' products, reduce-scattered", *split);
    else if (d > 1)
      reportSplit(module,
                  tp + " as " + std::to_string(d) + " layers of a " + side +
                      " grid (2.5D, the rows split over the layers)",
                  "by SUMMA", *split);
    else
      reportSplit(module, tp + " as a " + side + " grid (2D)", "by SUMMA", *split);
  }
};

} // namespace

} // namespace colossal::partition
