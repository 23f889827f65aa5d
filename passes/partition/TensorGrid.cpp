//===- TensorGrid.cpp -----------------------------------------------------===//

#include "passes/partition/TensorGrid.h"
#include "passes/partition/Passes.h"

#include "passes/partition/ParameterSlices.h"

#include "colossal/Dialect/Dist/PlannedSetting.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace colossal::partition {

#define GEN_PASS_DEF_TENSORGRIDPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

/// A value's rows split over tp_row and its last dimension over tp_col.
Layout blockLayout(int64_t rank) {
  Layout layout = wholeLayout(rank);
  layout.dims.front().push_back(kGridRowAxis);
  layout.dims.back().push_back(kGridColumnAxis);
  return layout;
}

/// The rank's block of `type` (rows by q, last dimension by q).
RankedTensorType blockType(RankedTensorType type, int64_t q) {
  SmallVector<int64_t> shape(type.getShape());
  shape.front() /= q;
  shape.back() /= q;
  return RankedTensorType::get(shape, type.getElementType());
}

class GridSplitter {
public:
  GridSplitter(ModuleOp module, func::FuncOp forward, int64_t q) : module_(module), forward_(forward), q_(q) {
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
  /// `value` as this rank's block: a slice of a whole value (nothing moves;
  /// its gradient is gathered), or the block it already is.
  FailureOr<Value> block(OpBuilder &b, Operation *user, Value value);
  /// `value` whole: a block gathered over both axes (its gradient is the
  /// rank's block of the whole gradient).
  Value whole(OpBuilder &b, Location loc, Value value);
  bool dividesRowsAndFeatures(RankedTensorType type) const {
    return type.getRank() >= 2 && type.getShape().front() % q_ == 0 && type.getShape().back() % q_ == 0;
  }
  bool soleRead(SplitOperand operand) { return reads_[operand.read.getName()] == 1; }
  /// Makes the parameter of `operand` its block: its dimension
  /// `axes[d]`-split for each operand dimension d (empty: whole).
  void splitOnGrid(SplitOperand operand, ArrayRef<std::pair<int64_t, StringRef>> dims);

  LogicalResult splitLinear(LinearOp linear, bool &split);
  LogicalResult splitLoss(CrossEntropyOp loss, bool &split);
  void splitNorm(Operation *norm, bool &split);
  /// A per-feature parameter ([h]: a bias, a norm's scale) as the rank's
  /// columns, read as copies over the grid's rows; null when it is not a
  /// parameter read once.
  Value columnsOf(OpBuilder &b, Location loc, Value vector);

  ModuleOp module_;
  func::FuncOp forward_;
  int64_t q_;
  llvm::StringMap<int> reads_;
  FlatSymbolRefAttr mesh_;
  /// Values held as blocks.
  llvm::DenseSet<Value> blocks_;
  /// Whole values already sliced into blocks, and blocks already gathered.
  DenseMap<Value, Value> sliced_, gathered_;
  TensorGridSummary *summary_ = nullptr;
};

FlatSymbolRefAttr GridSplitter::mesh() {
  if (mesh_)
    return mesh_;
  OpBuilder builder(module_.getContext());
  auto mesh = MeshOp::create(builder, module_.getLoc(), builder.getStringAttr("tp_grid"),
                             builder.getStrArrayAttr({kGridRowAxis, kGridColumnAxis}),
                             builder.getDenseI64ArrayAttr({q_, q_}), DenseI64ArrayAttr());
  SymbolTable(module_).insert(mesh, module_.getBody()->begin());
  return mesh_ = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
}

FailureOr<Value> GridSplitter::block(OpBuilder &b, Operation *user, Value value) {
  if (blocks_.contains(value))
    return value;
  if (Value known = sliced_.lookup(value))
    return known;
  auto type = cast<RankedTensorType>(value.getType());
  if (!dividesRowsAndFeatures(type))
    return user->emitError() << "2D tensor parallelism on a " << q_ << " x " << q_ << " grid splits the rows "
                             << "(first dimension) and features (last dimension) of " << type << " read by "
                             << user->getName() << ", which do not divide by " << q_ << " (at " << user->getLoc()
                             << ")";
  OpBuilder::InsertionGuard guard(b);
  if (Operation *def = value.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(&forward_.getBody().front());
  Value sliced =
      reshard(b, value.getLoc(), value, blockType(type, q_), wholeLayout(type.getRank()), blockLayout(type.getRank()));
  blocks_.insert(sliced);
  sliced_[value] = sliced;
  return sliced;
}

Value GridSplitter::whole(OpBuilder &b, Location loc, Value value) {
  if (!blocks_.contains(value))
    return value;
  if (Value known = gathered_.lookup(value))
    return known;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.front() *= q_;
  shape.back() *= q_;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(value);
  Value gathered = reshard(b, loc, value, RankedTensorType::get(shape, type.getElementType()),
                           blockLayout(type.getRank()), wholeLayout(type.getRank()));
  gathered_[value] = gathered;
  ++summary_->gathers;
  return gathered;
}

void GridSplitter::splitOnGrid(SplitOperand operand, ArrayRef<std::pair<int64_t, StringRef>> dims) {
  auto parameter = module_.lookupSymbol<ParameterOp>(operand.read.getName());
  RankedTensorType type = parameter.getTensorType();
  Layout layout = wholeLayout(type.getRank());
  SmallVector<int64_t> shape(type.getShape()), blocks(type.getRank(), 1);
  for (auto [dim, axis] : dims) {
    shape[size_t(dim)] /= q_;
    blocks[size_t(dim)] = q_;
    layout.dims[size_t(dim)].push_back(axis.str());
  }
  parameter.setBlockSplits(blocks);
  auto sliced = RankedTensorType::get(shape, type.getElementType());
  parameter.setTypeAttr(TypeAttr::get(sliced));
  parameter->setAttr("dist.sharding", ShardingAttr::get(module_.getContext(), layout));
  operand.read.getResult().setType(sliced);
  for (TransposeOp view : operand.views)
    retypeTranspose(view);
  ++summary_->splitParameters;
}

/// y = x W + b as SUMMA's product of blocks, then the bias block (copies
/// over the grid's rows: its gradient is summed over them).
LogicalResult GridSplitter::splitLinear(LinearOp linear, bool &split) {
  split = false;
  RankedTensorType input = typeOf(linear.getInput()), weight = typeOf(linear.getWeight());
  std::optional<SplitOperand> w = traceToParameter(linear.getWeight(), 0);
  std::optional<SplitOperand> bias =
      linear.getBias() ? traceToParameter(linear.getBias(), 0) : std::optional<SplitOperand>();
  // A weight read elsewhere too (a tied embedding) stays whole.
  if (!w || !soleRead(*w) || (linear.getBias() && (!bias || !bias->views.empty() || !soleRead(*bias))))
    return success();
  // (An input already in blocks holds 1/q of the rows.)
  int64_t k = weight.getDimSize(0), n = weight.getDimSize(1);
  int64_t rows = input.getRank() < 2 ? 0 : input.getShape().front() * (blocks_.contains(linear.getInput()) ? q_ : 1);
  if (input.getRank() < 2 || rows % q_ != 0 || k % q_ != 0 || n % q_ != 0)
    return linear.emitError() << "2D tensor parallelism on a " << q_ << " x " << q_ << " grid splits this linear "
                              << "layer's " << rows << " rows, " << k << " input and " << n
                              << " output features, which must each divide by " << q_ << " (at " << linear.getLoc()
                              << ")";
  OpBuilder b(linear);
  FailureOr<Value> x = block(b, linear, linear.getInput());
  if (failed(x))
    return failure();
  b.setInsertionPoint(linear);
  // The weight [k, n] is the operand seen through transposes: its
  // dimension 0 (k) split over the rows' axis, 1 (n) over the columns'.
  int64_t kDim = w->parameterDim, nDim = 1 - kDim;
  splitOnGrid(*w, {{kDim, kGridRowAxis}, {nDim, kGridColumnAxis}});
  RankedTensorType resultType = blockType(typeOf(linear.getResult()), q_);
  Value y = GridLinearOp::create(b, linear.getLoc(), resultType, *x, linear.getWeight(),
                                 b.getStringAttr(kGridColumnAxis), b.getStringAttr(kGridRowAxis), UnitAttr());
  if (bias) {
    // (A bias read once, of n elements, which q divides: checked above.)
    Value columns = columnsOf(b, linear.getLoc(), linear.getBias());
    y = AddOp::create(b, linear.getLoc(), resultType, y, columns);
  }
  blocks_.insert(y);
  linear.getResult().replaceAllUsesWith(y);
  linear.erase();
  ++summary_->linears;
  split = true;
  return success();
}

Value GridSplitter::columnsOf(OpBuilder &b, Location loc, Value vector) {
  std::optional<SplitOperand> p = traceToParameter(vector, 0);
  if (!p || !p->views.empty() || !soleRead(*p) || typeOf(vector).getRank() != 1 ||
      typeOf(vector).getDimSize(0) % q_ != 0)
    return Value();
  splitOnGrid(*p, {{0, kGridColumnAxis}});
  Layout columns = wholeLayout(1);
  columns.dims[0].push_back(kGridColumnAxis);
  Layout copies = columns;
  copies.copies.push_back(kGridRowAxis);
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
  if ((!layer && !rms) || !blocks_.contains(norm->getOperand(0)))
    return;
  Value x = norm->getOperand(0);
  RankedTensorType xt = typeOf(x);
  int64_t rank = xt.getRank(), axis = layer ? int64_t(layer.getAxis()) : int64_t(rms.getAxis());
  Value scale = layer ? layer.getScale() : rms.getScale(), bias = layer ? layer.getBias() : Value();
  auto isVectorParameter = [&](Value v) {
    std::optional<SplitOperand> p = v ? traceToParameter(v, 0) : std::nullopt;
    return !v || (p && p->views.empty() && soleRead(*p) && typeOf(v).getRank() == 1);
  };
  if ((axis < 0 ? axis + rank : axis) != rank - 1 || !isVectorParameter(scale) || !isVectorParameter(bias))
    return;
  OpBuilder b(norm);
  Location loc = norm->getLoc();
  Type element = xt.getElementType();
  double features = double(xt.getShape().back() * q_);
  SmallVector<int64_t> rowShape(xt.getShape());
  rowShape.back() = 1;
  auto rowType = RankedTensorType::get(rowShape, element);
  Layout rows = wholeLayout(rank);
  rows.dims.front().push_back(kGridRowAxis);
  Layout partial = rows, copies = rows;
  partial.sums.push_back(kGridColumnAxis);
  copies.copies.push_back(kGridColumnAxis);
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
    y = MulOp::create(b, loc, xt, y, columnsOf(b, loc, scale));
  if (bias)
    y = AddOp::create(b, loc, xt, y, columnsOf(b, loc, bias));
  blocks_.insert(y);
  norm->getResult(0).replaceAllUsesWith(y);
  norm->erase();
  ++summary_->norms;
  split = true;
}

/// The loss of blocks of logits: vocabulary-parallel over the grid's
/// columns, its rows summed over the grid's rows.
LogicalResult GridSplitter::splitLoss(CrossEntropyOp loss, bool &split) {
  split = false;
  Value logits = loss.getLogits();
  RankedTensorType labels = typeOf(loss.getLabels());
  if (!blocks_.contains(logits) || typeOf(logits).getRank() != 2 || labels.getRank() != 1 || loss.getMeshAxis() ||
      loss.getTokenAxis() || blocks_.contains(loss.getLabels()))
    return success();
  OpBuilder b(loss);
  Layout rows = wholeLayout(1);
  rows.dims[0].push_back(kGridRowAxis);
  RankedTensorType local = RankedTensorType::get({labels.getDimSize(0) / q_}, labels.getElementType());
  Value mine = reshard(b, loss.getLoc(), loss.getLabels(), local, wholeLayout(1), rows);
  loss.getLabelsMutable().assign(mine);
  loss.setMeshAxis(kGridColumnAxis);
  loss.setTokenAxis(kGridRowAxis);
  ++summary_->losses;
  split = true;
  return success();
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
    splitNorm(op, split);
    if (split)
      continue;
    // A dropout of ratio 0 (an export's inference-off dropout) is the
    // identity on the block.
    if (auto dropout = dyn_cast<DropoutOp>(op); dropout && dropout.getRatio().isZero() &&
                                                blocks_.contains(dropout.getInput()) && dropout.getMask().use_empty()) {
      dropout.getOutput().replaceAllUsesWith(dropout.getInput());
      dropout->erase();
      continue;
    }
    OpBuilder b(op);
    // Elementwise ops compute on the blocks: unary ones as they are, binary
    // ones reading a block and a whole value of the same shape on the
    // whole value's block.
    if (isSliceWise(op) && blocks_.contains(op->getOperand(0))) {
      op->getResult(0).setType(op->getOperand(0).getType());
      blocks_.insert(op->getResult(0));
      continue;
    }
    if (isa<AddOp, SubOp, MulOp, DivOp>(op) &&
        (blocks_.contains(op->getOperand(0)) || blocks_.contains(op->getOperand(1)))) {
      Value l = op->getOperand(0), r = op->getOperand(1);
      auto wholeType = [&](Value v) {
        auto t = typeOf(v);
        if (!blocks_.contains(v))
          return t;
        SmallVector<int64_t> shape(t.getShape());
        shape.front() *= q_, shape.back() *= q_;
        return RankedTensorType::get(shape, t.getElementType());
      };
      if (wholeType(l) == typeOf(op->getResult(0)) && wholeType(r) == typeOf(op->getResult(0))) {
        for (OpOperand &operand : op->getOpOperands()) {
          FailureOr<Value> mine = block(b, op, operand.get());
          if (failed(mine))
            return failure();
          operand.set(*mine);
        }
        op->getResult(0).setType(op->getOperand(0).getType());
        blocks_.insert(op->getResult(0));
        continue;
      }
    }
    // Anything else computes on whole values: blocks it reads are gathered.
    bool gathered = false;
    for (OpOperand &operand : op->getOpOperands())
      if (blocks_.contains(operand.get())) {
        operand.set(whole(b, op->getLoc(), operand.get()));
        gathered = true;
      }
    if (gathered && !isa<func::ReturnOp>(op))
      summary.wholeOps.push_back(op->getName().getStringRef().str());
  }
  return success();
}

} // namespace

