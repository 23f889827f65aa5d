//===- RecomputeLayers.cpp ------------------------------------------------------===//

#include "passes/memory/RecomputeLayers.h"
#include "passes/memory/Passes.h"
#include "passes/memory/StepRegions.h"

#include "colossal/Dialect/Dist/PlannedSetting.h"
#include "colossal/Dialect/Dist/Stages.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "passes/plan/CostGraphBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace colossal::memory {

#define GEN_PASS_DEF_RECOMPUTELAYERSPASS
#include "passes/memory/Passes.h.inc"

using namespace mlir;

namespace {

/// The forward ops of @forward_backward that the cost graph of @forward
/// counts (those with a sharding rule), in order, with each one's layer.
/// Fails with a diagnostic when the forward pass is not @forward op for op.
/// One forward op of @forward_backward as the cost graph sees it.
struct ForwardOp {
  Operation *op;
  int layer;
  bool contraction;
};

FailureOr<std::vector<ForwardOp>> layersOfForwardPass(func::FuncOp forward, Block &body, Operation *loss,
                                                      int64_t &layers) {
  FailureOr<cost::Graph> graph = plan::buildCostGraph(forward);
  if (failed(graph))
    return failure();
  layers = graph->numLayers;
  // (Gathered weight blocks are the graph's ops in @forward and lowered
  // collectives here.)
  std::vector<const cost::Op *> counted;
  for (const cost::Op &op : graph->ops)
    if (op.name != dist::ReshardOp::getOperationName())
      counted.push_back(&op);
  std::vector<ForwardOp> ops;
  for (Operation &op : body) {
    // A pipeline's copies of an op for another stage are not the cost
    // graph's (dist/Stages.h).
    if (plan::isCostGraphOp(&op) && !dist::isRepeatCopy(&op)) {
      size_t i = ops.size();
      if (i >= counted.size() || counted[i]->name != op.getName().getStringRef())
        return op.emitError() << "recomputation: the forward pass of @forward_backward differs from @forward at its "
                              << i << "th op (" << (i < counted.size() ? counted[i]->name : std::string("none"))
                              << " in @forward)";
      ops.push_back({&op, counted[i]->layer, counted[i]->kind == cost::OpKind::MatMul});
    }
    if (&op == loss)
      break;
  }
  if (ops.size() != counted.size())
    return loss->emitError() << "recomputation: @forward has " << counted.size()
                             << " ops with sharding rules, the forward pass of @forward_backward " << ops.size();
  return ops;
}

} // namespace

FailureOr<RecomputeSummary> recomputeLayers(ModuleOp module, Granularity granularity) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!forward || !step)
    return module.emitError() << "recomputation needs @forward and @forward_backward (run train-autodiff first)";
  Block &body = step.getBody().front();
  Operation *loss = lossOpOf(body);
  if (!loss)
    return module.emitError() << "recomputation: @forward_backward's loss is an argument; there is no forward pass";
  RecomputeSummary summary;
  FailureOr<std::vector<ForwardOp>> ops = layersOfForwardPass(forward, body, loss, summary.layers);
  if (failed(ops))
    return failure();
  if (summary.layers < 2)
    return forward.emitError() << "recomputation re-runs repeated layers, and no two consecutive blocks of "
                                  "@forward are identical (a model without layers keeps its activations)";

  for (int64_t layer = 0; layer < summary.layers; ++layer) {
    llvm::SmallVector<Operation *> members;
    llvm::DenseSet<Operation *> inLayer, kept;
    for (const ForwardOp &f : *ops)
      if (f.layer == layer) {
        members.push_back(f.op);
        inLayer.insert(f.op);
        if (granularity == Granularity::Selective && f.contraction)
          kept.insert(f.op);
      }
    // A checkpoint leaves the layer: a forward op outside it, or the step's
    // results, read it; under selective recomputation a contraction's
    // result is one too. It is kept; everything else the layer makes is
    // made again for the backward pass.
    auto isCheckpoint = [&](Value v) {
      if (kept.contains(v.getDefiningOp()))
        return true;
      for (Operation *user : v.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top == body.getTerminator() || (!inBackward(body, loss, top) && !inLayer.contains(top)))
          return true;
      }
      return false;
    };
    // Where each re-run op goes: just before the first op that needs it
    // (a backward op reading its result, or the re-run of a later op of
    // the layer), so that no re-run value is made earlier than needed.
    llvm::SmallVector<OpOperand *> backwardUses;
    llvm::DenseMap<Operation *, Operation *> placeOf;
    auto needBefore = [&](Operation *op, Operation *at) {
      Operation *&place = placeOf[op];
      if (!place || at->isBeforeInBlock(place))
        place = at;
    };
    for (Operation *op : members)
      for (Value result : op->getResults()) {
        if (isCheckpoint(result))
          continue;
        for (OpOperand &use : result.getUses())
          if (inBackward(body, loss, use.getOwner())) {
            backwardUses.push_back(&use);
            needBefore(op, body.findAncestorOpInBlock(*use.getOwner()));
          }
      }
    if (backwardUses.empty())
      continue;
    // Producers come before their users in the layer, so one pass from the
    // last op back places every op the re-run needs.
    for (Operation *op : llvm::reverse(members)) {
      auto placed = placeOf.find(op);
      if (placed == placeOf.end())
        continue;
      Operation *at = placed->second;
      for (Value operand : op->getOperands())
        if (Operation *producer = operand.getDefiningOp();
            producer && inLayer.contains(producer) && !isCheckpoint(operand))
          needBefore(producer, at);
    }
    // In layer order, so a producer placed before the same op as its user
    // is inserted first.
    IRMapping again;
    for (Operation *op : members)
      if (auto placed = placeOf.find(op); placed != placeOf.end()) {
        OpBuilder builder(placed->second);
        builder.clone(*op, again);
        ++summary.recomputedOps;
      }
    for (OpOperand *use : backwardUses)
      use->set(again.lookup(use->get()));
    // Forward ops whose results only the backward read are now dead.
    for (Operation *op : llvm::reverse(members))
      if (op->use_empty())
        op->erase();
  }
  return summary;
}

namespace {

struct RecomputeLayersPass : impl::RecomputeLayersPassBase<RecomputeLayersPass> {
  using RecomputeLayersPassBase::RecomputeLayersPassBase;

  void runOnOperation() override {
    FailureOr<std::optional<std::string>> planned = dist::plannedSetting<std::string>(
        getOperation(), getArgument(), "granularity",
        this->granularity.empty() ? std::nullopt : std::optional<std::string>(this->granularity),
        [](dist::PlanAttr plan) { return plan.getRecompute().str(); });
    if (failed(planned))
      return signalPassFailure();
    this->granularity = planned->value_or("full");
    if (this->granularity == "none")
      return;
    Granularity granularity = Granularity::Full;
    if (this->granularity == "selective") {
      granularity = Granularity::Selective;
    } else if (this->granularity != "full") {
      getOperation().emitError() << "train-recompute-layers: granularity must be full or selective, not '"
                                 << this->granularity << "'";
      return signalPassFailure();
    }
    FailureOr<RecomputeSummary> recomputed = recomputeLayers(getOperation(), granularity);
    if (failed(recomputed))
      return signalPassFailure();
    if (report)
      getOperation().emitRemark() << "recompute=" << std::string(this->granularity) << ": "
                                  << recomputed->layers << " layers, " << recomputed->recomputedOps << " forward ops re-run in the backward pass"
                                  << (granularity == Granularity::Selective ? " (the contractions' results kept)"
                                                                            : "");
  }
};

} // namespace

} // namespace colossal::memory
