//===- TensorParallel.cpp -------------------------------------------------===//

#include "passes/partition/TensorParallel.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace colossal::partition {

using namespace mlir;
using namespace colossal::train;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

RankedTensorType withDim(RankedTensorType type, int64_t dim, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape[size_t(dim)] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

/// A weight or bias operand as a parameter read seen through transposes:
/// dimension `dim` of the operand is dimension `parameterDim` of the
/// parameter. Each op on the way is used once, so splitting it splits only
/// this use.
struct SplitOperand {
  ParamOp read;
  int64_t parameterDim = 0;
  SmallVector<TransposeOp> views; // from the read outwards
};

std::optional<SplitOperand> traceToParameter(Value value, int64_t dim) {
  SmallVector<TransposeOp> views;
  while (true) {
    if (!value.hasOneUse())
      return std::nullopt;
    Operation *def = value.getDefiningOp();
    if (auto read = dyn_cast_or_null<ParamOp>(def)) {
      std::reverse(views.begin(), views.end());
      return SplitOperand{read, dim, views};
    }
    auto transpose = dyn_cast_or_null<TransposeOp>(def);
    if (!transpose)
      return std::nullopt;
    views.push_back(transpose);
    dim = transpose.getPerm()[size_t(dim)];
    value = transpose.getInput();
  }
}

/// Elementwise ops a split hidden slice passes through unchanged in shape.
bool isSliceWise(Operation *op) {
  return isa<GeluOp, ReluOp, SiluOp, TanhOp, SigmoidOp, ErfOp, NegOp, AbsOp, ExpOp>(op);
}

/// One column-then-row pair: the column linears (one input), the
/// elementwise ops between them and the row linear.
struct Pair {
  LinearOp row;
  SmallVector<LinearOp> columns;
  SmallVector<Operation *> between;
  Value input;
};

/// Walks back from the row linear's input through single-use elementwise
/// ops to the column linears; fails if anything else feeds the region.
bool collectRegion(Value value, Pair &pair, llvm::DenseSet<Operation *> &seen) {
  Operation *def = value.getDefiningOp();
  if (!def || !value.hasOneUse() || !seen.insert(def).second)
    return false;
  if (auto column = dyn_cast<LinearOp>(def)) {
    if (pair.input && pair.input != column.getInput())
      return false;
    pair.input = column.getInput();
    pair.columns.push_back(column);
    return true;
  }
  if (isSliceWise(def)) {
    pair.between.push_back(def);
    return collectRegion(def->getOperand(0), pair, seen);
  }
  if (isa<MulOp, AddOp>(def) && typeOf(def->getOperand(0)) == typeOf(def->getResult(0)) &&
      typeOf(def->getOperand(1)) == typeOf(def->getResult(0))) {
    pair.between.push_back(def);
    return collectRegion(def->getOperand(0), pair, seen) && collectRegion(def->getOperand(1), pair, seen);
  }
  return false;
}

/// Splits a parameter read (and the transposes after it) into slices along
/// `dim` of the parameter.
void splitParameter(ModuleOp module, const SplitOperand &operand, int64_t ranks) {
  ParamOp read = operand.read;
  auto parameter = module.lookupSymbol<ParameterOp>(read.getName());
  RankedTensorType sliced = withDim(parameter.getTensorType(), operand.parameterDim,
                                    parameter.getTensorType().getDimSize(operand.parameterDim) / ranks);
  Builder b(module.getContext());
  parameter.setTypeAttr(TypeAttr::get(sliced));
  parameter.setSplitDimAttr(b.getI64IntegerAttr(operand.parameterDim));
  parameter.setSplitsAttr(b.getI64IntegerAttr(ranks));
  read.getResult().setType(sliced);
  RankedTensorType type = sliced;
  for (TransposeOp view : operand.views) {
    SmallVector<int64_t> shape;
    for (int64_t p : view.getPerm())
      shape.push_back(type.getDimSize(p));
    type = RankedTensorType::get(shape, type.getElementType());
    view.getResult().setType(type);
  }
}

} // namespace

int64_t tensorParallelRanks(ModuleOp module) {
  auto ranks = module->getAttrOfType<IntegerAttr>("train.tensor_parallel");
  return ranks ? ranks.getInt() : 1;
}

