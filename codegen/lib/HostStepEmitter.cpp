//===- HostStepEmitter.cpp - each op as a runtime call ----------------------===//

#include "HostStepEmitter.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <optional>

namespace colossal::codegen {

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

LogicalResult StepEmitter::emitConstant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitError() << "the host target needs dense constants";
  FailureOr<Kind> kind = kindOf(op.getResult(), op);
  if (failed(kind))
    return failure();
  int64_t n = dense.getNumElements();
  std::string values;
  if (external_ && !dense.isSplat() && n > kInlineConstantElements) {
    // Beside the program, not a literal the C++ compiler has to parse.
    std::string name = "constant" + std::to_string(external_->size());
    external_->push_back(ExternalConstant{name, dense});
    std::string count = std::to_string(n);
    return define(op, op.getResult(),
                  *kind == Kind::Float ? "Tensor::ofFloats(" + shape(op.getResult()) +
                                             ", colossal::rt::programFloats(\"" + name + "\", " + count + "))"
                                       : "Tensor::ofInts(" + shape(op.getResult()) + ", colossal::rt::programInts(\"" +
                                             name + "\", " + count + "))");
  }
  if (*kind == Kind::Float) {
    if (dense.isSplat()) {
      values = "std::vector<float>(" + std::to_string(n) + ", " +
               floatLiteral(dense.getSplatValue<APFloat>().convertToDouble()) + ")";
    } else {
      values = "std::vector<float>{";
      int64_t i = 0;
      for (APFloat v : dense.getValues<APFloat>())
        values += (i++ ? ", " : "") + floatLiteral(v.convertToDouble());
      values += "}";
    }
    return define(op, op.getResult(), "Tensor::ofFloats(" + shape(op.getResult()) + ", " + values + ")");
  }
  bool boolean = dense.getElementType().isInteger(1);
  auto asInt = [&](const APInt &v) { return std::to_string(boolean ? int64_t(v.getBoolValue()) : v.getSExtValue()); };
  if (dense.isSplat()) {
    values = "std::vector<int64_t>(" + std::to_string(n) + ", " + asInt(dense.getSplatValue<APInt>()) + ")";
  } else {
    values = "std::vector<int64_t>{";
    int64_t i = 0;
    for (APInt v : dense.getValues<APInt>())
      values += (i++ ? ", " : "") + asInt(v);
    values += "}";
  }
  return define(op, op.getResult(), "Tensor::ofInts(" + shape(op.getResult()) + ", " + values + ")");
}

namespace {

std::string ignoreLiteral(std::optional<uint64_t> ignore) {
  return ignore ? "std::optional<int64_t>(" + std::to_string(int64_t(*ignore)) + ")" : "std::nullopt";
}

/// A loss split by tokens whose classes a tensor axis splits too: the
/// trailing arguments naming that axis and the classes.
template <typename LossOp> std::string vocabularyAxisOf(LossOp loss) {
  std::optional<StringRef> axis = loss.getMeshAxis();
  if (!axis)
    return "";
  return ", \"" + axis->str() + "\", " + std::to_string(loss.getClasses() ? int64_t(*loss.getClasses()) : -1);
}

/// The trailing dropout argument of attention and its gradient (none
/// without dropout): the step's key for the site over the whole
/// probabilities, of which a rank of `dropout_axis` holds a slice of heads,
/// and a rank of a ring its queries' rows against every key (the whole has
/// the ring's ranks squared times the rank's scores).
template <typename AttentionLike> std::string attentionDropoutOf(AttentionLike op) {
  if (op.getDropout().isZero())
    return "";
  auto q = cast<ShapedType>(op.getQuery().getType());
  int64_t rank = q.getRank(), heads = rank >= 3 ? q.getDimSize(rank - 3) : 1;
  int64_t scores =
      q.getNumElements() / q.getDimSize(rank - 1) * cast<ShapedType>(op.getKey().getType()).getDimSize(rank - 2);
  std::string slice = "0", slices = "1", whole = std::to_string(scores);
  if (std::optional<StringRef> axis = op.getDropoutAxis()) {
    slice = "collectives.rankOn(" + quoted(*axis) + ")", slices = "collectives.ranksOn(" + quoted(*axis) + ")";
    whole += " * " + slices;
  }
  if (std::optional<StringRef> axis = op.getRingAxis())
    whole += " * collectives.ranksOn(" + quoted(*axis) + ") * collectives.ranksOn(" + quoted(*axis) + ")";
  return ", attentionDropout(" + floatLiteral(op.getDropout().convertToDouble()) + ", random.dropoutKey(" +
         std::to_string(int64_t(op.getDropoutSite())) + ", " + whole + "), " + std::to_string(heads) + ", " + slice +
         ", " + slices + ")";
}

} // namespace

