//===- CostGraphBridge.cpp - train IR to the cost model's graph ----------===//

#include "passes/plan/CostGraphBridge.h"

#include "colossal/Dialect/Dist/Stages.h"

#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/cost/LayerDetection.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;

namespace colossal::plan {
namespace {

std::optional<cost::DType> dtypeOf(Type type) {
  Type element = llvm::cast<ShapedType>(type).getElementType();
  if (element.isF32()) return cost::DType::F32;
  if (element.isBF16()) return cost::DType::BF16;
  if (element.isF16()) return cost::DType::F16;
  if (element.isInteger(64)) return cost::DType::I64;
  if (element.isInteger(32)) return cost::DType::I32;
  if (element.isInteger(1) || element.isInteger(8)) return cost::DType::I8;
  return std::nullopt;
}

cost::FactorKind kindOf(train::FactorKind kind) {
  switch (kind) {
  case train::FactorKind::Parallel: return cost::FactorKind::Parallel;
  case train::FactorKind::Reduction: return cost::FactorKind::Reduction;
  case train::FactorKind::Whole: return cost::FactorKind::Whole;
  }
  return cost::FactorKind::Whole;
}

std::vector<std::vector<int>> dimsOf(const train::TensorFactors &tensor) {
  std::vector<std::vector<int>> dims;
  dims.reserve(tensor.size());
  for (const train::DimFactors &dim : tensor)
    dims.emplace_back(dim.begin(), dim.end());
  return dims;
}

/// A parameter, or a view of one (transposed, reshaped, cast, or read as
/// copies over mesh axes: 2.5D's weight blocks): kept as model state, not
/// as an activation.
bool isParameterView(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (llvm::isa<train::ParamOp>(def))
      return true;
    auto copies = llvm::dyn_cast<dist::ReshardOp>(def);
    if (!llvm::isa<train::TransposeOp, train::ReshapeOp, train::CastOp, dist::CopyToRanksOp>(def) &&
        !(copies && copies.movesNothing()))
      return false;
    v = def->getOperand(0);
  }
  return false;
}

double elementsOf(Value v) { return double(llvm::cast<RankedTensorType>(v.getType()).getNumElements()); }

/// A parameter's view whose last step is a transpose: transposed back for a
/// gradient, it is the parameter's own view again, not a copy.
bool isTransposedParameter(Value v) {
  auto transpose = v.getDefiningOp<train::TransposeOp>();
  return transpose && isParameterView(transpose.getInput());
}

/// The operands a contraction's backward pass copies transposed to make
/// the other operand's gradient (the autodiff rules, after
/// memory/FoldTransposes.h folds the matrix transposes into products).
llvm::SmallVector<int> transposedCopiesForGradients(mlir::Operation *op) {
  llvm::SmallVector<int> copied;
  auto rank = [&](unsigned i) { return llvm::cast<RankedTensorType>(op->getOperand(i).getType()).getRank(); };
  // dw = x^T dy on rows and dx = dy w^T on matrices: both in place.
  if (llvm::isa<train::LinearOp>(op)) {
    if (rank(0) > 2 && !isTransposedParameter(op->getOperand(1)))
      copied.push_back(1);
  } else if (llvm::isa<train::MatMulOp>(op)) {
    // A matrix right operand's gradient is made on rows (in place); a
    // batched one reads the left operand copied transposed.
    if (rank(1) > 2)
      copied.push_back(0);
    if ((rank(0) > 2 || rank(1) > 2) && !isTransposedParameter(op->getOperand(1)))
      copied.push_back(1);
  }
  return copied;
}

/// Op kind, forward FLOPs, and which tensors the op keeps for backward.
struct OpFacts {
  cost::OpKind kind = cost::OpKind::Elementwise;
  double forwardFlops = 0;
  double backwardRatio = 2;
  std::vector<int> savedInputs;  // operand indices
  bool savesOutput = false;
  bool savesMask = false;        // its keep mask, one element per output element
};

/// The values a gradient flows into: results of ops reading a trainable
/// parameter, directly or through other such values. The backward pass
/// keeps an op's input only for a gradient that needs it.
llvm::DenseSet<Value> valuesWithGradients(func::FuncOp function, const std::optional<SymbolTable> &parameters) {
  llvm::DenseSet<Value> needs;
  function.walk([&](Operation *op) {
    bool flows = false;
    if (auto read = llvm::dyn_cast<train::ParamOp>(op)) {
      auto declared = parameters ? parameters->lookup<train::ParameterOp>(read.getName()) : nullptr;
      flows = !declared || declared.getTrainable();
    }
    for (Value operand : op->getOperands())
      flows |= needs.contains(operand);
    if (flows)
      for (Value result : op->getResults())
        needs.insert(result);
  });
  return needs;
}

OpFacts factsOf(Operation *op, const train::ShardingRule &rule, const llvm::DenseSet<Value> &needsGradient) {
  double space = 1;
  for (const train::ShardingFactor &f : rule.factors)
    space *= double(f.size);
  double out = op->getNumResults() ? elementsOf(op->getResult(0)) : 0;
  OpFacts facts;
  auto needs = [&](int i) { return i < int(op->getNumOperands()) && needsGradient.contains(op->getOperand(i)); };
  // Nothing upstream to differentiate: the op keeps nothing.
  bool anyNeeds = llvm::any_of(op->getOperands(), [&](Value v) { return needsGradient.contains(v); });
  // Inputs kept for the backward pass (weights are read again, not kept),
  // when some input's gradient needs them at all.
  auto activationInputs = [&](std::initializer_list<int> which) {
    if (!anyNeeds)
      return;
    for (int i : which)
      if (i < int(op->getNumOperands()) && !isParameterView(op->getOperand(i)))
        facts.savedInputs.push_back(i);
  };
  // A product's gradient for one factor is the other factor: each is kept
  // only for its partner's gradient.
  auto partnersOf = [&](int a, int b) {
    if (needs(b) && !isParameterView(op->getOperand(a)))
      facts.savedInputs.push_back(a);
    if (needs(a) && !isParameterView(op->getOperand(b)))
      facts.savedInputs.push_back(b);
  };
  llvm::TypeSwitch<Operation *>(op)
      .Case<train::MatMulOp, train::LinearOp, train::GemmOp, dist::GridLinearOp>([&](Operation *) {
        facts.kind = cost::OpKind::MatMul;
        facts.forwardFlops = 2 * space;
        partnersOf(0, 1);
      })
      .Case([&](train::EinsumOp) {
        facts.kind = cost::OpKind::MatMul;
        facts.forwardFlops = 2 * space;
        activationInputs({0, 1});
      })
      .Case([&](train::ConvOp conv) {
        // 2 N M (C / group) prod(out) prod(kernel): the factor product would
        // count input and output positions both.
        auto w = llvm::cast<RankedTensorType>(conv.getWeight().getType());
        facts.kind = cost::OpKind::MatMul;
        facts.forwardFlops = 2 * out * double(w.getNumElements()) / double(w.getDimSize(0));
        activationInputs({0});
      })
      .Case([&](train::AttentionOp attention) {
        // Two contractions over [.., sq, sk] with head sizes d and dv; the
        // fused kernel keeps q, k and v (its backward makes the scores
        // again and reads no output: attentionGrad).
        auto q = llvm::cast<RankedTensorType>(attention.getQuery().getType());
        auto v = llvm::cast<RankedTensorType>(attention.getValue().getType());
        double scores = elementsOf(attention.getQuery()) / double(q.getShape().back()) *
                        double(v.getShape()[v.getRank() - 2]);
        // Model FLOPs count the two contractions (the softmax is noise at
        // scale, and a fused backward's recomputation is not model work).
        facts.kind = cost::OpKind::MatMul;
        facts.forwardFlops = 2 * scores * (q.getShape().back() + v.getShape().back());
        activationInputs({0, 1, 2});
      })
      .Case<train::LayerNormOp, train::RmsNormOp>([&](Operation *) {
        facts.kind = cost::OpKind::Norm;
        facts.forwardFlops = 7 * out;
        activationInputs({0});
      })
      .Case<train::SoftmaxOp, train::LogSoftmaxOp>([&](Operation *) {
        facts.kind = cost::OpKind::Softmax;
        facts.forwardFlops = 5 * out;
        facts.savesOutput = true;
      })
      .Case([&](train::DropoutOp) {
        facts.forwardFlops = 2 * out;
        facts.savesMask = true;
      })
      .Case<train::CrossEntropyOp, train::SoftmaxCrossEntropyLossOp, train::NegativeLogLikelihoodLossOp>(
          [&](Operation *) {
            facts.kind = cost::OpKind::Loss;
            facts.forwardFlops = 5 * elementsOf(op->getOperand(0));
            activationInputs({0});
          })
      .Case([&](train::GatherOp) {
        facts.kind = cost::OpKind::Embedding;
        facts.forwardFlops = out;
      })
      .Case<train::GeluOp, train::SiluOp, train::TanhOp, train::SigmoidOp, train::ErfOp, train::ExpOp, train::LogOp,
            train::SqrtOp, train::ReciprocalOp, train::ReluOp, train::SinOp, train::CosOp, train::PowOp>(
          [&](Operation *) {
            facts.forwardFlops = 8 * out;
            activationInputs({0});
          })
      .Case([&](train::MulOp) {
        facts.forwardFlops = out;
        partnersOf(0, 1);
      })
      .Case([&](train::DivOp) {
        // x / y: x's gradient needs y; y's needs both.
        facts.forwardFlops = out;
        if (needs(1))
          activationInputs({0, 1});
        else if (needs(0) && !isParameterView(op->getOperand(1)))
          facts.savedInputs.push_back(1);
      })
      .Default([&](Operation *) { facts.forwardFlops = out; });
  if (!anyNeeds)
    facts.savesOutput = facts.savesMask = false;
  return facts;
}

/// Selective recomputation on an imported model (memory/RecomputeLayers.h does
/// the same to the IR): inside a layer, the contractions keep their results
/// and every other op runs again in the backward pass, so a saved tensor is
/// made again when a non-contraction op of the same layer made it and no op
/// outside the layer reads it (such a value leaves the layer: a
/// checkpoint). Every non-contraction op of a layer is charged its forward
/// again, an upper bound: an op whose result the backward never reads is
/// not re-run.
void markSelectiveRecomputation(cost::Graph &graph) {
  std::vector<bool> leavesLayer(graph.values.size(), false);
  for (const cost::Op &op : graph.ops)
    for (const cost::TensorUse &use : op.inputs) {
      int producer = graph.values[size_t(use.value)].producer;
      if (producer >= 0 && graph.ops[size_t(producer)].layer != op.layer)
        leavesLayer[size_t(use.value)] = true;
    }
  auto remade = [&](int value, int layer) {
    int producer = graph.values[size_t(value)].producer;
    if (producer < 0 || leavesLayer[size_t(value)])
      return false;
    const cost::Op &made = graph.ops[size_t(producer)];
    return made.layer == layer && made.kind != cost::OpKind::MatMul;
  };
  for (cost::Op &op : graph.ops) {
    if (op.layer < 0)
      continue;
    op.recomputedWhenSelective = op.kind != cost::OpKind::MatMul;
    for (cost::SavedTensor &saved : op.saved) {
      if (saved.input >= 0)
        saved.recomputedWhenSelective = remade(op.inputs[size_t(saved.input)].value, op.layer);
      else
        saved.recomputedWhenSelective =
            op.recomputedWhenSelective && !op.outputs.empty() && remade(op.outputs[0].value, op.layer);
    }
  }
}

/// A resharding, stated or lowered to a collective, that moves or makes
/// data (not copies over an axis, which only its gradient tells apart).
bool movesData(Operation *op) {
  if (auto reshard = llvm::dyn_cast<dist::ReshardOp>(op))
    return !reshard.movesNothing();
  return llvm::isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp, dist::AllToAllOp, dist::RankSliceOp>(
             op) &&
         op->getNumOperands() == 1 && op->getNumResults() == 1;
}

} // namespace

