//===- SequenceAxisParallel.cpp -------------------------------------------===//

#include "passes/partition/SequenceAxisParallel.h"
#include "passes/partition/Passes.h"

#include "passes/partition/ParameterSlices.h"
#include "passes/partition/Resharding.h"
#include "passes/partition/TensorParallel.h"
#include "passes/partition/TokenSplit.h"

#include "colossal/Dialect/Dist/PlannedSetting.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace colossal::partition {

#define GEN_PASS_DEF_SEQUENCEAXISPARALLELPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

/// How a value is split by tokens: dimension `dim` holds `groups` runs of a
/// sequence's tokens (one unless a reshape merged the dimensions before it
/// in, as [batch, tokens] into rows), and the rank holds its slice of the
/// tokens of each run.
struct TokenSplit {
  int64_t dim = 0, groups = 1;
};

/// The product of `shape`'s dimensions up to and including `dim`.
int64_t extentThrough(ArrayRef<int64_t> shape, int64_t dim) {
  int64_t product = 1;
  for (int64_t d = 0; d <= dim; ++d)
    product *= shape[size_t(d)];
  return product;
}

class Partitioner {
public:
  Partitioner(func::FuncOp forward, int64_t ranks, int64_t tokens, SequenceAlgorithm algorithm)
      : forward_(forward), ranks_(ranks), tokens_(tokens), algorithm_(algorithm),
        axis_(StringAttr::get(forward.getContext(), kSequenceAxis)) {}

  FailureOr<SequenceAxisSummary> run();

private:
  LogicalResult splitInputs();
  LogicalResult visit(Operation &op);
  LogicalResult visitAttention(AttentionOp attention);
  LogicalResult ringAttention(AttentionOp attention);
  LogicalResult visitCrossEntropy(CrossEntropyOp loss);
  std::optional<TokenSplit> reshaped(ReshapeOp reshape, TokenSplit from);
  /// The replicated operands of an op computing on the rank's tokens.
  LogicalResult replicatedOperands(Operation &op, TokenSplit at, ArrayRef<unsigned> copied);
  Value copyOf(Value replicated);
  /// The rank's tokens of a replicated value that has them along `dim`, cut
  /// once (one all-gather of its gradient however many ops read it).
  Value rankSliceOf(Value replicated, int64_t dim);
  /// A split value's type before the split (its slice's, times the ranks,
  /// for those made with it).
  RankedTensorType wholeType(Value v);
  bool needsGradient(Value v);
  LogicalResult retype();

  func::FuncOp forward_;
  int64_t ranks_, tokens_;
  SequenceAlgorithm algorithm_;
  StringAttr axis_;
  SequenceAxisSummary summary_;
  llvm::MapVector<Value, TokenSplit> split_;
  /// Split values created with their slice's type already.
  llvm::DenseSet<Value> sliceTyped_;
  llvm::DenseMap<Value, Value> copies_, gathered_;
  llvm::DenseMap<std::pair<Value, int64_t>, Value> rankSlices_;
  llvm::DenseMap<Value, bool> needsGradient_;
};

FailureOr<SequenceAxisSummary> Partitioner::run() {
  if (failed(splitInputs()))
    return failure();
  Block &body = forward_.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
    if (failed(visit(op)))
      return failure();
  if (failed(retype()))
    return failure();
  summary_.splitValues = int64_t(split_.size());
  return summary_;
}

/// A value of rank `rank` split along `dim` over the sequence axis.
static Layout splitAlong(int64_t rank, int64_t dim) { return splitLayout(rank, dim, kSequenceAxis); }