LogicalResult StepEmitter::emitOp(Operation *op, const std::map<std::string, size_t> &parameterIndex) {
  auto in = [&](unsigned i) { return ref(op->getOperand(i)); };
  auto out = [&]() { return shape(op->getResult(0)); };
  auto one = [&](const std::string &expression) { return define(op, op->getResult(0), expression); };
  auto binaryOp = [&](const char *kind) {
    bool integer = isa<IntegerType>(cast<ShapedType>(op->getResult(0).getType()).getElementType());
    return one(std::string("binary(Binary::") + kind + ", " + in(0) + ", " + in(1) + ", " + out() + ", " +
               (integer ? "true" : "false") + ")");
  };
  auto compareOp = [&](const char *kind) {
    return one(std::string("compare(Compare::") + kind + ", " + in(0) + ", " + in(1) + ", " + out() + ")");
  };
  auto unaryOp = [&](const char *kind) { return one(std::string("unary(Unary::") + kind + ", " + in(0) + ")"); };
  // Which slice of a split tensor this rank holds.
  auto sliceOf = [&](StringRef axis) {
    return "collectives.rankOn(" + quoted(axis) + "), collectives.ranksOn(" + quoted(axis) + ")";
  };
  if (auto p = dyn_cast<ParamOp>(op)) {
    auto it = parameterIndex.find(p.getName().str());
    if (it == parameterIndex.end())
      return op->emitError() << "reads @" << p.getName() << ", which the module does not declare";
    std::string name = "v" + std::to_string(counter_++);
    names_[p.getResult()] = name;
    // A read fetches the parameter (under ZeRO-3 an all-gather) until its
    // last use; on the device the upload is the step's own copy.
    if (device_) {
      os_ << "  Tensor " << name << " = upload(parameters.fetch(" << it->second << ")); // @" << p.getName() << "\n";
      os_ << "  parameters.release(" << it->second << ");\n";
      hold(p.getResult(), name);
    } else {
      os_ << "  const Tensor &" << name << " = parameters.fetch(" << it->second << "); // @" << p.getName() << "\n";
      fetched_[p.getResult()] = it->second;
      if (p.getResult().use_empty())
        release(p.getResult());
    }
    return success();
  }
  if (auto c = dyn_cast<ConstantOp>(op))
    return emitConstant(c);
  if (isa<AddOp>(op))
    return binaryOp("Add");
  if (isa<SubOp>(op))
    return binaryOp("Sub");
  if (isa<MulOp>(op))
    return binaryOp("Mul");
  if (isa<DivOp>(op))
    return binaryOp("Div");
  if (isa<PowOp>(op))
    return binaryOp("Pow");
  if (isa<MaxOp>(op))
    return binaryOp("Max");
  if (isa<MinOp>(op))
    return binaryOp("Min");
  if (isa<EqualOp>(op))
    return compareOp("Equal");
  if (isa<LessOp>(op))
    return compareOp("Less");
  if (isa<GreaterOp>(op))
    return compareOp("Greater");
  if (isa<SqrtOp>(op))
    return unaryOp("Sqrt");
  if (isa<ReciprocalOp>(op))
    return unaryOp("Reciprocal");
  if (isa<NegOp>(op))
    return unaryOp("Neg");
  if (isa<AbsOp>(op))
    return unaryOp("Abs");
  if (isa<ExpOp>(op))
    return unaryOp("Exp");
  if (isa<LogOp>(op))
    return unaryOp("Log");
  if (isa<ErfOp>(op))
    return unaryOp("Erf");
  if (isa<TanhOp>(op))
    return unaryOp("Tanh");
  if (isa<SigmoidOp>(op))
    return unaryOp("Sigmoid");
  if (isa<ReluOp>(op))
    return unaryOp("Relu");
  if (isa<SinOp>(op))
    return unaryOp("Sin");
  if (isa<CosOp>(op))
    return unaryOp("Cos");
  if (isa<SiluOp>(op))
    return unaryOp("Silu");
  if (auto g = dyn_cast<GeluOp>(op))
    return unaryOp(g.getApproximate() == "tanh" ? "GeluTanh" : "Gelu");
  if (isa<WhereOp>(op))
    return one("where(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + out() + ")");
  if (auto c = dyn_cast<CastOp>(op)) {
    Type to = c.getTo();
    if (!to.isF32() && !to.isBF16() && !to.isF16() && !isa<IntegerType>(to))
      return op->emitError() << "emitted programs compute in float32, bf16 or fp16; cannot cast to " << to;
    bool toBool = to.isInteger(1), toInteger = isa<IntegerType>(to) && !toBool;
    return one("cast(" + in(0) + ", " + (toInteger ? "true" : "false") + ", " + (toBool ? "true" : "false") + ")");
  }
  if (isa<MatMulOp>(op))
    return one("matmul(" + in(0) + ", " + in(1) + ", " + out() + ")");
  if (auto g = dyn_cast<GemmOp>(op))
    return one("gemm(" + in(0) + ", " + in(1) + ", " + optionalRef(g.getC()) + ", " +
               (g.getTransA() ? "true" : "false") + ", " + (g.getTransB() ? "true" : "false") + ", " +
               floatLiteral(g.getAlpha().convertToDouble()) + ", " + floatLiteral(g.getBeta().convertToDouble()) +
               ", " + out() + ")");
  if (auto l = dyn_cast<LinearOp>(op))
    return one("linear(" + in(0) + ", " + in(1) + ", " + optionalRef(l.getBias()) + ", " + out() +
               (l.getTransposeWeight() ? ", true" : "") + ")");
  if (auto c = dyn_cast<ConvOp>(op))
    return one("conv(" + in(0) + ", " + in(1) + ", " + optionalRef(c.getBias()) + ", " + shapeLiteral(c.getStrides()) +
               ", " + shapeLiteral(c.getPads()) + ", " + shapeLiteral(c.getDilations()) + ", " +
               std::to_string(int64_t(c.getGroup())) + ", " + out() + ")");
  if (auto e = dyn_cast<EinsumOp>(op)) {
    std::string list = "{";
    for (auto [i, v] : llvm::enumerate(e.getInputs()))
      list += (i ? ", &" : "&") + ref(v);
    return one("einsum(" + quoted(e.getEquation()) + ", " + list + "}, " + out() + ")");
  }
  if (auto s = dyn_cast<SoftmaxOp>(op))
    return one("softmax(" + in(0) + ", " + std::to_string(int64_t(s.getAxis())) + ", false)");
  if (auto s = dyn_cast<LogSoftmaxOp>(op))
    return one("softmax(" + in(0) + ", " + std::to_string(int64_t(s.getAxis())) + ", true)");
  if (auto n = dyn_cast<LayerNormOp>(op))
    return one("layerNorm(" + in(0) + ", " + optionalRef(n.getScale()) + ", " + optionalRef(n.getBias()) + ", " +
               std::to_string(int64_t(n.getAxis())) + ", " + floatLiteral(n.getEpsilon().convertToDouble()) + ")");
  if (auto n = dyn_cast<RmsNormOp>(op))
    return one("rmsNorm(" + in(0) + ", " + optionalRef(n.getScale()) + ", " + std::to_string(int64_t(n.getAxis())) +
               ", " + floatLiteral(n.getEpsilon().convertToDouble()) + ")");
  if (auto g = dyn_cast<dist::GridLinearOp>(op))
    return one("summaLinear(" + in(0) + ", " + in(1) + ", collectives, " + quoted(g.getRowAxis()) + ", " +
               quoted(g.getColumnAxis()) + ", " + (g.getTransposeWeight() ? "true" : "false") + ")");
  if (auto a = dyn_cast<AttentionOp>(op)) {
    if (std::optional<StringRef> axis = a.getRingAxis())
      return one("ringAttention(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + optionalRef(a.getMask()) + ", " +
                 floatLiteral(a.getScale().convertToDouble()) + ", " + (a.getCausal() ? "true" : "false") +
                 ", collectives, " + quoted(*axis) + attentionDropoutOf(a) + ")");
    return one("attention(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + optionalRef(a.getMask()) + ", " +
               floatLiteral(a.getScale().convertToDouble()) + ", " + (a.getCausal() ? "true" : "false") +
               attentionDropoutOf(a) + ")");
  }
  if (auto r = dyn_cast<ReduceSumOp>(op))
    return one("reduce(ReduceKind::Sum, " + in(0) + ", " + shapeLiteral(r.getAxes()) + ", " + out() + ")");
  if (auto r = dyn_cast<ReduceMeanOp>(op))
    return one("reduce(ReduceKind::Mean, " + in(0) + ", " + shapeLiteral(r.getAxes()) + ", " + out() + ")");
  if (auto r = dyn_cast<ReduceMaxOp>(op))
    return one("reduce(ReduceKind::Max, " + in(0) + ", " + shapeLiteral(r.getAxes()) + ", " + out() + ")");
  if (auto d = dyn_cast<DropoutOp>(op); d && d.getMeshAxis()) {
    // The rank's tokens of a dropout over the whole tensor: the key counts
    // the whole tensor's elements.
    std::string axis = quoted(*d.getMeshAxis());
    return defineAll(op, "dropoutOfSlice(" + in(0) + ", " + floatLiteral(d.getRatio().convertToDouble()) +
                             ", random.dropoutKey(" + std::to_string(int64_t(d.getSite())) + ", " +
                             std::to_string(cast<ShapedType>(d.getInput().getType()).getNumElements()) +
                             " * collectives.ranksOn(" + axis + ")), " + std::to_string(int64_t(*d.getMeshDim())) +
                             ", collectives.rankOn(" + axis + "), collectives.ranksOn(" + axis + "))");
  }
  if (auto d = dyn_cast<DropoutOp>(op))
    return defineAll(op, "dropout(" + in(0) + ", " + floatLiteral(d.getRatio().convertToDouble()) +
                             ", random.dropoutKey(" + std::to_string(int64_t(d.getSite())) + ", " +
                             std::to_string(cast<ShapedType>(d.getInput().getType()).getNumElements()) + "))");
  if (auto l = dyn_cast<CrossEntropyOp>(op)) {
    if (std::optional<StringRef> axis = l.getTokenAxis())
      return one("tokenSplitCrossEntropy(" + in(0) + ", " + in(1) + ", " + ignoreLiteral(l.getIgnoreIndex()) + ", " +
                 quoted(l.getReduction()) + ", collectives, " + quoted(*axis) + vocabularyAxisOf(l) + ")");
    if (std::optional<StringRef> axis = l.getMeshAxis())
      return one("vocabularyParallelCrossEntropy(" + in(0) + ", " + in(1) + ", " + ignoreLiteral(l.getIgnoreIndex()) +
                 ", " + quoted(l.getReduction()) + ", collectives, " + quoted(*axis) + ", " +
                 std::to_string(l.getClasses() ? int64_t(*l.getClasses()) : int64_t(-1)) + ")");
    return one("crossEntropy(" + in(0) + ", " + in(1) + ", " + ignoreLiteral(l.getIgnoreIndex()) + ", " +
               quoted(l.getReduction()) + ")");
  }
  if (auto l = dyn_cast<NegativeLogLikelihoodLossOp>(op))
    return one("nllLoss(" + in(0) + ", " + in(1) + ", " + optionalRef(l.getWeights()) + ", " +
               ignoreLiteral(l.getIgnoreIndex()) + ", " + quoted(l.getReduction()) + ")");
  if (auto g = dyn_cast<GatherOp>(op)) {
    if (std::optional<StringRef> axis = g.getMeshAxis())
      return one("gatherFromSlice(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " +
                 sliceOf(*axis) + ", " + out() + ")");
    return one("gather(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " + out() + ")");
  }
  if (auto s = dyn_cast<SliceOp>(op))
    return one("slice(" + in(0) + ", " + shapeLiteral(s.getStarts()) + ", " + shapeLiteral(s.getSteps()) + ", " +
               out() + ")");
  if (auto c = dyn_cast<ConcatOp>(op)) {
    std::string list = "{";
    for (auto [i, v] : llvm::enumerate(c.getInputs()))
      list += (i ? ", &" : "&") + ref(v);
    return one("concat(" + list + "}, " + std::to_string(int64_t(c.getAxis())) + ", " + out() + ")");
  }
  if (auto s = dyn_cast<SplitOp>(op)) {
    std::string shapes = "{";
    for (auto [i, r] : llvm::enumerate(s.getResults()))
      shapes += (i ? ", " : "") + shape(r);
    return defineAll(op, "split(" + in(0) + ", " + std::to_string(int64_t(s.getAxis())) + ", " + shapes + "})");
  }
  // A reshape relabels its input; the copy to the tensor axis's ranks is
  // the identity (its gradient is the all-reduce).
  if (isa<ReshapeOp, CopyToRanksOp>(op))
    return relabel(op);
  if (isa<ReshardOp>(op))
    return op->emitError() << "a resharding reaches the emitter: run train-lower-resharding first";
  if (auto g = dyn_cast<AllGatherOp>(op))
    return one("collectives.allGather(" + in(0) + ", " + quoted(g.getAxis()) + ", " +
               std::to_string(int64_t(g.getDim())) + ")");
  if (auto a = dyn_cast<AllToAllOp>(op))
    return one("collectives.allToAll(" + in(0) + ", " + quoted(a.getAxis()) + ", " +
               std::to_string(int64_t(a.getSplitDim())) + ", " + std::to_string(int64_t(a.getConcatDim())) + ")");
  if (auto r = dyn_cast<ReduceScatterOp>(op))
    return one("collectives.reduceScatter(" + in(0) + ", " + quoted(r.getAxis()) + ", " +
               std::to_string(int64_t(r.getDim())) + ")");
  if (auto r = dyn_cast<RankSliceOp>(op)) {
    // The slice starts at the rank's index times its size along `dim`.
    auto type = cast<ShapedType>(r.getType());
    std::string starts = "Shape{", steps = "Shape{";
    for (int64_t d = 0; d < type.getRank(); ++d) {
      starts += std::string(d ? ", " : "") + (d == int64_t(r.getDim()) ? "collectives.rankOn(" + quoted(r.getAxis()) +
                                                                             ") * " + std::to_string(type.getDimSize(d))
                                                                       : "0");
      steps += std::string(d ? ", " : "") + "1";
    }
    return one("slice(" + in(0) + ", " + starts + "}, " + steps + "}, " + out() + ")");
  }
  if (auto r = dyn_cast<AllReduceOp>(op)) {
    // A sum is made in the storage of the operand it reads last (a weight
    // gradient's partial sums, a row-parallel layer's output).
    return reuse(op, "collectives.allReduceInPlace(std::move(" + in(0) + "), " + quoted(r.getAxis()) + ")",
                 "collectives.allReduce(" + in(0) + ", " + quoted(r.getAxis()) + ")", /*computes=*/true);
  }
  if (auto t = dyn_cast<TransposeOp>(op))
    return one("transpose(" + in(0) + ", " + shapeLiteral(t.getPerm()) + ")");
  if (isa<BroadcastOp>(op))
    return one("broadcast(" + in(0) + ", " + out() + ")");
  if (auto t = dyn_cast<TriluOp>(op))
    return one("trilu(" + in(0) + ", " + (t.getUpper() ? "true" : "false") + ", " + std::to_string(int64_t(t.getK())) +
               ")");
  if (auto g = dyn_cast<GeluGradOp>(op))
    return one("geluGrad(" + in(0) + ", " + in(1) + ", " + (g.getApproximate() == "tanh" ? "true" : "false") + ")");
  if (isa<SiluGradOp>(op))
    return one("siluGrad(" + in(0) + ", " + in(1) + ")");
  if (auto n = dyn_cast<LayerNormGradOp>(op))
    return defineAll(op, "layerNormGrad(" + ref(n.getInput()) + ", " + optionalRef(n.getScale()) + ", " +
                             ref(n.getResultGrad()) + ", " + std::to_string(int64_t(n.getAxis())) + ", " +
                             floatLiteral(n.getEpsilon().convertToDouble()) + ", " +
                             (n.getHasBias() ? "true" : "false") + ", " + std::to_string(op->getNumResults()) + ")");
  if (auto n = dyn_cast<RmsNormGradOp>(op))
    return defineAll(op, "rmsNormGrad(" + ref(n.getInput()) + ", " + optionalRef(n.getScale()) + ", " +
                             ref(n.getResultGrad()) + ", " + std::to_string(int64_t(n.getAxis())) + ", " +
                             floatLiteral(n.getEpsilon().convertToDouble()) + ", " +
                             std::to_string(op->getNumResults()) + ")");
  if (auto g = dyn_cast<dist::GridLinearGradOp>(op))
    return defineAll(op, "summaLinearGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", collectives, " +
                             quoted(g.getRowAxis()) + ", " + quoted(g.getColumnAxis()) + ", " +
                             (g.getTransposeWeight() ? "true" : "false") + ")");
  if (auto a = dyn_cast<AttentionGradOp>(op)) {
    if (std::optional<StringRef> axis = a.getRingAxis())
      return defineAll(op, "ringAttentionGrad(" + ref(a.getQuery()) + ", " + ref(a.getKey()) + ", " +
                               ref(a.getValue()) + ", " + optionalRef(a.getMask()) + ", " + ref(a.getResultGrad()) +
                               ", " + floatLiteral(a.getScale().convertToDouble()) + ", " +
                               (a.getCausal() ? "true" : "false") + ", collectives, " + quoted(*axis) +
                               attentionDropoutOf(a) + ")");
    return defineAll(op, "attentionGrad(" + ref(a.getQuery()) + ", " + ref(a.getKey()) + ", " + ref(a.getValue()) +
                             ", " + optionalRef(a.getMask()) + ", " + ref(a.getResultGrad()) + ", " +
                             floatLiteral(a.getScale().convertToDouble()) + ", " + (a.getCausal() ? "true" : "false") +
                             attentionDropoutOf(a) + ")");
  }
  if (auto c = dyn_cast<CrossEntropyGradOp>(op)) {
    if (std::optional<StringRef> axis = c.getTokenAxis())
      return one("tokenSplitCrossEntropyGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " +
                 ignoreLiteral(c.getIgnoreIndex()) + ", " + quoted(c.getReduction()) + ", collectives, " +
                 quoted(*axis) + vocabularyAxisOf(c) + ")");
    if (std::optional<StringRef> axis = c.getMeshAxis())
      return one("vocabularyParallelCrossEntropyGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " +
                 ignoreLiteral(c.getIgnoreIndex()) + ", " + quoted(c.getReduction()) + ", collectives, " +
                 quoted(*axis) + ", " + std::to_string(c.getClasses() ? int64_t(*c.getClasses()) : int64_t(-1)) + ")");
    return one("crossEntropyGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + ignoreLiteral(c.getIgnoreIndex()) +
               ", " + quoted(c.getReduction()) + ")");
  }
  if (auto n = dyn_cast<NllLossGradOp>(op))
    return one("nllLossGrad(" + out() + ", " + ref(n.getLabels()) + ", " + optionalRef(n.getWeights()) + ", " +
               ref(n.getLossGrad()) + ", " + ignoreLiteral(n.getIgnoreIndex()) + ", " + quoted(n.getReduction()) + ")");
  if (auto g = dyn_cast<GatherGradOp>(op)) {
    if (std::optional<StringRef> axis = g.getMeshAxis())
      return one("gatherFromSliceGrad(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " +
                 sliceOf(*axis) + ", " + out() + ")");
    return one("gatherGrad(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " + out() + ")");
  }
  if (auto s = dyn_cast<SliceGradOp>(op))
    return one("sliceGrad(" + in(0) + ", " + shapeLiteral(s.getStarts()) + ", " + shapeLiteral(s.getSteps()) + ", " +
               out() + ")");
  if (auto c = dyn_cast<ConvGradOp>(op))
    return defineAll(op, "convGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + shapeLiteral(c.getStrides()) +
                             ", " + shapeLiteral(c.getPads()) + ", " + shapeLiteral(c.getDilations()) + ", " +
                             std::to_string(int64_t(c.getGroup())) + ")");
  return op->emitError() << "has no host lowering yet (the interpreter runs it; emitted programs cannot)";
}

