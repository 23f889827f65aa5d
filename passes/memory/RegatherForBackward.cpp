//===- RegatherForBackward.cpp -------------------------------------------------------===//

#include "passes/memory/RegatherForBackward.h"
#include "passes/memory/Passes.h"
#include "passes/memory/StepRegions.h"

#include "colossal/Dialect/Dist/PlannedSetting.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace colossal::memory {

#define GEN_PASS_DEF_REGATHERFORBACKWARDPASS
#include "passes/memory/Passes.h.inc"

using namespace mlir;

FailureOr<int64_t> regatherForBackward(ModuleOp module, llvm::StringRef axis) {
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step)
    return module.emitError() << "train-regather-for-backward needs @forward_backward (run train-autodiff first)";
  Block &body = step.getBody().front();
  Operation *loss = lossOpOf(body);
  if (!loss)
    return int64_t(0);
  int64_t added = 0;
  llvm::SmallVector<dist::AllGatherOp> gathers(body.getOps<dist::AllGatherOp>());
  for (dist::AllGatherOp gather : gathers) {
    if (!gather->isBeforeInBlock(loss) || gather.getAxis() != axis)
      continue;
    llvm::SmallVector<OpOperand *> backward;
    Operation *first = nullptr;
    for (OpOperand &use : gather.getResult().getUses()) {
      if (!inBackward(body, loss, use.getOwner()))
        continue;
      backward.push_back(&use);
      Operation *top = body.findAncestorOpInBlock(*use.getOwner());
      if (!first || top->isBeforeInBlock(first))
        first = top;
    }
    if (backward.empty())
      continue;
    OpBuilder builder(first);
    Operation *again = builder.clone(*gather);
    for (OpOperand *use : backward)
      use->set(again->getResult(0));
    ++added;
  }
  return added;
}

namespace {

struct RegatherForBackwardPass : impl::RegatherForBackwardPassBase<RegatherForBackwardPass> {
  using RegatherForBackwardPassBase::RegatherForBackwardPassBase;

  void runOnOperation() override {
    if (dist::PlanAttr plan = dist::PlanAttr::on(getOperation()); plan && !plan.hasMegatronSequence())
      return;
    FailureOr<int64_t> regathered = regatherForBackward(getOperation(), axis);
    if (failed(regathered))
      return signalPassFailure();
    if (report)
      getOperation().emitRemark() << "sp_mode=megatron: " << *regathered
                                  << " block inputs gathered again for the backward pass (the shards are kept, not "
                                     "the gathered tensors)";
  }
};

} // namespace

} // namespace colossal::memory
