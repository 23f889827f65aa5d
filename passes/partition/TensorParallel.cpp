//===- TensorParallel.cpp -------------------------------------------------===//

#include "passes/partition/TensorParallel.h"
#include "passes/partition/Passes.h"

#include "passes/partition/Resharding.h"

#include "passes/partition/ParameterSlices.h"
#include "passes/partition/VocabularyParallel.h"

#include "colossal/Dialect/Dist/PlannedSetting.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace colossal::partition {

#define GEN_PASS_DEF_TENSORPARALLELPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;

namespace {

/// One column-then-row pair: the column linears (one input), the ops
/// between them, each value between split along one dimension, and the row
/// linear. Operands of the ops between that are not split (a rotary
/// table, an attention mask: size 1 along the split dimension) are
/// replicated and enter through copies.
struct Pair {
  LinearOp row;
  SmallVector<LinearOp> columns;
  llvm::SetVector<Operation *> between;
  /// In the order found, so diagnostics and rewrites do not depend on
  /// pointer values.
  llvm::MapVector<Value, int64_t> splitDim;
  /// Values split in groups (a fused QKV projection's output: its query,
  /// key and value columns each split, so a rank holds its heads of all
  /// three): the split dimension is `groups` equal parts, each split by the
  /// ranks. Absent: 1.
  llvm::DenseMap<Value, int64_t> groups;
  SmallVector<OpOperand *> replicated;
  Value input;
  int64_t ranks = 1;
};

/// Visits `value`, split along `dim` (in `groups` equal parts, each split),
/// and what it is computed from, back to the column linears; fails on
/// anything the split cannot pass.
bool visitSplit(Value value, int64_t dim, Pair &pair, int64_t groups = 1) {
  if (auto known = pair.splitDim.find(value); known != pair.splitDim.end())
    return known->second == dim && pair.groups.lookup(value) == (groups > 1 ? groups : 0);
  RankedTensorType type = typeOf(value);
  if (dim < 0 || dim >= type.getRank())
    return false;
  Operation *def = value.getDefiningOp();
  if (!def)
    return false;
  pair.splitDim[value] = dim;
  if (groups > 1)
    pair.groups[value] = groups;
  if (auto column = dyn_cast<LinearOp>(def)) {
    if (dim != type.getRank() - 1 || (pair.input && pair.input != column.getInput()))
      return false;
    pair.input = column.getInput();
    pair.columns.push_back(column);
    return true;
  }
  pair.between.insert(def);
  // An operand that is 1 (or absent) along the split dimension is
  // replicated; any other is split along the same dimension.
  auto operand = [&](OpOperand &use, int64_t at, int64_t operandGroups = 1) {
    RankedTensorType t = typeOf(use.get());
    int64_t aligned = at - (type.getRank() - t.getRank());
    if (aligned < 0 || t.getDimSize(aligned) == 1) {
      pair.replicated.push_back(&use);
      return true;
    }
    return visitSplit(use.get(), aligned, pair, operandGroups);
  };
  if (isSliceWise(def))
    return visitSplit(def->getOperand(0), dim, pair, groups);
  if (auto dropout = dyn_cast<DropoutOp>(def); dropout && groups == 1) {
    // Each rank draws its slice of the whole tensor's mask (nn.Transformer's
    // dropout between its two feed-forward linears); the mask is split too.
    if (dropout.getMeshAxis() || value != dropout.getOutput())
      return false;
    pair.splitDim[dropout.getMask()] = dim;
    return visitSplit(dropout.getInput(), dim, pair);
  }
  if (isa<MulOp, AddOp, SubOp, DivOp>(def))
    return operand(def->getOpOperand(0), dim, groups) && operand(def->getOpOperand(1), dim, groups);
  if (auto reshape = dyn_cast<ReshapeOp>(def); reshape && groups > 1) {
    // A grouped value passes a reshape that keeps its split dimension whole
    // and alone: a fused projection computed on flattened tokens ([b*s, 3h]
    // to [b, s, 3h], as Hugging Face's Conv1D does).
    ArrayRef<int64_t> from = typeOf(reshape.getInput()).getShape(), to = type.getShape();
    int64_t inner = 1;
    for (int64_t d = dim + 1; d < type.getRank(); ++d)
      inner *= to[size_t(d)];
    for (int64_t d = int64_t(from.size()) - 1, product = 1; d >= 0; product *= from[size_t(d)], --d)
      if (product == inner && from[size_t(d)] == to[size_t(dim)])
        return visitSplit(reshape.getInput(), d, pair, groups);
    return false;
  }
  if (groups > 1)
    return false; // grouped values pass elementwise ops and such reshapes only
  if (auto transpose = dyn_cast<TransposeOp>(def))
    return visitSplit(transpose.getInput(), transpose.getPerm()[size_t(dim)], pair);
  if (auto reshape = dyn_cast<ReshapeOp>(def)) {
    // The split dimension must lead its group on both sides: [b, s, h*d]
    // split along h*d is [b, s, h, d] split along h.
    ArrayRef<int64_t> from = typeOf(reshape.getInput()).getShape(), to = type.getShape();
    std::optional<SmallVector<std::pair<int64_t, int64_t>>> groups = reshapeGroups(from, to);
    if (!groups) {
      // The other way round: dimensions of `to` grouped into one of `from`.
      std::optional<SmallVector<std::pair<int64_t, int64_t>>> inverse = reshapeGroups(to, from);
      if (!inverse)
        return false;
      for (auto [d, group] : llvm::enumerate(*inverse))
        if (group.first == dim)
          return visitSplit(reshape.getInput(), int64_t(d), pair);
      return false;
    }
    auto [first, last] = (*groups)[size_t(dim)];
    return visitSplit(reshape.getInput(), first, pair);
  }
  if (auto slice = dyn_cast<SliceOp>(def)) {
    // Whole along the split dimension, or one of equal parts of it (the
    // query, key or value of a fused projection): the input is split in
    // groups.
    int64_t size = typeOf(slice.getInput()).getDimSize(dim);
    int64_t start = slice.getStarts()[size_t(dim)], limit = std::min(slice.getLimits()[size_t(dim)], size);
    if (slice.getSteps()[size_t(dim)] != 1)
      return false;
    if (start == 0 && limit == size)
      return visitSplit(slice.getInput(), dim, pair);
    int64_t part = limit - start;
    if (part <= 0 || size % part != 0 || start % part != 0)
      return false;
    return visitSplit(slice.getInput(), dim, pair, size / part);
  }
  if (auto split = dyn_cast<SplitOp>(def)) {
    // Every result is in the region along the same dimension. Split along
    // it into equal parts (a fused projection's query, key and value), the
    // input is split in groups.
    for (Value result : split.getResults())
      if (result != value) {
        if (auto known = pair.splitDim.find(result); known != pair.splitDim.end() && known->second != dim)
          return false;
        pair.splitDim[result] = dim;
      }
    int64_t rank = typeOf(split.getInput()).getRank(), axis = int64_t(split.getAxis());
    if ((axis < 0 ? axis + rank : axis) != dim)
      return visitSplit(split.getInput(), dim, pair);
    ArrayRef<int64_t> sizes = split.getSizes();
    if (llvm::any_of(sizes, [&](int64_t size) { return size != sizes.front(); }))
      return false;
    return visitSplit(split.getInput(), dim, pair, int64_t(sizes.size()));
  }
  if (auto concat = dyn_cast<ConcatOp>(def)) {
    if (int64_t(concat.getAxis()) == dim || int64_t(concat.getAxis()) == dim - type.getRank())
      return false;
    for (Value input : concat.getInputs())
      if (!visitSplit(input, dim, pair))
        return false;
    return true;
  }
  if (auto attention = dyn_cast<AttentionOp>(def)) {
    // Heads (a batch dimension) split: each rank attends with its heads
    // (under dropout, the heads: the masks are the rank's heads' slice).
    if (dim >= type.getRank() - 2 || (!attention.getDropout().isZero() && dim != type.getRank() - 3) ||
        attention.getDropoutAxis())
      return false;
    if (attention.getMask() && !operand(def->getOpOperand(3), dim))
      return false;
    return visitSplit(attention.getQuery(), dim, pair) && visitSplit(attention.getKey(), dim, pair) &&
           visitSplit(attention.getValue(), dim, pair);
  }
  return false;
}

/// Walks back from the row linear's input; every value between is read
/// only inside the pair.
bool collectRegion(Pair &pair) {
  if (!visitSplit(pair.row.getInput(), typeOf(pair.row.getInput()).getRank() - 1, pair))
    return false;
  for (auto [value, dim] : pair.splitDim)
    for (Operation *user : value.getUsers())
      if (user != pair.row.getOperation() && !pair.between.contains(user))
        return false;
  return !pair.columns.empty();
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
  if (auto sequence = module->getAttrOfType<IntegerAttr>("train.sequence_parallel_ranks"))
    return module.emitError() << "the module is already split over a sequence axis of " << sequence.getInt()
                              << " ranks; a tensor axis beside it is not built yet (sp_mode=megatron puts the "
                                 "sequence split on the tensor axis)";
  // A parameter read twice cannot be split for one use alone.
  llvm::StringMap<int> reads;
  module.walk([&](ParamOp read) { ++reads[read.getName()]; });
  auto soleRead = [&](SplitOperand operand) { return reads[operand.read.getName()] == 1; };

  SmallVector<LinearOp> rows;
  forward.walk([&](LinearOp op) { rows.push_back(op); });
  std::vector<std::pair<Pair, SmallVector<SplitOperand>>> planned;
  llvm::DenseSet<Operation *> taken;
  for (LinearOp row : rows) {
    if (taken.contains(row))
      continue;
    Pair pair;
    pair.row = row;
    pair.ranks = ranks;
    if (!collectRegion(pair))
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
      // A fused projection's columns split in groups (its query, key and
      // value parts each by the ranks).
      int64_t groups = std::max<int64_t>(1, pair.groups.lookup(column.getResult()));
      std::optional<SplitOperand> weight = traceToParameter(column.getWeight(), 1);
      splittable = splittable && weight && soleRead(*weight) && !taken.contains(column);
      if (!splittable)
        break;
      weight->groups = groups;
      operands.push_back(*weight);
      if (Value bias = column.getBias()) {
        std::optional<SplitOperand> b = traceToParameter(bias, 0);
        splittable = b && b->views.empty() && soleRead(*b);
        if (!splittable)
          break;
        b->groups = groups;
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
    // Attention heads: every value between is split along one dimension
    // (each group of a fused projection's output by the ranks).
    for (auto [value, dim] : pair.splitDim)
      if (int64_t size = typeOf(value).getDimSize(dim) / std::max<int64_t>(1, pair.groups.lookup(value));
          size % ranks != 0)
        return row.emitError() << "tensor parallelism over " << ranks << " ranks splits the block that ends here "
                               << "along a dimension of size " << size << " (" << value.getType()
                               << "; attention heads), which does not divide by " << ranks << " (at "
                               << row.getLoc() << ")";
    taken.insert(row);
    for (LinearOp column : pair.columns)
      taken.insert(column);
    planned.push_back({pair, operands});
  }

  MLIRContext *context = module.getContext();
  StringAttr axis = StringAttr::get(context, kTensorAxis);
  SymbolTable parameters(module);
  for (auto &[pair, operands] : planned) {
    for (const SplitOperand &operand : operands)
      splitParameter(parameters, operand, ranks);
    summary.splitParameters += int64_t(operands.size());
    // The replicated input enters the split region once, before the first
    // column linear.
    LinearOp first = pair.columns.front();
    for (LinearOp column : pair.columns)
      if (column->isBeforeInBlock(first))
        first = column;
    OpBuilder builder(first);
    Value entered = copyToRanks(builder, first.getLoc(), pair.input, axis, ranks);
    for (LinearOp column : pair.columns)
      column.getInputMutable().assign(entered);
    // Replicated operands of the ops between enter through copies too (their
    // gradients, if any, are the ranks' parts summed).
    for (OpOperand *use : pair.replicated) {
      builder.setInsertionPoint(use->getOwner());
      use->set(copyToRanks(builder, use->getOwner()->getLoc(), use->get(), axis, ranks));
    }
    // Every split value holds its slice; a slice op takes the whole of the
    // (now smaller) split dimension.
    for (auto [value, dim] : pair.splitDim) {
      RankedTensorType type = typeOf(value);
      value.setType(withDim(type, dim, type.getDimSize(dim) / ranks));
    }
    for (Operation *op : pair.between)
      if (auto slice = dyn_cast<SliceOp>(op)) {
        int64_t dim = pair.splitDim.lookup(slice.getResult());
        int64_t local = typeOf(slice.getInput()).getDimSize(dim);
        SmallVector<int64_t> starts(slice.getStarts()), limits(slice.getLimits());
        if (int64_t groups = pair.groups.lookup(slice.getInput()); groups > 1) {
          // Group g of the whole input is group g of the rank's part.
          int64_t group = starts[size_t(dim)] / (local * ranks / groups);
          starts[size_t(dim)] = group * (local / groups);
          limits[size_t(dim)] = (group + 1) * (local / groups);
        } else {
          limits[size_t(dim)] = local;
        }
        slice.setStarts(starts);
        slice.setLimits(limits);
      } else if (auto split = dyn_cast<SplitOp>(op)) {
        // Split along the split dimension: each part is the rank's share.
        int64_t rank = typeOf(split.getInput()).getRank(), axis = int64_t(split.getAxis());
        if ((axis < 0 ? axis + rank : axis) == pair.splitDim.lookup(split.getResult(0))) {
          SmallVector<int64_t> sizes;
          for (int64_t size : split.getSizes())
            sizes.push_back(size / ranks);
          split.setSizes(sizes);
        }
      } else if (auto attention = dyn_cast<AttentionOp>(op); attention && !attention.getDropout().isZero()) {
        attention.setDropoutAxisAttr(axis);
      } else if (auto dropout = dyn_cast<DropoutOp>(op)) {
        dropout.setMeshAxisAttr(axis);
        dropout.setMeshDimAttr(builder.getI64IntegerAttr(pair.splitDim.lookup(dropout.getOutput())));
      }
    // The row linear's partial sums, summed over the ranks, then its bias.
    LinearOp row = pair.row;
    builder.setInsertionPoint(row);
    Value partial = LinearOp::create(builder, row.getLoc(), row.getType(), row.getInput(), row.getWeight(), Value());
    Value sum = sumOverRanks(builder, row.getLoc(), partial, axis, ranks);
    if (Value bias = row.getBias())
      sum = AddOp::create(builder, row.getLoc(), row.getType(), sum, bias);
    row.getResult().replaceAllUsesWith(sum);
    row.erase();
    ++summary.pairs;
  }
  summary.vocabulary = splitVocabulary(module, forward, ranks, axis);
  summary.splitParameters += summary.vocabulary.splitParameters;
  if (summary.splitParameters == 0)
    return forward.emitError() << "tensor parallelism splits column-then-row pairs of linear layers (an MLP "
                                  "block: linear, elementwise ops, linear; an attention block with separate "
                                  "query, key and value projections; each weight read once) and vocabulary "
                                  "tables (embeddings of token ids, output layers scoring a cross-entropy), and "
                                  "@forward has none";
  module->setAttr("train.tensor_parallel", IntegerAttr::get(IntegerType::get(context, 64), ranks));
  return summary;
}

namespace {

struct TensorParallelPass : impl::TensorParallelPassBase<TensorParallelPass> {
  using TensorParallelPassBase::TensorParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dist::PlanAttr plan = dist::PlanAttr::on(module); plan && plan.getTp() > 1 && plan.getTpMode() != "1d")
      return; // train-tensor-grid's
    FailureOr<int64_t> planned =
        dist::plannedRanks(module, getArgument(), ranks, [](dist::PlanAttr plan) { return plan.getTp(); });
    if (failed(planned))
      return signalPassFailure();
    ranks = *planned;
    if (ranks == 1)
      return;
    FailureOr<TensorParallelSummary> split = partitionTensorParallel(module, ranks);
    if (failed(split))
      return signalPassFailure();
    if (!report)
      return;
    const VocabularySummary &vocabulary = split->vocabulary;
    getOperation().emitRemark() << "tp=" << int64_t(ranks) << ": " << split->pairs
                                << " column-then-row blocks split (MLP and attention), " << vocabulary.tables
                                << " vocabulary tables split by rows (" << vocabulary.lookups << " lookups, "
                                << vocabulary.outputLayers << " output layers), " << split->splitParameters
                                << " parameters sliced; the rest replicated";
    for (const std::string &padded : vocabulary.padded)
      getOperation().emitRemark() << "note: tp=" << int64_t(ranks)
                                  << " pads a vocabulary with rows of zeros: " << padded << " (the weights file and checkpoints hold the padded table)";
    for (const std::string &whole : vocabulary.whole)
      getOperation().emitRemark() << "note: tp=" << int64_t(ranks) << " keeps a vocabulary table whole: " << whole;
  }
};

} // namespace

} // namespace colossal::partition
