//===- TensorGrid.cpp -----------------------------------------------------===//

#include "passes/partition/TensorGrid.h"
#include "passes/partition/Passes.h"
#include "passes/partition/TensorGridSplitter.h"

#include "colossal/Dialect/Dist/PlannedSetting.h"

#include <cmath>

namespace colossal::partition {

#define GEN_PASS_DEF_TENSORGRIDPASS
#include "passes/partition/Passes.h.inc"

namespace grid {

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

void GridSplitter::splitOnGrid(SplitOperand operand, BlockAxes dims, std::optional<Layout> readAs, int64_t groupDim,
                               int64_t groups) {
  auto parameter = parameters_.lookup<ParameterOp>(operand.read.getName());
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
  if (groups > 1) {
    SmallVector<int64_t> counts(type.getRank(), 1);
    counts[size_t(groupDim)] = groups;
    parameter.setBlockGroups(counts);
  }
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

bool GridSplitter::splitInPlace(OpBuilder &b, Operation *op) {
  // A fused projection's output split into its groups along the columns:
  // each part of the rank's block is the rank's block of that part.
  if (auto split = dyn_cast<SplitOp>(op)) {
    auto groups = grouped_.find(split.getInput());
    std::optional<GridDims> d = dimsOf(split.getInput());
    int64_t rank = typeOf(split.getInput()).getRank();
    int64_t axis = split.getAxis() < 0 ? split.getAxis() + rank : split.getAxis();
    if (groups == grouped_.end() || !d || axis != d->col || int64_t(split.getNumResults()) != groups->second)
      return false;
    SmallVector<int64_t> sizes;
    for (int64_t size : split.getSizes())
      sizes.push_back(size / q_);
    split.setSizes(sizes);
    for (Value part : split.getResults()) {
      part.setType(localType(typeOf(part), *d, grid_));
      mark(part, *d);
    }
    return true;
  }
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
    if (!row || !col || *row == *col)
      return false;
    // (fusedGroupsOf admits only reshapes keeping the grouped columns last.)
    if (auto groups = grouped_.find(reshape.getInput()); groups != grouped_.end())
      grouped_[reshape.getResult()] = groups->second;
    return finish({*row, *col, d->variant});
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
    // (A block of grouped columns is not the whole value's block: gathering
    // it would misplace them, so fusedGroupsOf admits only ops that split
    // it above.)
    bool gathered = false;
    for (OpOperand &operand : op->getOpOperands())
      if (grouped_.count(operand.get()))
        return op->emitError() << "a block of grouped columns (a fused projection's) reaches an op the grid does "
                                  "not split by groups";
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

} // namespace grid

using namespace mlir;
using namespace colossal::dist;
using grid::GridShape;
using grid::GridSplitter;

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