//===- RereadParameters.cpp -------------------------------------------------===//

#include "passes/memory/RereadParameters.h"
#include "passes/memory/Passes.h"
#include "passes/memory/StepRegions.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>

namespace colossal::memory {

#define GEN_PASS_DEF_REREADPARAMETERSPASS
#include "passes/memory/Passes.h.inc"

using namespace mlir;

namespace {

/// Ops that only restate a weight (transposed, reshaped, cast): re-running
/// them with the weight's second read costs no more than keeping their
/// result, which would hold the weight's size across the step.
bool isView(Operation *op) { return isa<train::TransposeOp, train::ReshapeOp, train::CastOp>(op); }

/// A forward read of a parameter and the views of it the forward pass
/// computes, in program order.
llvm::SmallVector<Operation *> familyOf(train::ParamOp read, Operation *loss) {
  llvm::SmallVector<Operation *> family{read.getOperation()};
  llvm::SmallPtrSet<Operation *, 8> members{read.getOperation()};
  for (size_t i = 0; i < family.size(); ++i)
    for (Operation *user : family[i]->getUsers())
      if (isView(user) && user->getBlock() == read->getBlock() && user->isBeforeInBlock(loss) &&
          members.insert(user).second)
        family.push_back(user);
  llvm::sort(family, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return family;
}

/// The views from a weight read to `v` (the read first), or nothing when
/// `v` is not a view of a weight read.
llvm::SmallVector<Operation *> viewChainTo(Value v) {
  llvm::SmallVector<Operation *> chain;
  while (Operation *def = v.getDefiningOp()) {
    chain.push_back(def);
    if (llvm::isa<train::ParamOp>(def)) {
      std::reverse(chain.begin(), chain.end());
      return chain;
    }
    if (!isView(def))
      break;
    v = def->getOperand(0);
  }
  return {};
}

/// A backward view of a weight read by several ops (a recomputed layer's
/// forward op and its gradient) is made again just before each of them, so
/// it is held for one op at a time instead of the span between them. The
/// read is shared: under ZeRO-3 it is one gather.
void viewsAgainForEachUser(Block &body, Operation *loss) {
  for (Operation &op : llvm::make_early_inc_range(llvm::make_range(std::next(loss->getIterator()), body.end()))) {
    if (!isView(&op))
      continue;
    llvm::SmallVector<Operation *> chain = viewChainTo(op.getResult(0));
    if (chain.empty())
      continue;
    llvm::MapVector<Operation *, llvm::SmallVector<OpOperand *>> usesByOp;
    for (OpOperand &use : op.getResult(0).getUses())
      usesByOp[body.findAncestorOpInBlock(*use.getOwner())].push_back(&use);
    if (usesByOp.size() < 2)
      continue;
    // The view stays with its first reader; later readers get their own.
    Operation *first = usesByOp.front().first;
    for (auto &[user, uses] : usesByOp)
      if (user->isBeforeInBlock(first))
        first = user;
    for (auto &[user, uses] : usesByOp) {
      if (user == first)
        continue;
      OpBuilder here(user);
      IRMapping again;
      for (Operation *view : llvm::drop_begin(chain))
        here.clone(*view, again);
      for (OpOperand *use : uses)
        use->set(again.lookup(use->get()));
    }
  }
}

/// A linear's input gradient transposes the weight's transposed view back
/// (dx = dy transpose(transpose(w))): composed, the two are the weight
/// itself, read without a weight-sized copy (or one transpose instead of
/// two).
void composeTransposedViews(Block &body, Operation *loss) {
  for (auto outer : llvm::make_early_inc_range(body.getOps<train::TransposeOp>())) {
    auto inner = outer.getInput().getDefiningOp<train::TransposeOp>();
    if (!inner || outer->isBeforeInBlock(loss) || viewChainTo(inner.getResult()).empty())
      continue;
    llvm::SmallVector<int64_t> composed;
    for (int64_t q : outer.getPerm())
      composed.push_back(inner.getPerm()[size_t(q)]);
    bool identity = llvm::all_of(llvm::enumerate(composed), [](auto e) { return e.value() == int64_t(e.index()); });
    if (identity) {
      outer.getResult().replaceAllUsesWith(inner.getInput());
      outer->erase();
    } else {
      outer.setPerm(composed);
      outer.getInputMutable().assign(inner.getInput());
    }
    if (inner->use_empty())
      inner->erase();
  }
}

} // namespace

LogicalResult rereadParametersForBackward(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step)
    return module.emitError() << "train-reread-parameters needs @forward_backward (run train-autodiff first)";
  Block &body = step.getBody().front();
  Operation *loss = lossOpOf(body);
  if (!loss)
    return success();
  llvm::SmallVector<train::ParamOp> reads(body.getOps<train::ParamOp>());
  for (train::ParamOp read : reads) {
    if (!read->isBeforeInBlock(loss))
      continue;
    llvm::SmallVector<Operation *> family = familyOf(read, loss);
    // The backward uses of the family, and the first op needing one.
    Operation *first = nullptr;
    bool forward = false;
    llvm::SmallVector<OpOperand *> backward;
    for (Operation *member : family)
      for (OpOperand &use : member->getResult(0).getUses()) {
        if (!inBackward(body, loss, use.getOwner())) {
          forward |= !isView(use.getOwner()) || !llvm::is_contained(family, use.getOwner());
          continue;
        }
        backward.push_back(&use);
        Operation *top = body.findAncestorOpInBlock(*use.getOwner());
        if (!first || top->isBeforeInBlock(first))
          first = top;
      }
    if (!forward || backward.empty())
      continue;
    // The same read and views again, just before the backward needs them.
    OpBuilder builder(first);
    IRMapping again;
    llvm::SmallVector<Operation *> clones;
    for (Operation *member : family)
      clones.push_back(builder.clone(*member, again));
    for (OpOperand *use : backward)
      use->set(again.lookup(use->get()));
    // Views only one side needs are gone from the other.
    for (auto *list : {&clones, &family})
      for (Operation *op : llvm::reverse(*list))
        if (op->use_empty())
          op->erase();
  }
  viewsAgainForEachUser(body, loss);
  composeTransposedViews(body, loss);
  return success();
}

llvm::StringSet<> parametersReadByBackward(func::FuncOp forwardBackward) {
  llvm::StringSet<> names;
  Block &body = forwardBackward.getBody().front();
  Operation *loss = lossOpOf(body);
  for (train::ParamOp read : body.getOps<train::ParamOp>()) {
    if (!loss || !read->isBeforeInBlock(loss)) {
      names.insert(read.getName());
      continue;
    }
    for (Operation *member : familyOf(read, loss))
      for (Operation *user : member->getResult(0).getUsers())
        if (inBackward(body, loss, user))
          names.insert(read.getName());
  }
  return names;
}

namespace {

struct RereadParametersPass : impl::RereadParametersPassBase<RereadParametersPass> {
  using RereadParametersPassBase::RereadParametersPassBase;

  void runOnOperation() override {
    if (failed(rereadParametersForBackward(getOperation())))
      signalPassFailure();
  }
};

} // namespace

} // namespace colossal::memory