LogicalResult StepEmitter::emitStep(const std::map<std::string, size_t> &parameterIndex,
                                    const std::vector<std::string> &trainableOrder) {
  Block &body = step_.getBody().front();
  os_ << "void trainStep(const std::vector<HostTensor> &inputs, colossal::rt::StepParameters &parameters,\n"
         "               const colossal::rt::StepRandomness &random, float lossScale, HostTensor &loss,\n"
         "               std::vector<HostTensor> &gradients, colossal::rt::GradientReady &gradientReady,\n"
      << (device_ ? "               colossal::rt::StepCollectives &stepCollectives) {\n"
                    // The split ops on device tensors (DeviceCollectives.h).
                    "  colossal::rt::device::Collectives collectives(stepCollectives);\n"
                  : "               colossal::rt::StepCollectives &collectives) {\n");
  // Each value is freed after the statement of its last use: the step's
  // memory is its live values, not all of them.
  os_ << "  colossal::rt::StepMemory memory(colossal::rt::MemorySpace::" << (device_ ? "Device" : "Host") << ");\n";
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse_[operand] = &op;
  for (BlockArgument arg : body.getArguments()) {
    std::string name = "v" + std::to_string(counter_++);
    names_[arg] = name;
    auto inputName = step_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name");
    if (inputName && inputName.getValue() == "loss_scale") {
      // The loss gradient's seed: the trainer's current loss scale.
      os_ << "  Tensor " << name << " = " << (device_ ? "upload(" : "") << "HostTensor::ofFloats(Shape{}, {lossScale})"
          << (device_ ? ")" : "") << "; // loss_scale\n";
      hold(arg, name);
      continue;
    }
    os_ << (device_ ? "  Tensor " : "  const Tensor &") << name << " = " << (device_ ? "upload(inputs[" : "inputs[")
        << arg.getArgNumber() << (device_ ? "])" : "]") << "; // "
        << (inputName ? inputName.getValue() : StringRef("input")) << "\n";
    // On the device an input is a copy the step owns.
    if (device_)
      hold(arg, name);
  }
  // Each trainable gradient is reported as soon as it is computed, so the
  // trainer can reduce it while the backward pass goes on (host target; a
  // device gradient is downloaded with the rest at the end).
  Operation *terminator = body.getTerminator();
  std::map<std::string, Value> gradientByName;
  for (unsigned r = 1; r < step_.getNumResults(); ++r)
    if (auto name = step_.getResultAttrOfType<StringAttr>(r, "train.name"))
      gradientByName[name.getValue().str()] = terminator->getOperand(r);
  struct Report {
    size_t index;
    StringRef name;
    Value gradient;
  };
  llvm::DenseMap<Operation *, std::vector<Report>> reportsAfter;
  // Reported gradients freed at once: their places in the list stay empty.
  llvm::DenseSet<Value> taken;
  for (auto [index, name] : llvm::enumerate(trainableOrder))
    if (auto it = gradientByName.find("grad:" + name); it != gradientByName.end() && !device_)
      if (Operation *definer = it->second.getDefiningOp())
        reportsAfter[definer].push_back({index, name, it->second});
  for (Operation &op : body.without_terminator()) {
    if (failed(emitOp(&op, parameterIndex)))
      return failure();
    if (auto it = reportsAfter.find(&op); it != reportsAfter.end()) {
      for (const Report &report : it->second)
        os_ << "  gradientReady(" << report.index << ", " << ref(report.gradient) << "); // @" << report.name << "\n";
      // The trainer has taken them: a gradient only returned is freed now,
      // not held to the end of the step.
      llvm::SmallPtrSet<Value, 4> freed;
      for (const Report &report : it->second) {
        Value g = report.gradient;
        if (owned_.contains(g) && g != terminator->getOperand(0) && freed.insert(g).second &&
            llvm::all_of(g.getUsers(), [&](Operation *user) { return user == terminator; })) {
          free(g);
          taken.insert(g);
        }
      }
    }
    freeAfterLastUse(&op);
  }
  auto toHost = [&](Value v) { return device_ ? "download(" + ref(v) + ")" : ref(v); };
  os_ << "  loss = " << toHost(terminator->getOperand(0)) << ";\n";
  os_ << "  gradients.clear();\n";
  for (const std::string &name : trainableOrder) {
    auto it = gradientByName.find("grad:" + name);
    if (it == gradientByName.end())
      return step_.emitError() << "@forward_backward returns no gradient for trainable parameter @" << name;
    if (taken.contains(it->second))
      os_ << "  gradients.emplace_back(); // @" << name << ", taken when reported\n";
    else
      os_ << "  gradients.push_back(" << toHost(it->second) << "); // @" << name << "\n";
  }
  // Parameter reads the step returns as they are: released once copied.
  llvm::SmallPtrSet<Value, 4> returned;
  for (Value v : terminator->getOperands())
    if (fetched_.count(v) && returned.insert(v).second)
      release(v);
  os_ << "}\n";
  return success();
}

