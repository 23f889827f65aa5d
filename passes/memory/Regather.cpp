//===- Regather.cpp -------------------------------------------------------===//

#include "passes/memory/Regather.h"
#include "passes/memory/StepRegions.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace colossal::memory {

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
  llvm::SmallVector<train::AllGatherOp> gathers(body.getOps<train::AllGatherOp>());
  for (train::AllGatherOp gather : gathers) {
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

struct RegatherForBackwardPass : public PassWrapper<RegatherForBackwardPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RegatherForBackwardPass)
  RegatherForBackwardPass() = default;
  RegatherForBackwardPass(const RegatherForBackwardPass &other) : PassWrapper(other) {}
  StringRef getArgument() const final { return "train-regather-for-backward"; }
  StringRef getDescription() const final {
    return "Gives the backward pass of @forward_backward its own all-gather of each gathered sequence shard it "
           "reads (Megatron sequence parallelism keeps the shard, not the gathered tensor)";
  }
  void runOnOperation() override {
    if (failed(regatherForBackward(getOperation(), axis)))
      signalPassFailure();
  }
  Option<std::string> axis{*this, "axis", llvm::cl::desc("The mesh axis whose gathers are repeated"),
                           llvm::cl::init("tp")};
};

} // namespace

std::unique_ptr<Pass> createRegatherForBackwardPass() { return std::make_unique<RegatherForBackwardPass>(); }

void registerRegatherForBackwardPass() { PassRegistration<RegatherForBackwardPass>(); }

} // namespace colossal::memory