LogicalResult Partitioner::splitInputs() {
  OpBuilder builder = OpBuilder::atBlockBegin(&forward_.getBody().front());
  for (BlockArgument argument : forward_.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (!type || type.getRank() < 2 || type.getDimSize(1) != tokens_ || argument.use_empty())
      continue;
    Value slice = reshard(builder, argument.getLoc(), argument, withDim(type, 1, tokens_ / ranks_),
                          wholeLayout(type.getRank()), splitAlong(type.getRank(), 1), kSequenceAxis, ranks_);
    argument.replaceAllUsesExcept(slice, slice.getDefiningOp());
    split_[slice] = {1, 1};
    sliceTyped_.insert(slice);
    ++summary_.inputs;
  }
  if (summary_.inputs == 0)
    return forward_.emitError() << "sequence parallelism splits the inputs whose dimension 1 is the "
                                << tokens_ << " tokens of the attention layers, and @forward has none";
  return success();
}

RankedTensorType Partitioner::wholeType(Value v) {
  RankedTensorType type = typeOf(v);
  if (!sliceTyped_.count(v))
    return type;
  int64_t dim = split_.lookup(v).dim;
  return withDim(type, dim, type.getDimSize(dim) * ranks_);
}

bool Partitioner::needsGradient(Value v) {
  if (auto it = needsGradient_.find(v); it != needsGradient_.end())
    return it->second;
  bool needs = false;
  if (Operation *def = v.getDefiningOp()) {
    needs = isa<ParamOp>(def);
    for (Value operand : def->getOperands())
      needs = needs || needsGradient(operand);
  }
  return needsGradient_[v] = needs;
}

Value Partitioner::copyOf(Value replicated) {
  Value &copy = copies_[replicated];
  if (!copy) {
    // One copy per value, where it is made: its gradient sums every split
    // reader's part in one all-reduce.
    OpBuilder builder(forward_.getContext());
    if (Operation *def = replicated.getDefiningOp())
      builder.setInsertionPointAfter(def);
    else
      builder.setInsertionPointToStart(&forward_.getBody().front());
    copy = copyToRanks(builder, replicated.getLoc(), replicated, kSequenceAxis, ranks_);
    ++summary_.copies;
  }
  return copy;
}

Value Partitioner::rankSliceOf(Value replicated, int64_t dim) {
  Value &slice = rankSlices_[{replicated, dim}];
  if (!slice) {
    OpBuilder builder(forward_.getContext());
    builder.setInsertionPointAfterValue(replicated);
    RankedTensorType type = typeOf(replicated);
    slice = reshard(builder, replicated.getLoc(), replicated, withDim(type, dim, tokens_ / ranks_),
                    wholeLayout(type.getRank()), splitAlong(type.getRank(), dim), kSequenceAxis, ranks_);
    ++summary_.rankSlices;
  }
  return slice;
}

LogicalResult Partitioner::replicatedOperands(Operation &op, TokenSplit at, ArrayRef<unsigned> copied) {
  RankedTensorType resultType = typeOf(op.getResult(0));
  for (OpOperand &use : op.getOpOperands()) {
    Value value = use.get();
    if (split_.count(value))
      continue;
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type)
      continue;
    bool gradient = isa<FloatType>(type.getElementType()) && needsGradient(value);
    if (llvm::is_contained(copied, use.getOperandNumber())) {
      if (gradient)
        use.set(copyOf(value));
      continue;
    }
    int64_t aligned = at.dim - (resultType.getRank() - type.getRank());
    if (aligned < 0 || type.getDimSize(aligned) == 1) {
      if (gradient)
        use.set(copyOf(value));
    } else if (type.getDimSize(aligned) == tokens_ && at.groups == 1) {
      use.set(rankSliceOf(value, aligned));
    } else {
      return op.emitError() << "sequence parallelism: operand " << use.getOperandNumber() << " (" << type
                            << ") neither broadcasts over the " << tokens_ << " tokens nor has them";
    }
  }
  return success();
}

std::optional<TokenSplit> Partitioner::reshaped(ReshapeOp reshape, TokenSplit from) {
  // The tokens stay split if a result dimension ends where the split one
  // ends and holds whole runs of tokens: the rank's elements keep their
  // order (every run's slice, run after run), so the reshape of the slice
  // is the slice of the reshape.
  RankedTensorType input = wholeType(reshape.getInput());
  ArrayRef<int64_t> in = input.getShape(), out = typeOf(reshape.getResult()).getShape();
  int64_t end = extentThrough(in, from.dim);
  for (int64_t d = 0; d < int64_t(out.size()); ++d)
    if (extentThrough(out, d) == end && out[size_t(d)] % tokens_ == 0)
      return TokenSplit{d, out[size_t(d)] / tokens_};
  return std::nullopt;
}

