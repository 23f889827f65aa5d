//===- SequenceParallel.cpp -----------------------------------------------===//

#include "passes/partition/SequenceParallel.h"
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

#define GEN_PASS_DEF_SEQUENCEPARALLELPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

bool isFloat(Value v) { return isa<FloatType>(typeOf(v).getElementType()); }

} // namespace

FailureOr<SequenceParallelSummary> applySequenceParallelism(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  int64_t ranks = tensorParallelRanks(module);
  if (!forward || ranks < 2)
    return module.emitError() << "sequence parallelism splits the tokens over the tensor axis of a module "
                                 "partitioned for tensor parallelism (train-tensor-parallel first)";
  MLIRContext *context = module.getContext();
  StringAttr axis = StringAttr::get(context, kTensorAxis);
  SequenceParallelSummary summary;
  // Token-split values and the dimension of their tokens, in program order.
  llvm::MapVector<Value, int64_t> split;
  Block &body = forward.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    OpBuilder builder(&op);
    // A sum at a block's exit: summed and scattered by tokens.
    if (auto sum = dyn_cast<ReshardOp>(op); sum && isSumOverRanks(sum, kTensorAxis)) {
      RankedTensorType type = typeOf(sum.getResult());
      if (type.getRank() < 2)
        continue;
      int64_t dim = type.getRank() - 2, tokens = type.getDimSize(dim);
      if (tokens % ranks != 0)
        return sum.emitError() << "sequence parallelism over " << ranks << " ranks splits the " << tokens
                               << " tokens of " << type << ", which do not divide by " << ranks;
      Value scattered = reshard(builder, sum.getLoc(), sum.getInput(), withDim(type, dim, tokens / ranks),
                                sum.getFromLayout(), splitLayout(type.getRank(), dim, kTensorAxis), kTensorAxis,
                                ranks);
      sum.getResult().replaceAllUsesWith(scattered);
      sum.erase();
      split[scattered] = dim;
      ++summary.scatters;
      continue;
    }
    std::optional<int64_t> dim;
    RankedTensorType resultType = op.getNumResults() ? dyn_cast<RankedTensorType>(op.getResult(0).getType()) : nullptr;
    for (Value operand : op.getOperands())
      if (auto it = split.find(operand); it != split.end()) {
        int64_t aligned = it->second + (resultType ? resultType.getRank() - typeOf(operand).getRank() : 0);
        if (dim && *dim != aligned)
          return op.emitError() << "sequence parallelism: this op reads activations split by tokens along "
                                   "different dimensions";
        dim = aligned;
      }
    if (!dim)
      continue;
    // A block's entry: the tokens gathered.
    if (auto copy = dyn_cast<ReshardOp>(op); copy && isCopyToRanks(copy, kTensorAxis)) {
      Layout byTokens = splitLayout(typeOf(copy.getInput()).getRank(), split.lookup(copy.getInput()), kTensorAxis);
      Value gathered = reshard(builder, copy.getLoc(), copy.getInput(), typeOf(copy.getResult()), byTokens,
                               copy.getToLayout(), kTensorAxis, ranks);
      copy.getResult().replaceAllUsesWith(gathered);
      copy.erase();
      ++summary.gathers;
      continue;
    }
    if (!resultType || !isPerToken(&op, *dim))
      return op.emitError() << "sequence parallelism computes the activations between tensor-parallel blocks on "
                               "each rank's tokens, and this op reads them but does not compute each token on its "
                               "own (per-token ops: elementwise, norms over the hidden axis, linear layers, "
                               "dropout, slices along another axis)";
    int64_t tokens = resultType.getDimSize(*dim);
    // The other operands: replicated over the tokens, or cut to the rank's.
    for (OpOperand &use : op.getOpOperands()) {
      Value value = use.get();
      if (split.count(value) || !isFloat(value))
        continue;
      RankedTensorType type = typeOf(value);
      int64_t aligned = *dim - (resultType.getRank() - type.getRank());
      if (isa<LinearOp>(op) || aligned < 0 || type.getDimSize(aligned) == 1) {
        use.set(copyToRanks(builder, op.getLoc(), value, kTensorAxis, ranks));
      } else if (type.getDimSize(aligned) == tokens && tokens % ranks == 0) {
        use.set(reshard(builder, op.getLoc(), value, withDim(type, aligned, tokens / ranks),
                        wholeLayout(type.getRank()), splitLayout(type.getRank(), aligned, kTensorAxis), kTensorAxis,
                        ranks));
        ++summary.rankSlices;
      } else {
        return op.emitError() << "sequence parallelism: operand " << use.getOperandNumber() << " (" << type
                              << ") neither broadcasts over the " << tokens << " tokens nor has them";
      }
    }
    narrowToTokens(&op, *dim, tokens / ranks);
    // Masks are keyed by the whole tensor's elements: a token-split
    // dropout draws the rank's slice of the whole mask.
    if (auto dropout = dyn_cast<DropoutOp>(op)) {
      dropout.setMeshAxisAttr(axis);
      dropout.setMeshDimAttr(builder.getI64IntegerAttr(*dim));
    }
    for (Value result : op.getResults())
      if (typeOf(result).getRank() == resultType.getRank())
        split[result] = *dim;
  }
  for (auto [value, dim] : split) {
    for (Operation *user : value.getUsers())
      if (user == body.getTerminator())
        return forward.emitError() << "sequence parallelism: @forward returns an activation split by tokens";
    // The scattered sums are created with the slice's type.
    if (value.getDefiningOp<ReshardOp>())
      continue;
    RankedTensorType type = typeOf(value);
    if (type.getDimSize(dim) % ranks != 0)
      return value.getDefiningOp()->emitError()
             << "sequence parallelism over " << ranks << " ranks splits the " << type.getDimSize(dim)
             << " tokens of " << type << ", which do not divide by " << ranks;
    value.setType(withDim(type, dim, type.getDimSize(dim) / ranks));
  }
  summary.splitValues = int64_t(split.size());
  if (summary.scatters == 0)
    return forward.emitError() << "sequence parallelism found no tensor-parallel block exit to split by tokens";
  module->setAttr("train.sequence_parallel", StringAttr::get(context, "megatron"));
  return summary;
}

namespace {

struct SequenceParallelPass : impl::SequenceParallelPassBase<SequenceParallelPass> {
  using SequenceParallelPassBase::SequenceParallelPassBase;

  void runOnOperation() override {
    if (dist::PlanAttr plan = dist::PlanAttr::on(getOperation()); plan && !plan.hasMegatronSequence())
      return;
    FailureOr<SequenceParallelSummary> sequence = applySequenceParallelism(getOperation());
    if (failed(sequence))
      return signalPassFailure();
    if (report)
      getOperation().emitRemark() << "sp_mode=megatron: " << sequence->splitValues
                                  << " activations between the blocks on each rank's tokens (" << sequence->gathers
                                  << " all-gathers at block entries, " << sequence->scatters
                                  << " reduce-scatters at exits, " << sequence->rankSlices
                                  << " replicated inputs cut to the rank's tokens)";
  }
};

} // namespace

} // namespace colossal::partition