FailureOr<cost::Graph> buildCostGraph(func::FuncOp function, const CostGraphOptions &options) {
  cost::Graph graph;
  // The parameters' declarations, in one table: a module's own lookup walks
  // its body for every read.
  std::optional<SymbolTable> parameters;
  if (auto module = function->getParentOfType<ModuleOp>(); module && !options.shapesOnly)
    parameters.emplace(module);
  llvm::DenseSet<Value> needsGradient;
  if (!options.shapesOnly)
    needsGradient = valuesWithGradients(function, parameters);
  // Room for every op and about as many values again (parameters,
  // constants): the graph is built without moving its parts.
  size_t bodyOps = function.getBody().empty() ? 0 : function.getBody().front().getOperations().size();
  graph.ops.reserve(bodyOps);
  graph.values.reserve(2 * bodyOps);
  llvm::DenseMap<Value, int> valueIndex;
  // Ops a pipeline makes again on another stage count once: their copies'
  // values are the original's (dist/Stages.h).
  llvm::DenseMap<int64_t, Operation *> repeated;
  function.walk([&](Operation *op) {
    if (auto id = op->getAttrOfType<IntegerAttr>(dist::kRepeatAttrName))
      repeated[id.getInt()] = op;
  });
  auto originalOf = [&](Operation *copy) {
    return repeated.lookup(copy->getAttrOfType<IntegerAttr>(dist::kRepeatOfAttrName).getInt());
  };
  auto valueOf = [&](Value v) -> FailureOr<int> {
    if (auto known = valueIndex.find(v); known != valueIndex.end())
      return known->second;
    Value read = v;
    // A copy to the tensor ranks is the identity: a replicated weight read
    // through one (sequence parallelism) is still that weight.
    while (true) {
      if (Operation *def = v.getDefiningOp(); def && dist::isRepeatCopy(def) && originalOf(def))
        v = originalOf(def)->getResult(cast<OpResult>(v).getResultNumber());
      else if (auto copy = v.getDefiningOp<dist::CopyToRanksOp>())
        v = copy.getInput();
      else if (auto copies = v.getDefiningOp<dist::ReshardOp>(); copies && copies.movesNothing())
        v = copies.getInput();
      else
        break;
    }
    // The value read through copies is known by its reads too.
    if (auto it = valueIndex.find(v); it != valueIndex.end()) {
      int index = it->second;
      valueIndex[read] = index;
      return index;
    }
    std::optional<cost::DType> dtype = dtypeOf(v.getType());
    if (!dtype) {
      emitError(v.getLoc()) << "the cost model has no element type for " << v.getType();
      return failure();
    }
    std::string name;
    bool isParameter = false, frozen = false;
    if (auto param = v.getDefiningOp<train::ParamOp>()) {
      name = param.getName().str();
      isParameter = true;
      auto declared = parameters ? parameters->lookup<train::ParameterOp>(param.getName()) : nullptr;
      frozen = declared && !declared.getTrainable();
    }
    int index = graph.addValue(name, *dtype, isParameter);
    graph.values[size_t(index)].frozen = frozen;
    graph.values[size_t(index)].constant = v.getDefiningOp<train::ConstantOp>() != nullptr;
    // A resharding that moves data (a sum over ranks, a gather, a slice of
    // the rank's part), stated or lowered to its collectives, is how its
    // input's producer delivers the value: blocks that differ only in their
    // reshardings are still alike (layers).
    if (Operation *moved = v.getDefiningOp(); moved && movesData(moved))
      if (auto source = valueIndex.find(moved->getOperand(0)); source != valueIndex.end()) {
        const cost::Value &from = graph.values[size_t(source->second)];
        graph.values[size_t(index)].reshardedFrom = from.producer >= 0 ? from.producer : from.reshardedFrom;
      }
    valueIndex[v] = index;
    valueIndex[read] = index;
    return index;
  };

  // The train ops by their rules, and SUMMA's product of blocks as the
  // linear layer it computes.
  WalkResult walk = function.walk([&](Operation *op) -> WalkResult {
    // A weight block gathered for a product (3D tensor parallelism): no
    // arithmetic, but the parameter it reads is model state of the block's
    // size, and what it makes is the product's operand. Asked for, any
    // resharding that moves data is such an op: what it makes is memory
    // the step holds.
    if (isParameterGather(op) || (options.reshardingsAsOps && movesData(op) && !dist::isRepeatCopy(op))) {
      cost::Op costOp;
      costOp.name = op->getName().getStringRef().str();
      for (Value v : {Value(op->getOperand(0)), Value(op->getResult(0))}) {
        FailureOr<int> index = valueOf(v);
        if (failed(index))
          return WalkResult::interrupt();
        cost::TensorUse use{*index, {}};
        for (int64_t size : llvm::cast<RankedTensorType>(v.getType()).getShape()) {
          use.dims.push_back({int(costOp.factors.size())});
          costOp.factors.push_back({"f" + std::to_string(costOp.factors.size()), size, cost::FactorKind::Whole});
        }
        (v == op->getOperand(0) ? costOp.inputs : costOp.outputs).push_back(std::move(use));
      }
      graph.values[size_t(costOp.outputs[0].value)].producer = int(graph.ops.size());
      costOp.exchange = true;
      graph.ops.push_back(std::move(costOp));
      return WalkResult::advance();
    }
    auto ruled = llvm::dyn_cast<train::ShardingRuleOpInterface>(op);
    if (!isCostGraphOp(op) || dist::isRepeatCopy(op))
      return WalkResult::advance();
    train::ShardingRule rule = ruled ? ruled.getShardingRule() : train::computeShardingRule(op);
    cost::Op costOp;
    costOp.name = op->getName().getStringRef().str();
    costOp.factors.reserve(rule.factors.size());
    costOp.inputs.reserve(op->getNumOperands());
    costOp.outputs.reserve(op->getNumResults());
    for (auto [i, f] : llvm::enumerate(rule.factors))
      costOp.factors.push_back({options.shapesOnly ? std::string() : "f" + std::to_string(i), f.size, kindOf(f.kind)});
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      FailureOr<int> v = valueOf(operand);
      if (failed(v))
        return WalkResult::interrupt();
      costOp.inputs.push_back({*v, dimsOf(rule.operands[i])});
    }
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      FailureOr<int> v = valueOf(result);
      if (failed(v))
        return WalkResult::interrupt();
      graph.values[*v].producer = int(graph.ops.size());
      costOp.outputs.push_back({*v, dimsOf(rule.results[i])});
    }
    if (options.shapesOnly) {
      graph.ops.push_back(std::move(costOp));
      return WalkResult::advance();
    }
    // A lookup from a table split by rows is a partial sum (rows outside
    // a rank's slice give zeros; VocabularyParallel.h): the gathered
    // dimension is a reduction to the cost model, not a factor that must
    // stay whole.
    if (auto gather = llvm::dyn_cast<train::GatherOp>(op))
      for (int f : rule.operands[0][size_t(gather.getAxis())])
        costOp.factors[size_t(f)].kind = cost::FactorKind::Reduction;
    OpFacts facts = factsOf(op, rule, needsGradient);
    costOp.kind = facts.kind;
    // The fused attention op is the attention core sequence parallelism's
    // algorithms (all-to-all, ring) work on.
    costOp.attentionCore = llvm::isa<train::AttentionOp>(op);
    costOp.relabels = llvm::isa<train::ReshapeOp>(op);
    costOp.weightView = isTransposedParameter(op->getResult(0));
    costOp.gradientsInTurn = llvm::isa<train::MulOp>(op);
    costOp.transcendental = llvm::isa<train::GeluOp, train::SiluOp, train::TanhOp, train::SigmoidOp, train::ErfOp,
                                      train::ExpOp, train::LogOp, train::SinOp, train::CosOp, train::PowOp>(op);
    if (auto attention = llvm::dyn_cast<train::AttentionOp>(op))
      costOp.causal = attention.getCausal();
    // A contraction's operand gradient reads the other operand transposed:
    // a copy only where the product is batched (matrix products read it
    // transposed in place, memory/FoldTransposes.h) and that operand is
    // not a weight's transposed view (transposed back it is the weight
    // itself, memory/RereadParameters.h).
    for (int i : transposedCopiesForGradients(op))
      if (needsGradient.contains(op->getOperand(1 - i)))
        costOp.transposedForGradient.push_back(i);
    costOp.forwardFlops = facts.forwardFlops;
    costOp.backwardFlops = facts.backwardRatio * facts.forwardFlops;
    for (int i : facts.savedInputs)
      costOp.saved.push_back({costOp.inputs[i].dims, graph.values[costOp.inputs[i].value].dtype,
                              false, i});
    if (facts.savesOutput && !costOp.outputs.empty())
      costOp.saved.push_back(
          {costOp.outputs[0].dims, graph.values[costOp.outputs[0].value].dtype, false, -1, 0});
    // The emitted programs hold a boolean mask as 64-bit integers (codegen's
    // integer storage), eight bytes per element, not the one byte a
    // transformer-shape estimate assumes.
    if (facts.savesMask && !costOp.outputs.empty())
      costOp.saved.push_back({costOp.outputs[0].dims, cost::DType::I64, false, -1});
    graph.ops.push_back(std::move(costOp));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // Parameters reached only through ops without rules still count once.
  function.walk([&](train::ParamOp param) { (void)valueOf(param.getResult()); });
  if (options.shapesOnly)
    return graph;
  cost::detectLayers(graph);
  markSelectiveRecomputation(graph);
  return graph;
}

bool isParameterGather(Operation *op) {
  auto reshard = llvm::dyn_cast<dist::ReshardOp>(op);
  return reshard && !reshard.movesNothing() && isParameterView(reshard.getInput());
}

bool isCostGraphOp(Operation *op) {
  return llvm::isa<train::ShardingRuleOpInterface, dist::GridLinearOp>(op) || isParameterGather(op);
}

} // namespace colossal::plan