LogicalResult Partitioner::visitAttention(AttentionOp attention) {
  for (Value operand : {attention.getQuery(), attention.getKey(), attention.getValue()}) {
    auto it = split_.find(operand);
    RankedTensorType type = wholeType(operand);
    if (it == split_.end() || it->second.groups != 1 || type.getRank() != 4 || it->second.dim != 2)
      return attention.emitError() << "sequence parallelism runs self-attention whose queries, keys and "
                                      "values are [batch, heads, tokens, head size] split by tokens; this one's "
                                   << (it == split_.end() ? std::string("operand is not split by tokens")
                                                          : "operand is " + std::to_string(type.getRank()) +
                                                                "-D, split along dimension " +
                                                                std::to_string(it->second.dim));
    if (algorithm_ == SequenceAlgorithm::AllToAll && type.getDimSize(1) % ranks_ != 0)
      return attention.emitError() << "sequence parallelism gives each of the " << ranks_
                                   << " ranks its heads of attention (all-to-all), and " << type << " has "
                                   << type.getDimSize(1) << " heads, which do not divide by " << ranks_;
  }
  if (!attention.getDropout().isZero() && algorithm_ == SequenceAlgorithm::AllToAll) {
    // All-to-all leaves each rank its heads of every token: the masks are
    // the rank's heads' slice of the whole's. (A ring indexes them by its
    // queries' and each key block's places in the sequence.)
    if (attention.getDropoutAxis())
      return attention.emitError() << "sequence parallelism splits heads that the " << *attention.getDropoutAxis()
                                   << " axis split already, and attention dropout keys its masks by one axis's heads";
    attention.setDropoutAxisAttr(StringAttr::get(attention.getContext(), kSequenceAxis));
  }
  if (algorithm_ == SequenceAlgorithm::Ring)
    return ringAttention(attention);
  OpBuilder builder(attention);
  // Queries, keys and values: split by tokens -> split by heads.
  for (unsigned i = 0; i < 3; ++i) {
    Value operand = attention->getOperand(i);
    RankedTensorType type = wholeType(operand);
    Value byHeads = reshard(builder, attention.getLoc(), operand, withDim(type, 1, type.getDimSize(1) / ranks_),
                            splitAlong(4, 2), splitAlong(4, 1), kSequenceAxis, ranks_);
    attention->setOperand(i, byHeads);
    ++summary_.allToAlls;
  }
  // A mask split by key tokens is gathered whole (once per mask); one per
  // head would need the rank's heads.
  if (Value mask = attention.getMask()) {
    RankedTensorType type = wholeType(mask);
    if (type.getRank() != 4 || type.getDimSize(1) != 1)
      return attention.emitError() << "sequence parallelism takes attention masks that broadcast over "
                                      "the heads, and this one is "
                                   << type;
    if (auto it = split_.find(mask); it != split_.end()) {
      if (it->second.dim != 3 || it->second.groups != 1 || type.getDimSize(2) != 1)
        return attention.emitError() << "sequence parallelism gathers a mask split by key tokens; this "
                                        "one ("
                                     << type << ") is split along dimension " << it->second.dim;
      Value &whole = gathered_[mask];
      if (!whole) {
        OpBuilder after(mask.getContext());
        after.setInsertionPointAfterValue(mask);
        Layout copies = wholeLayout(4);
        copies.copies = {kSequenceAxis};
        whole = reshard(after, attention.getLoc(), mask, type, splitAlong(4, 3), copies, kSequenceAxis, ranks_);
        ++summary_.gathers;
      }
      attention.getMaskMutable().assign(whole);
    }
  }
  // The rank's heads over every token, then back to its tokens.
  RankedTensorType whole = typeOf(attention.getResult());
  attention.getResult().setType(withDim(whole, 1, whole.getDimSize(1) / ranks_));
  builder.setInsertionPointAfter(attention);
  Value byTokens = reshard(builder, attention.getLoc(), attention.getResult(), withDim(whole, 2, tokens_ / ranks_),
                           splitAlong(4, 1), splitAlong(4, 2), kSequenceAxis, ranks_);
  attention.getResult().replaceAllUsesExcept(byTokens, byTokens.getDefiningOp());
  split_[byTokens] = {2, 1};
  sliceTyped_.insert(byTokens);
  ++summary_.allToAlls;
  ++summary_.attentions;
  return success();
}