FailureOr<TensorParallelSummary> partitionTensorParallel(ModuleOp module, int64_t ranks) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "tensor parallelism partitions @forward, and the module has none";
  if (ranks < 1)
    return module.emitError() << "tensor parallelism over " << ranks << " ranks";
  TensorParallelSummary summary;
  if (ranks == 1)
    return summary;
  if (tensorParallelRanks(module) != 1)
    return module.emitError() << "the module is already partitioned for tensor parallelism";
  // A parameter read twice cannot be split for one use alone.
  llvm::StringMap<int> reads;
  module.walk([&](ParamOp read) { ++reads[read.getName()]; });
  auto soleRead = [&](SplitOperand operand) { return reads[operand.read.getName()] == 1; };

  SmallVector<LinearOp> rows;
  forward.walk([&](LinearOp op) { rows.push_back(op); });
  SmallVector<std::pair<Pair, SmallVector<SplitOperand>>> planned;
  llvm::DenseSet<Operation *> taken;
  for (LinearOp row : rows) {
    if (taken.contains(row))
      continue;
    Pair pair;
    pair.row = row;
    llvm::DenseSet<Operation *> seen;
    if (!collectRegion(row.getInput(), pair, seen))
      continue;
    // The row weight [hidden, out] splits by rows; each column weight
    // [in, hidden] by columns, its bias with it.
    SmallVector<SplitOperand> operands;
    std::optional<SplitOperand> rowWeight = traceToParameter(row.getWeight(), 0);
    if (!rowWeight || !soleRead(*rowWeight))
      continue;
    operands.push_back(*rowWeight);
    bool splittable = true;
    for (LinearOp column : pair.columns) {
      std::optional<SplitOperand> weight = traceToParameter(column.getWeight(), 1);
      splittable = splittable && weight && soleRead(*weight) && !taken.contains(column);
      if (!splittable)
        break;
      operands.push_back(*weight);
      if (Value bias = column.getBias()) {
        std::optional<SplitOperand> b = traceToParameter(bias, 0);
        splittable = b && b->views.empty() && soleRead(*b);
        if (!splittable)
          break;
        operands.push_back(*b);
      }
    }
    if (!splittable)
      continue;
    int64_t hidden = typeOf(row.getInput()).getShape().back();
    if (hidden % ranks != 0)
      return row.emitError() << "tensor parallelism over " << ranks << " ranks splits this linear layer's "
                             << hidden << " input features, which do not divide by " << ranks << " (at "
                             << row.getLoc() << ")";
    taken.insert(row);
    for (LinearOp column : pair.columns)
      taken.insert(column);
    planned.push_back({pair, operands});
  }
  if (planned.empty())
    return forward.emitError() << "tensor parallelism splits column-then-row pairs of linear layers (an MLP "
                                  "block: linear, elementwise ops, linear, each weight read once), and @forward "
                                  "has none";

  MLIRContext *context = module.getContext();
  StringAttr axis = StringAttr::get(context, kTensorAxis);
  for (auto &[pair, operands] : planned) {
    for (const SplitOperand &operand : operands)
      splitParameter(module, operand, ranks);
    summary.splitParameters += int64_t(operands.size());
    // The replicated input enters the split region once, before the first
    // column linear.
    LinearOp first = pair.columns.front();
    for (LinearOp column : pair.columns)
      if (column->isBeforeInBlock(first))
        first = column;
    OpBuilder builder(first);
    Value entered = CopyToRanksOp::create(builder, first.getLoc(), pair.input.getType(), pair.input, axis);
    for (LinearOp column : pair.columns) {
      column.getInputMutable().assign(entered);
      RankedTensorType out = typeOf(column.getResult());
      column.getResult().setType(withDim(out, out.getRank() - 1, out.getShape().back() / ranks));
    }
    // The ops between hold slices: producers first (collected backwards).
    for (Operation *op : llvm::reverse(pair.between))
      op->getResult(0).setType(op->getOperand(0).getType());
    // The row linear's partial sums, summed over the ranks, then its bias.
    LinearOp row = pair.row;
    builder.setInsertionPoint(row);
    Value partial = LinearOp::create(builder, row.getLoc(), row.getType(), row.getInput(), row.getWeight(), Value());
    Value sum = AllReduceOp::create(builder, row.getLoc(), row.getType(), partial, axis);
    if (Value bias = row.getBias())
      sum = AddOp::create(builder, row.getLoc(), row.getType(), sum, bias);
    row.getResult().replaceAllUsesWith(sum);
    row.erase();
    ++summary.pairs;
  }
  module->setAttr("train.tensor_parallel", IntegerAttr::get(IntegerType::get(context, 64), ranks));
  return summary;
}

namespace {

struct TensorParallelPass : public PassWrapper<TensorParallelPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TensorParallelPass)
  TensorParallelPass() = default;
  TensorParallelPass(const TensorParallelPass &other) : PassWrapper(other) {}
  explicit TensorParallelPass(int64_t ranks) { this->ranks = ranks; }
  StringRef getArgument() const final { return "train-tensor-parallel"; }
  StringRef getDescription() const final {
    return "Megatron's 1D tensor parallelism: splits @forward's column-then-row pairs of linear layers over the "
           "ranks of mesh axis tp, with the collectives that keep it exact";
  }
  void runOnOperation() override {
    if (failed(partitionTensorParallel(getOperation(), ranks)))
      signalPassFailure();
  }
  Option<int64_t> ranks{*this, "ranks", llvm::cl::desc("Ranks of the tensor axis"), llvm::cl::init(2)};
};

} // namespace

std::unique_ptr<Pass> createTensorParallelPass(int64_t ranks) { return std::make_unique<TensorParallelPass>(ranks); }

void registerTensorParallelPass() { PassRegistration<TensorParallelPass>(); }

} // namespace colossal::partition
