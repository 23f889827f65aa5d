//===- SplitStages.cpp ----------------------------------------------------===//

#include "passes/partition/SplitStages.h"
#include "passes/partition/Passes.h"

#include "colossal/Dialect/Dist/DistDialect.h"
#include "colossal/Dialect/Dist/Stages.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "passes/memory/StepRegions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

namespace colossal::partition {

#define GEN_PASS_DEF_SPLITSTAGESPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;

std::string stageFunctionName(int64_t stage, bool backward) {
  return "stage" + std::to_string(stage) + (backward ? "_backward" : "_forward");
}

namespace {

struct Piece {
  int64_t stage = 0;
  bool backward = false;

  bool operator==(const Piece &other) const { return stage == other.stage && backward == other.backward; }
  const char *phase() const { return backward ? "backward" : "forward"; }
};

/// One stage function before it is built: the ops it runs (in the step's
/// order) and what crosses its boundary.
struct Interface {
  SmallVector<Operation *> ops;
  SmallVector<Value> args, results;
  SmallVector<NamedAttrList> argAttrs, resultAttrs;
  /// Values of the step the function has as arguments.
  llvm::DenseSet<Value> received;
};

/// Whether `op` reads only weights and constants (a parameter read, a
/// weight's view or cast): such values are made again in every function
/// that reads them, neither sent nor held between a stage's forward and
/// backward. Collectives are not (they would run twice).
bool readsOnlyWeights(Operation &op, const llvm::DenseSet<Operation *> &remade) {
  if (isa<train::ConstantOp, train::ParamOp>(op))
    return true;
  if (op.getNumRegions() != 0 || op.getNumOperands() == 0 || isa<train::DropoutOp>(op) ||
      !isa<train::TrainDialect>(op.getDialect()))
    return false;
  return llvm::all_of(op.getOperands(), [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && remade.contains(def);
  });
}

class Splitter {
public:
  Splitter(func::FuncOp step, int64_t stages)
      : step(step), body(step.getBody().front()), stages(stages), pieces(size_t(2 * stages)) {}

  FailureOr<SplitSummary> run(ModuleOp module) {
    if (failed(classify()) || failed(connect()))
      return failure();
    build(module);
    step.erase();
    summary.stages = stages;
    return summary;
  }

private:
  bool isRemade(Operation *op) const { return remade.contains(op); }

  Interface &at(Piece p) { return pieces[size_t(2 * p.stage + int64_t(p.backward))]; }

  NamedAttrList named(StringRef name) {
    NamedAttrList attrs;
    attrs.append("train.name", StringAttr::get(step.getContext(), name));
    return attrs;
  }

  LogicalResult classify() {
    Operation *loss = memory::lossOpOf(body);
    if (!loss)
      return step.emitError("pipeline: @forward_backward's loss is an argument; there is nothing to split"), failure();
    bool backward = false;
    for (Operation &op : body.without_terminator())
      if (readsOnlyWeights(op, remade))
        remade.insert(&op);
    for (Operation &op : body.without_terminator()) {
      // The stages' parts of a weight's gradient: each stage returns its
      // part (connect), and nothing else may read the whole.
      if (op.hasAttr(dist::kStageSumAttrName)) {
        for (Operation *user : op.getUsers())
          if (user != body.getTerminator() && !user->hasAttr(dist::kStageSumAttrName))
            return user->emitError("pipeline: this op reads a weight gradient summed over stages"), failure();
        continue;
      }
      if (!isRemade(&op)) {
        std::optional<int64_t> stage = dist::stageOf(&op);
        if (!stage || *stage < 0 || *stage >= stages)
          return op.emitError() << "pipeline: this op has no stage among the " << stages
                                << " (dist.stage; a pass made it without one)",
                 failure();
        pieceOf[&op] = Piece{*stage, backward};
        at(pieceOf[&op]).ops.push_back(&op);
      }
      backward |= &op == loss;
    }
    return success();
  }

  void addResult(Piece p, Value v, NamedAttrList attrs) {
    at(p).results.push_back(v);
    at(p).resultAttrs.push_back(std::move(attrs));
  }

  void addArgument(Piece p, Value v, NamedAttrList attrs) {
    at(p).args.push_back(v);
    at(p).argAttrs.push_back(std::move(attrs));
    at(p).received.insert(v);
  }

  /// Makes `v` available to `to`, as read by `user`.
  LogicalResult resolve(Value v, Piece to, Operation *user) {
    if (at(to).received.contains(v))
      return success();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      addArgument(to, v, NamedAttrList(step.getArgAttrDict(arg.getArgNumber())));
      return success();
    }
    Operation *def = v.getDefiningOp();
    if (isRemade(def))
      return success();
    Piece from = pieceOf.lookup(def);
    if (from == to)
      return success();
    auto transfer = [&](Piece source, StringRef kind) {
      std::string id = std::to_string(next++);
      NamedAttrList result = named((kind + ":" + id).str()),
                    argument = named((kind == "save" ? "save:" : "recv:") + id);
      if (kind == "send") {
        result.append("dist.to", IntegerAttr::get(IntegerType::get(step.getContext(), 64), to.stage));
        argument.append("dist.from", IntegerAttr::get(IntegerType::get(step.getContext(), 64), source.stage));
      }
      addResult(source, v, result);
      addArgument(to, v, argument);
    };
    if (!from.backward && from.stage == to.stage) {
      transfer(from, "save");
      ++summary.saves;
      return success();
    }
    if (!from.backward && from.stage < to.stage) {
      if (!to.backward) {
        transfer(from, "send");
        ++summary.sends;
        return success();
      }
      // Received by the stage's forward, and kept for its backward.
      Piece forward{to.stage, false};
      if (failed(resolve(v, forward, user)))
        return failure();
      transfer(forward, "save");
      ++summary.saves;
      return success();
    }
    if (from.backward && to.backward && from.stage > to.stage) {
      transfer(from, "send");
      ++summary.sends;
      return success();
    }
    return user->emitError() << "pipeline: on stage " << to.stage << "'s " << to.phase()
                             << ", this op reads a value made on stage " << from.stage << "'s " << from.phase()
                             << " (values flow to later stages forward and to earlier ones backward)",
           failure();
  }

