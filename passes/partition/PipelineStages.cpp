//===- PipelineStages.cpp -------------------------------------------------===//

#include "passes/partition/PipelineStages.h"
#include "passes/partition/Passes.h"

#include "colossal/Dialect/Dist/DistDialect.h"
#include "colossal/Dialect/Dist/Stages.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "passes/plan/CostGraphBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <set>

namespace colossal::partition {

#define GEN_PASS_DEF_PIPELINESTAGESPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;

namespace {

/// Layers per stage: the plan's split, checked, or equal shares.
FailureOr<std::vector<int64_t>> splitLayers(func::FuncOp forward, int64_t layers, int64_t stages,
                                            const std::vector<int64_t> &given) {
  if (layers < stages)
    return forward.emitError() << "pipeline: " << stages
                               << " stages (the plan's pp x virtual_stages) need at least one layer each, and "
                                  "@forward has "
                               << layers << " layers (plan fewer stages)",
           failure();
  if (given.empty()) {
    if (layers % stages != 0)
      return forward.emitError() << "pipeline: " << layers << " layers do not divide into " << stages
                                 << " stages (give stage_layers=... for an uneven split)",
             failure();
    return std::vector<int64_t>(size_t(stages), layers / stages);
  }
  int64_t total = 0;
  for (int64_t n : given)
    total += n;
  if (int64_t(given.size()) != stages || total != layers || llvm::any_of(given, [](int64_t n) { return n < 1; }))
    return forward.emitError() << "pipeline: stage_layers lists " << given.size() << " stages holding " << total
                               << " layers; the plan has " << stages << " stages and @forward " << layers
                               << " layers, at least one on each stage",
           failure();
  return given;
}

/// What an op of @forward reads, transitively.
enum Reads : unsigned { Inputs = 1, Weights = 2, Computed = 4 };

/// Ops that read only inputs and constants (masks, position tables, label
/// reshapes) or only weights and constants (parameter reads, their views
/// and casts): each stage reading one makes its own (no transfer, and a
/// weight read on two stages gets a gradient on each). An op reading both
/// (an embedding lookup) is the model's computation, as is dropout (its
/// mask is the step's).
unsigned readsOf(Operation &op, const llvm::DenseMap<Operation *, unsigned> &reads) {
  if (isa<train::ParamOp>(op))
    return Weights;
  if (op.getNumRegions() != 0 || isa<train::DropoutOp>(op))
    return Computed;
  unsigned all = 0;
  for (Value v : op.getOperands()) {
    Operation *def = v.getDefiningOp();
    all |= def ? reads.lookup(def) : unsigned(Inputs);
  }
  return all == (Inputs | Weights) ? unsigned(Computed) : all;
}

bool isRepeatable(unsigned reads) { return !(reads & Computed); }

} // namespace

FailureOr<StageSummary> assignPipelineStages(ModuleOp module, int64_t stages, const std::vector<int64_t> &stageLayers) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError("pipeline: the module has no @forward function"), failure();
  FailureOr<cost::Graph> graph = plan::buildCostGraph(forward);
  if (failed(graph))
    return failure();
  StageSummary summary;
  summary.layers = graph->numLayers;
  if (summary.layers < 2)
    return forward.emitError() << "pipeline: stages hold whole layers, and no two consecutive blocks of @forward are "
                                  "identical (no layers found)",
           failure();
  FailureOr<std::vector<int64_t>> split = splitLayers(forward, summary.layers, stages, stageLayers);
  if (failed(split))
    return failure();
  summary.stageLayers = *split;
  std::vector<int64_t> stageOfLayer;
  for (int64_t s = 0; s < stages; ++s)
    stageOfLayer.insert(stageOfLayer.end(), size_t((*split)[size_t(s)]), s);

  Block &body = forward.getBody().front();
  llvm::DenseMap<Operation *, unsigned> reads;
  llvm::DenseSet<Operation *> repeatable;
  llvm::DenseMap<Operation *, int64_t> stage;
  size_t index = 0;
  bool afterLayers = false;
  for (Operation &op : body.without_terminator()) {
    int64_t s = 0;
    if (plan::isCostGraphOp(&op)) {
      if (index >= graph->ops.size())
        return op.emitError("pipeline: @forward has more ops than its cost graph (an internal error)"), failure();
      int layer = graph->ops[index++].layer;
      afterLayers |= layer >= 0;
      s = layer >= 0 ? stageOfLayer[size_t(layer)] : afterLayers ? stages - 1 : 0;
    }
    reads[&op] = readsOf(op, reads);
    if (isRepeatable(reads[&op])) {
      repeatable.insert(&op);
      continue;
    }
    // Values flow to later stages only.
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp(); def && !repeatable.contains(def))
        s = std::max(s, stage.lookup(def));
    stage[&op] = s;
  }

  // Repeatable ops, last first: every reader's stage is known when an op is
  // reached (copies made for later readers included).
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (repeatable.contains(&op))
      ops.push_back(&op);
  int64_t repeatedOriginals = 0;
  for (Operation *op : llvm::reverse(ops)) {
    auto stageOfUser = [&](Operation *user) { return user == body.getTerminator() ? stages - 1 : stage.lookup(user); };
    std::set<int64_t> readers;
    for (Operation *user : op->getUsers())
      readers.insert(stageOfUser(user));
    stage[op] = readers.empty() ? 0 : *readers.begin();
    // One number for the op and all its copies.
    auto id = IntegerAttr::get(IntegerType::get(op->getContext(), 64), int64_t(repeatedOriginals));
    if (readers.size() > 1)
      op->setAttr(dist::kRepeatAttrName, id), ++repeatedOriginals;
    for (int64_t s : readers) {
      if (s == stage[op])
        continue;
      OpBuilder builder(op);
      Operation *copy = builder.clone(*op);
      copy->removeAttr(dist::kRepeatAttrName);
      copy->setAttr(dist::kRepeatOfAttrName, id);
      stage[copy] = s;
      ++summary.repeatedOps;
      for (OpOperand &use : llvm::make_early_inc_range(op->getUses()))
        if (stageOfUser(use.getOwner()) == s)
          use.set(copy->getResult(cast<OpResult>(use.get()).getResultNumber()));
    }
  }
  for (Operation &op : body.without_terminator())
    dist::setStage(&op, stage.lookup(&op));
  return summary;
}

namespace {

struct PipelineStagesPass : impl::PipelineStagesPassBase<PipelineStagesPass> {
  using PipelineStagesPassBase::PipelineStagesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::PlanAttr plan = dist::PlanAttr::on(module);
    int64_t stages = plan ? plan.getPp() * plan.getVirtualStages() : 1;
    if (stages == 1)
      return;
    std::vector<int64_t> given;
    if (plan.getStageLayers())
      given.assign(plan.getStageLayers().asArrayRef().begin(), plan.getStageLayers().asArrayRef().end());
    FailureOr<StageSummary> summary = assignPipelineStages(module, stages, given);
    if (failed(summary))
      return signalPassFailure();
    if (report) {
      std::string split;
      for (int64_t n : summary->stageLayers)
        split += (split.empty() ? "" : "/") + std::to_string(n);
      module.emitRemark() << "train-pipeline-stages: " << summary->layers << " layers on " << stages << " stages ("
                          << split << "), " << summary->repeatedOps << " ops made again on a second stage";
    }
  }
};

} // namespace

} // namespace colossal::partition