LogicalResult Partitioner::ringAttention(AttentionOp attention) {
  // The rank's queries against every block of keys, passed around the
  // ring with their slice of the mask.
  if (Value mask = attention.getMask()) {
    RankedTensorType type = wholeType(mask);
    if (type.getRank() != 4 || type.getDimSize(1) != 1 || type.getDimSize(2) != 1 || type.getDimSize(3) != tokens_ ||
        !isa<FloatType>(type.getElementType()))
      return attention.emitError() << "ring attention takes an additive mask of the keys, [batch, 1, 1, tokens], and "
                                      "this one is "
                                   << type;
    auto it = split_.find(mask);
    if (it == split_.end())
      attention.getMaskMutable().assign(rankSliceOf(mask, 3));
    else if (it->second.dim != 3 || it->second.groups != 1)
      return attention.emitError() << "ring attention passes a mask split by key tokens around the ring; this one ("
                                   << type << ") is split along dimension " << it->second.dim;
  }
  attention.setRingAxisAttr(axis_);
  split_[attention.getResult()] = {2, 1};
  ++summary_.attentions;
  return success();
}

LogicalResult Partitioner::visitCrossEntropy(CrossEntropyOp loss) {
  auto logits = split_.find(loss.getLogits()), labels = split_.find(loss.getLabels());
  if (logits == split_.end() || labels == split_.end() || logits->second.dim != 0 || labels->second.dim != 0 ||
      logits->second.groups != labels->second.groups)
    return loss.emitError() << "sequence parallelism computes the loss on each rank's rows: its logits and "
                               "labels must both be split by tokens along their rows";
  if (loss.getReduction() == "none")
    return loss.emitError() << "sequence parallelism sums the loss over the ranks' rows; a loss per row "
                               "(reduction none) would stay split";
  // A vocabulary-parallel loss (the tensor axis's) keeps its split of the
  // classes; the rows' sums are then summed over the sequence axis too.
  loss.setTokenAxisAttr(axis_);
  return success();
}