  LogicalResult connect() {
    for (Operation &op : body.without_terminator())
      if (!isRemade(&op) && !op.hasAttr(dist::kStageSumAttrName))
        for (Value v : op.getOperands())
          if (failed(resolve(v, pieceOf.lookup(&op), &op)))
            return failure();
    Operation *terminator = body.getTerminator();
    Value loss = terminator->getOperand(0);
    // The loss first, as @forward_backward returns it.
    Interface &last = at(pieceOf.lookup(loss.getDefiningOp()));
    last.results.insert(last.results.begin(), loss);
    last.resultAttrs.insert(last.resultAttrs.begin(), NamedAttrList(step.getResultAttrDict(0)));
    for (unsigned i = 1; i < terminator->getNumOperands(); ++i) {
      // A weight read on several stages: each stage's part.
      SmallVector<Value> parts, pending{terminator->getOperand(i)};
      while (!pending.empty()) {
        Value v = pending.pop_back_val();
        Operation *def = v.getDefiningOp();
        if (def && def->hasAttr(dist::kStageSumAttrName))
          pending.append(def->getOperands().begin(), def->getOperands().end());
        else
          parts.push_back(v);
      }
      for (Value part : llvm::reverse(parts)) {
        Operation *def = part.getDefiningOp();
        // A weight nothing reads has a zero gradient: the last stage's.
        Piece to{def && !isRemade(def) ? pieceOf.lookup(def).stage : stages - 1, true};
        if (failed(resolve(part, to, terminator)))
          return failure();
        addResult(to, part, NamedAttrList(step.getResultAttrDict(i)));
      }
    }
    return success();
  }

  void build(ModuleOp module) {
    MLIRContext *context = module.getContext();
    OpBuilder builder(context);
    builder.setInsertionPointAfter(step);
    for (int64_t stage = 0; stage < stages; ++stage)
      for (bool backward : {false, true}) {
        Interface &piece = at(Piece{stage, backward});
        SmallVector<Type> argTypes, resultTypes;
        for (Value v : piece.args)
          argTypes.push_back(v.getType());
        for (Value v : piece.results)
          resultTypes.push_back(v.getType());
        auto function = func::FuncOp::create(builder, step.getLoc(), stageFunctionName(stage, backward),
                                             builder.getFunctionType(argTypes, resultTypes));
        dist::setStage(function, stage);
        builder.setInsertionPointAfter(function);
        Block *entry = function.addEntryBlock();
        IRMapping map;
        for (auto [value, arg] : llvm::zip(piece.args, entry->getArguments()))
          map.map(value, arg);
        OpBuilder inside = OpBuilder::atBlockEnd(entry);
        // A remade value's ops, cloned (operands first) where first read.
        std::function<Value(Value)> local = [&](Value v) {
          Operation *def = v.getDefiningOp();
          if (!map.contains(v) && def && isRemade(def)) {
            for (Value operand : def->getOperands())
              local(operand);
            Operation *copy = inside.clone(*def, map);
            for (StringRef attr : {dist::kStageAttrName, dist::kRepeatAttrName, dist::kRepeatOfAttrName})
              copy->removeAttr(attr);
          }
          return map.lookupOrDefault(v);
        };
        for (Operation *op : piece.ops) {
          for (Value v : op->getOperands())
            local(v);
          Operation *copy = inside.clone(*op, map);
          for (StringRef attr : {dist::kStageAttrName, dist::kRepeatAttrName, dist::kRepeatOfAttrName})
            copy->removeAttr(attr);
        }
        SmallVector<Value> results;
        for (Value v : piece.results)
          results.push_back(local(v));
        func::ReturnOp::create(inside, step.getLoc(), results);
        for (unsigned i = 0; i < piece.args.size(); ++i)
          function.setArgAttrs(i, piece.argAttrs[i].getDictionary(context));
        for (unsigned i = 0; i < piece.results.size(); ++i)
          function.setResultAttrs(i, piece.resultAttrs[i].getDictionary(context));
      }
  }

  func::FuncOp step;
  Block &body;
  int64_t stages;
  std::vector<Interface> pieces;
  llvm::DenseMap<Operation *, Piece> pieceOf;
  llvm::DenseSet<Operation *> remade;
  int64_t next = 0;
  SplitSummary summary;
};

} // namespace

FailureOr<SplitSummary> splitStages(ModuleOp module, int64_t stages) {
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step)
    return module.emitError("pipeline: the module has no @forward_backward (run train-autodiff first)"), failure();
  return Splitter(step, stages).run(module);
}

namespace {

struct SplitStagesPass : impl::SplitStagesPassBase<SplitStagesPass> {
  using SplitStagesPassBase::SplitStagesPassBase;

  void runOnOperation() override {
    dist::PlanAttr plan = dist::PlanAttr::on(getOperation());
    int64_t stages = plan ? plan.getPp() * plan.getVirtualStages() : 1;
    if (stages > 1 && failed(splitStages(getOperation(), stages)))
      signalPassFailure();
  }
};

} // namespace

} // namespace colossal::partition