LogicalResult StepEmitter::emitStage(const std::string &function, const std::map<std::string, size_t> &inputIndex,
                                     const std::map<std::string, size_t> &parameterIndex,
                                     const std::map<std::string, size_t> &trainableIndex) {
  Block &body = step_.getBody().front();
  // On the device a stage takes its arguments from the trainer as host
  // tensors and uploads them, and downloads what it returns and reports.
  os_ << "void " << function << "(colossal::rt::StageCall &call) {\n"
      << "  colossal::rt::StepParameters &parameters = call.parameters;\n"
      << "  const colossal::rt::StepRandomness &random = call.random;\n"
      << "  colossal::rt::GradientReady &gradientReady = call.gradientReady;\n"
      << (device_ ? "  colossal::rt::device::Collectives collectives(call.collectives);\n"
                  : "  colossal::rt::StepCollectives &collectives = call.collectives;\n")
      << "  (void)parameters, (void)random, (void)gradientReady, (void)collectives;\n"
      << "  colossal::rt::StepMemory memory(colossal::rt::MemorySpace::" << (device_ ? "Device" : "Host") << ");\n";
  auto upload = [&](const std::string &host) { return device_ ? "upload(" + host + ")" : host; };
  auto toHost = [&](Value v) { return device_ ? "download(" + ref(v) + ")" : ref(v); };
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse_[operand] = &op;
  int64_t taken = 0;
  for (BlockArgument arg : body.getArguments()) {
    std::string name = "v" + std::to_string(counter_++);
    names_[arg] = name;
    auto label = step_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name");
    StringRef argName = label ? label.getValue() : StringRef("input");
    if (argName == "loss_scale") {
      os_ << "  Tensor " << name << " = " << upload("HostTensor::ofFloats(Shape{}, {call.lossScale})")
          << "; // loss_scale\n";
      hold(arg, name);
    } else if (auto it = inputIndex.find(argName.str()); it != inputIndex.end()) {
      os_ << (device_ ? "  Tensor " : "  const Tensor &") << name << " = "
          << upload("call.inputs[" + std::to_string(it->second) + "]") << "; // " << argName << "\n";
      if (device_)
        hold(arg, name);
    } else {
      std::string argument = "call.arguments[" + std::to_string(taken++) + "]";
      os_ << "  Tensor " << name << " = " << (device_ ? upload(argument) : "std::move(" + argument + ")") << "; // "
          << argName << "\n";
      if (device_)
        os_ << "  " << argument << " = HostTensor();\n";
      hold(arg, name);
    }
  }
  Operation *terminator = body.getTerminator();
  llvm::DenseMap<Operation *, std::vector<std::pair<size_t, Value>>> reportsAfter;
  llvm::DenseSet<Value> reported;
  for (unsigned r = 0; r < step_.getNumResults(); ++r) {
    auto label = step_.getResultAttrOfType<StringAttr>(r, "train.name");
    if (!label || !label.getValue().starts_with("grad:"))
      continue;
    auto it = trainableIndex.find(label.getValue().drop_front(5).str());
    if (it == trainableIndex.end())
      return step_.emitError() << "returns " << label << ", which is no trainable parameter's";
    Value g = terminator->getOperand(r);
    Operation *definer = g.getDefiningOp();
    if (!definer)
      return step_.emitError() << "returns an argument as " << label;
    reportsAfter[definer].push_back({it->second, g});
    reported.insert(g);
  }
  for (Operation &op : body.without_terminator()) {
    if (failed(emitOp(&op, parameterIndex)))
      return failure();
    if (auto it = reportsAfter.find(&op); it != reportsAfter.end())
      for (auto [index, g] : it->second) {
        os_ << "  gradientReady(" << index << ", " << toHost(g) << ");\n";
        if (owned_.contains(g) && llvm::all_of(g.getUsers(), [&](Operation *user) { return user == terminator; })) {
          free(g);
          owned_.erase(g);
        }
      }
    freeAfterLastUse(&op);
  }
  os_ << "  call.results.resize(" << step_.getNumResults() << ");\n";
  for (unsigned r = 0; r < step_.getNumResults(); ++r) {
    Value v = terminator->getOperand(r);
    if (reported.contains(v))
      continue;
    bool lastReturn =
        llvm::none_of(llvm::drop_begin(terminator->getOperands(), r + 1), [&](Value later) { return later == v; });
    // A value of the function's own leaves it (the trainer holds it now).
    bool move = owned_.contains(v) && lastReturn && !device_;
    os_ << "  call.results[" << r << "] = " << (move ? "std::move(" + ref(v) + ")" : toHost(v)) << ";\n";
  }
  llvm::SmallPtrSet<Value, 4> returned;
  for (Value v : terminator->getOperands())
    if (fetched_.count(v) && returned.insert(v).second)
      release(v);
  os_ << "}\n\n";
  return success();
}

} // namespace colossal::codegen