LogicalResult Partitioner::visit(Operation &op) {
  SmallVector<unsigned> splitOperands;
  for (OpOperand &use : op.getOpOperands())
    if (split_.count(use.get()))
      splitOperands.push_back(use.getOperandNumber());
  if (splitOperands.empty())
    return success();
  if (auto attention = dyn_cast<AttentionOp>(op))
    return visitAttention(attention);
  if (auto loss = dyn_cast<CrossEntropyOp>(op))
    return visitCrossEntropy(loss);
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    TokenSplit from = split_.lookup(transpose.getInput());
    ArrayRef<int64_t> perm = transpose.getPerm();
    int64_t to = std::find(perm.begin(), perm.end(), from.dim) - perm.begin();
    split_[transpose.getResult()] = {to, from.groups};
    return success();
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    TokenSplit from = split_.lookup(reshape.getInput());
    std::optional<TokenSplit> to = reshaped(reshape, from);
    if (!to)
      return op.emitError() << "sequence parallelism: this reshape of " << wholeType(reshape.getInput())
                            << " (split by tokens along dimension " << from.dim
                            << ") cuts or mixes the tokens; a reshape may only keep them whole and innermost";
    split_[reshape.getResult()] = *to;
    return success();
  }
  if (auto gather = dyn_cast<GatherOp>(op)) {
    // A lookup of the rank's tokens' ids in a replicated table.
    if (split_.count(gather.getData()))
      return op.emitError() << "sequence parallelism: a gather from activations split by tokens";
    TokenSplit ids = split_.lookup(gather.getIndices());
    split_[gather.getResult()] = {int64_t(gather.getAxis()) + ids.dim, ids.groups};
    return replicatedOperands(op, ids, {0});
  }
  // Everything else: per token, its split operands aligned.
  RankedTensorType resultType = op.getNumResults() ? dyn_cast<RankedTensorType>(op.getResult(0).getType()) : nullptr;
  std::optional<TokenSplit> at;
  for (unsigned i : splitOperands) {
    Value operand = op.getOperand(i);
    TokenSplit s = split_.lookup(operand);
    TokenSplit aligned{s.dim + (resultType ? resultType.getRank() - typeOf(operand).getRank() : 0), s.groups};
    if (at && (at->dim != aligned.dim || at->groups != aligned.groups))
      return op.emitError() << "sequence parallelism: this op reads activations split by tokens along "
                               "different dimensions";
    at = aligned;
  }
  if (!resultType || !isPerToken(&op, at->dim))
    return op.emitError() << "sequence parallelism computes every op but attention on each rank's tokens, "
                             "and this op reads them but does not compute each token on its own (per-token ops: "
                             "elementwise, norms over the hidden axis, linear layers, dropout, slices along another "
                             "axis)";
  narrowToTokens(&op, at->dim, at->groups * (tokens_ / ranks_));
  if (auto dropout = dyn_cast<DropoutOp>(op)) {
    // Masks are keyed by the whole tensor's elements: the rank draws its
    // slice of the whole mask, which needs the slice to be contiguous.
    if (at->groups != 1)
      return op.emitError() << "sequence parallelism: dropout on rows merged from several sequences";
    dropout.setMeshAxisAttr(axis_);
    dropout.setMeshDimAttr(OpBuilder(&op).getI64IntegerAttr(at->dim));
  }
  if (failed(replicatedOperands(op, *at, isa<LinearOp>(op) ? ArrayRef<unsigned>{1, 2} : ArrayRef<unsigned>{})))
    return failure();
  for (Value result : op.getResults())
    if (typeOf(result).getRank() == resultType.getRank())
      split_[result] = *at;
  return success();
}

LogicalResult Partitioner::retype() {
  Block &body = forward_.getBody().front();
  for (auto [value, s] : split_) {
    for (Operation *user : value.getUsers())
      if (user == body.getTerminator())
        return forward_.emitError() << "sequence parallelism: @forward returns an activation split by "
                                       "tokens";
    if (sliceTyped_.count(value))
      continue;
    RankedTensorType type = typeOf(value);
    value.setType(withDim(type, s.dim, s.groups * (tokens_ / ranks_)));
  }
  return success();
}

} // namespace

const char *nameOf(SequenceAlgorithm algorithm) {
  return algorithm == SequenceAlgorithm::Ring ? "ring" : "all-to-all";
}

std::optional<SequenceAlgorithm> parseSequenceAlgorithm(StringRef name) {
  if (name == "all-to-all")
    return SequenceAlgorithm::AllToAll;
  if (name == "ring")
    return SequenceAlgorithm::Ring;
  return std::nullopt;
}