int64_t tensorGridSide(ModuleOp module) {
  auto side = module->getAttrOfType<IntegerAttr>("train.tensor_grid");
  return side ? side.getInt() : 0;
}

FailureOr<TensorGridSummary> partitionTensorGrid(ModuleOp module, int64_t side) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "2D tensor parallelism partitions @forward, and the module has none";
  if (side < 2)
    return module.emitError() << "2D tensor parallelism needs a grid of at least 2 x 2 ranks, not " << side << " x "
                              << side;
  if (module->hasAttr("train.tensor_parallel") || module->hasAttr("train.sequence_parallel_ranks"))
    return module.emitError() << "the module is already partitioned; 2D tensor parallelism beside another model "
                                 "axis is not built yet";
  TensorGridSummary summary;
  GridSplitter splitter(module, forward, side);
  if (failed(splitter.run(summary)))
    return failure();
  if (summary.linears == 0)
    return forward.emitError() << "2D tensor parallelism splits linear layers (each weight read once), and "
                                  "@forward has none";
  Builder b(module.getContext());
  module->setAttr("train.tensor_parallel", b.getI64IntegerAttr(side * side));
  module->setAttr("train.tensor_grid", b.getI64IntegerAttr(side));
  return summary;
}

namespace {

struct TensorGridPass : impl::TensorGridPassBase<TensorGridPass> {
  using TensorGridPassBase::TensorGridPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PlanAttr plan = PlanAttr::on(module);
    if (plan && (plan.getTp() == 1 || plan.getTpMode() != "2d"))
      return;
    int64_t ranks = plan ? plan.getTp() : int64_t(side) * side;
    if (ranks < 1)
      return;
    int64_t q = 1;
    while (q * q < ranks)
      ++q;
    if (q * q != ranks) {
      module.emitError() << getArgument() << ": tp_mode=2d needs a square number of tensor ranks (a q x q grid), "
                         << "not tp=" << ranks;
      return signalPassFailure();
    }
    FailureOr<TensorGridSummary> split = partitionTensorGrid(module, q);
    if (failed(split))
      return signalPassFailure();
    if (!report)
      return;
    InFlightDiagnostic remark = module.emitRemark();
    remark << "tp=" << ranks << " as a " << q << " x " << q << " grid (2D): " << split->linears
           << " linear layers by SUMMA, " << split->norms << " norms on blocks, " << split->splitParameters
           << " parameters in blocks, " << split->losses << " losses vocabulary-parallel over the columns";
    if (!split->wholeOps.empty()) {
      remark << "; computed whole (their inputs gathered, " << split->gathers << " gathers):";
      llvm::StringMap<int> counts;
      std::vector<std::string> order;
      for (const std::string &name : split->wholeOps)
        if (counts[name]++ == 0)
          order.push_back(name);
      for (const std::string &name : order)
        remark << " " << name << " x" << counts[name];
    }
  }
};

} // namespace

} // namespace colossal::partition