FailureOr<SequenceAxisSummary> applySequenceAxisParallelism(ModuleOp module, int64_t ranks,
                                                             SequenceAlgorithm algorithm) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "sequence parallelism partitions @forward, and the module has none";
  if (ranks < 2)
    return module.emitError() << "sequence parallelism needs at least 2 ranks, not " << ranks;
  // Beside a tensor axis it cuts the tokens of the tensor split's blocks
  // (their heads already the tensor rank's); Megatron's sequence parallelism
  // already splits the tokens, over the tensor axis.
  if (module->hasAttr("train.sequence_parallel"))
    return module.emitError() << "sequence parallelism on its own axis runs once, and not with Megatron's "
                                 "sequence parallelism (which splits the tokens over the tensor axis)";
  // The sequence: the attention layers' tokens (self-attention, all alike).
  int64_t tokens = 0;
  AttentionOp first;
  WalkResult walk = forward.walk([&](AttentionOp attention) {
    RankedTensorType query = typeOf(attention.getQuery()), key = typeOf(attention.getKey());
    int64_t here = query.getDimSize(query.getRank() - 2);
    if (here != key.getDimSize(key.getRank() - 2) || (tokens && here != tokens)) {
      attention.emitError() << "sequence parallelism splits one sequence length; this attention's "
                               "queries have "
                            << here << " tokens and its keys " << key.getDimSize(key.getRank() - 2)
                            << (tokens ? " (the first attention's: " + std::to_string(tokens) + ")" : std::string());
      return WalkResult::interrupt();
    }
    tokens = here;
    first = first ? first : attention;
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!first)
    return forward.emitError() << "sequence parallelism trades tokens for heads at attention, and @forward "
                                  "has no train.attention";
  if (tokens % ranks != 0)
    return first.emitError() << "sequence parallelism over " << ranks << " ranks splits the " << tokens
                             << " tokens, which do not divide by " << ranks;
  FailureOr<SequenceAxisSummary> summary = Partitioner(forward, ranks, tokens, algorithm).run();
  if (failed(summary))
    return failure();
  MLIRContext *context = module.getContext();
  module->setAttr("train.sequence_parallel", StringAttr::get(context, nameOf(algorithm)));
  module->setAttr("train.sequence_parallel_ranks", IntegerAttr::get(IntegerType::get(context, 64), ranks));
  return summary;
}

namespace {

struct SequenceAxisParallelPass : impl::SequenceAxisParallelPassBase<SequenceAxisParallelPass> {
  using SequenceAxisParallelPassBase::SequenceAxisParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<int64_t> plannedRanks = dist::plannedRanks(module, getArgument(), ranks, [&](dist::PlanAttr plan) {
      return plan.hasSequenceAxis() ? plan.getSp() : int64_t(1);
    });
    if (failed(plannedRanks))
      return signalPassFailure();
    std::optional<std::string> givenAlgorithm;
    if (!algorithm.empty())
      givenAlgorithm = algorithm;
    FailureOr<std::optional<std::string>> plannedAlgorithm =
        dist::plannedSetting<std::string>(module, getArgument(), "algorithm", givenAlgorithm, [&](dist::PlanAttr plan) {
          return plan.hasSequenceAxis() ? plan.getSequence().str() : givenAlgorithm.value_or("all-to-all");
        });
    if (failed(plannedAlgorithm))
      return signalPassFailure();
    ranks = *plannedRanks;
    algorithm = plannedAlgorithm->value_or("all-to-all");
    if (ranks == 1)
      return;
    std::optional<SequenceAlgorithm> chosen = parseSequenceAlgorithm(algorithm);
    if (!chosen) {
      getOperation().emitError() << "unknown sequence algorithm '" << algorithm << "' (all-to-all or ring)";
      return signalPassFailure();
    }
    FailureOr<SequenceAxisSummary> sequence = applySequenceAxisParallelism(getOperation(), ranks, *chosen);
    if (failed(sequence))
      return signalPassFailure();
    if (!report)
      return;
    InFlightDiagnostic remark = getOperation().emitRemark();
    remark << "sp=" << int64_t(ranks) << ",sp_mode=" << nameOf(*chosen) << ": " << sequence->inputs
           << " inputs split by tokens, " << sequence->splitValues << " activations on each rank's tokens, "
           << sequence->attentions << " attention layers ";
    if (*chosen == SequenceAlgorithm::AllToAll)
      remark << "on each rank's heads (" << sequence->allToAlls << " all-to-alls), ";
    else
      remark << "with keys and values passed around the ring, ";
    remark << sequence->copies << " replicated operands summed over the ranks' tokens, " << sequence->rankSlices
           << " cut to the rank's tokens, " << sequence->gathers << " masks gathered";
  }
};

} // namespace

} // namespace colossal::partition
