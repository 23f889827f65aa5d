//===- GradientRules.cpp - one gradient rule per train op -----------------===//
//
// Each rule reads the op's operands and the gradients of its results and
// builds the operand gradients out of train ops (forward ops where they
// suffice, the *_grad ops where a fused backward kernel exists). Broadcast
// operands get their gradient summed back to their own shape.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Dialect/Dist/Layout.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <numeric>

namespace colossal::autodiff {

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

RankedTensorType withShape(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

struct Builder {
  OpBuilder &b;
  Location loc;

  Value reshape(Value v, RankedTensorType to) {
    if (typeOf(v) == to)
      return v;
    return ReshapeOp::create(b, loc, to, v);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, typeOf(x), x, y); }
  Value sub(Value x, Value y, RankedTensorType type) { return SubOp::create(b, loc, type, x, y); }
  Value mul(Value x, Value y, RankedTensorType type) { return MulOp::create(b, loc, type, x, y); }
  Value div(Value x, Value y, RankedTensorType type) { return DivOp::create(b, loc, type, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, typeOf(x), x); }
  Value constant(RankedTensorType type, double value) {
    Type e = type.getElementType();
    auto scalarType = RankedTensorType::get({}, e);
    Attribute attr = isa<FloatType>(e) ? Attribute(DenseElementsAttr::get(scalarType, b.getFloatAttr(e, value)))
                                       : Attribute(DenseElementsAttr::get(scalarType, b.getIntegerAttr(e, int64_t(value))));
    return ConstantOp::create(b, loc, cast<ElementsAttr>(attr));
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    RankedTensorType t = typeOf(v);
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(t.getDimSize(p));
    return TransposeOp::create(b, loc, withShape(t, shape), v, b.getDenseI64ArrayAttr(perm));
  }
  Value swapLast2(Value v) {
    int64_t rank = typeOf(v).getRank();
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return transpose(v, perm);
  }
  Value matmul(Value x, Value y, RankedTensorType type) { return MatMulOp::create(b, loc, type, x, y); }
  Value reduceSum(Value v, ArrayRef<int64_t> axes) {
    RankedTensorType t = typeOf(v);
    SmallVector<int64_t> shape(t.getShape());
    for (int64_t a : axes)
      shape[a] = 1;
    return ReduceSumOp::create(b, loc, withShape(t, shape), v, b.getDenseI64ArrayAttr(axes), b.getBoolAttr(true));
  }
  /// Sums a gradient of a broadcast result back to the operand's type.
  Value unbroadcast(Value grad, RankedTensorType target) {
    RankedTensorType t = typeOf(grad);
    if (t.getShape() == target.getShape())
      return grad;
    int64_t rank = t.getRank(), offset = rank - target.getRank();
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < rank; ++d)
      if (d < offset || (target.getDimSize(d - offset) == 1 && t.getDimSize(d) != 1))
        axes.push_back(d);
    Value summed = axes.empty() ? grad : reduceSum(grad, axes);
    return reshape(summed, withShape(t, target.getShape()));
  }
};

/// The shape a reduction over `axes` keeps (reduced dimensions become 1;
/// no axes reduces everything).
SmallVector<int64_t> keptShape(RankedTensorType in, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t a : axes)
    kept[a < 0 ? a + in.getRank() : a] = 1;
  if (axes.empty())
    kept.assign(in.getRank(), 1);
  return kept;
}

/// Gradients of `einsum`'s operand `which`: the einsum of the other
/// operands and the result gradient, into the operand's subscripts.
LogicalResult einsumGrad(EinsumOp op, Value grad, SmallVectorImpl<Value> &out, Builder &h) {
  std::string equation = op.getEquation().str();
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  size_t arrow = equation.find("->");
  if (arrow == std::string::npos || equation.find('.') != std::string::npos)
    return op.emitError("autodiff: einsum needs an explicit output and no ellipsis: ") << equation;
  std::string lhs = equation.substr(0, arrow), rhs = equation.substr(arrow + 2);
  SmallVector<std::string> terms;
  size_t start = 0;
  for (size_t comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1)
    terms.push_back(lhs.substr(start, comma - start));
  terms.push_back(lhs.substr(start));
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string inputs;
    SmallVector<Value> operands;
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != i) {
        inputs += terms[j] + ",";
        operands.push_back(op.getInputs()[j]);
      }
    // Every subscript of operand i must appear among the others or the output.
    for (char c : terms[i])
      if ((inputs + rhs).find(c) == std::string::npos)
        return op.emitError("autodiff: einsum subscript '") << c << "' of operand " << i
                                                            << " is summed away; no gradient rule for it";
    inputs += rhs;
    operands.push_back(grad);
    out[i] = EinsumOp::create(h.b, h.loc, op.getInputs()[i].getType(), operands,
                              h.b.getStringAttr(inputs + "->" + terms[i]));
  }
  return success();
}

/// One op's gradient rules, by family: what every rule reads (the op, its
/// results' gradients, the first as `dy`, where the operands' gradients go,
/// the builders) and one method per family, which sets `handled` when it
/// has the op's rule.
struct GradientRuleSet {
  Operation *op;
  ArrayRef<Value> resultGrads;
  Value dy;
  SmallVectorImpl<Value> &out;
  Builder &h;
  OpBuilder &builder;

  RankedTensorType operandType(unsigned i) const { return typeOf(op->getOperand(i)); }

  LogicalResult elementwiseRules(bool &handled);
  LogicalResult layoutRules(bool &handled);
  LogicalResult contractionRules(bool &handled);
  LogicalResult networkRules(bool &handled);
};

/// Elementwise arithmetic and activations: each operand's gradient, unbroadcast to its shape.
LogicalResult GradientRuleSet::elementwiseRules(bool &handled) {
  handled = true;
  if (isa<AddOp>(op)) {
    out[0] = h.unbroadcast(dy, operandType(0));
    out[1] = h.unbroadcast(dy, operandType(1));
    return success();
  }
  if (isa<SubOp>(op)) {
    out[0] = h.unbroadcast(dy, operandType(0));
    out[1] = h.unbroadcast(h.neg(dy), operandType(1));
    return success();
  }
  if (isa<MulOp>(op)) {
    RankedTensorType t = typeOf(dy);
    out[0] = h.unbroadcast(h.mul(dy, op->getOperand(1), t), operandType(0));
    out[1] = h.unbroadcast(h.mul(dy, op->getOperand(0), t), operandType(1));
    return success();
  }
  if (isa<DivOp>(op)) {
    RankedTensorType t = typeOf(dy);
    Value y = op->getOperand(1);
    out[0] = h.unbroadcast(h.div(dy, y, t), operandType(0));
    // d(x / y)/dy = -x / y^2 = -(x / y) / y.
    Value quotient = op->getResult(0);
    out[1] = h.unbroadcast(h.neg(h.div(h.mul(dy, quotient, t), y, t)), operandType(1));
    return success();
  }
  if (isa<NegOp>(op)) {
    out[0] = h.neg(dy);
    return success();
  }
  // A resharding's gradient moves back between the dual layouts (sums and
  // copies swapped; Layout.h): the general form of the pairs below.
  if (auto g = dyn_cast<GeluOp>(op)) {
    out[0] = GeluGradOp::create(builder, op->getLoc(), operandType(0), g.getInput(), dy, g.getApproximateAttr());
    return success();
  }
  if (auto s = dyn_cast<SiluOp>(op)) {
    out[0] = SiluGradOp::create(builder, op->getLoc(), operandType(0), s.getInput(), dy);
    return success();
  }
  if (isa<SinOp>(op)) {
    Value c = CosOp::create(builder, op->getLoc(), operandType(0), op->getOperand(0));
    out[0] = h.mul(dy, c, typeOf(dy));
    return success();
  }
  if (isa<CosOp>(op)) {
    Value s = SinOp::create(builder, op->getLoc(), operandType(0), op->getOperand(0));
    out[0] = h.neg(h.mul(dy, s, typeOf(dy)));
    return success();
  }
  if (isa<ExpOp>(op)) {
    out[0] = h.mul(dy, op->getResult(0), typeOf(dy));
    return success();
  }
  if (isa<TanhOp>(op)) {
    // dy (1 - tanh^2)
    Value y = op->getResult(0);
    Value one = h.constant(typeOf(y), 1.0);
    out[0] = h.mul(dy, h.sub(one, h.mul(y, y, typeOf(y)), typeOf(y)), typeOf(dy));
    return success();
  }
  if (isa<ReluOp>(op)) {
    Value x = op->getOperand(0);
    auto boolType = RankedTensorType::get(typeOf(x).getShape(), builder.getI1Type());
    Value positive = GreaterOp::create(builder, op->getLoc(), boolType, x, h.constant(typeOf(x), 0.0));
    out[0] = WhereOp::create(builder, op->getLoc(), typeOf(dy), positive, dy, h.constant(typeOf(dy), 0.0));
    return success();
  }
  if (isa<WhereOp>(op)) {
    RankedTensorType t = typeOf(dy);
    Value cond = op->getOperand(0), zero = h.constant(t, 0.0);
    out[1] = h.unbroadcast(WhereOp::create(builder, op->getLoc(), t, cond, dy, zero), operandType(1));
    out[2] = h.unbroadcast(WhereOp::create(builder, op->getLoc(), t, cond, zero, dy), operandType(2));
    return success();
  }
  if (isa<MaxOp, MinOp>(op)) {
    // The larger (smaller) operand takes the gradient; ties go to the first.
    RankedTensorType t = typeOf(dy);
    Value a = op->getOperand(0), b = op->getOperand(1), zero = h.constant(t, 0.0);
    auto boolType = RankedTensorType::get(t.getShape(), builder.getI1Type());
    Value secondWins = isa<MaxOp>(op) ? Value(GreaterOp::create(builder, op->getLoc(), boolType, b, a))
                                      : Value(LessOp::create(builder, op->getLoc(), boolType, b, a));
    out[0] = h.unbroadcast(WhereOp::create(builder, op->getLoc(), t, secondWins, zero, dy), operandType(0));
    out[1] = h.unbroadcast(WhereOp::create(builder, op->getLoc(), t, secondWins, dy, zero), operandType(1));
    return success();
  }
  if (isa<PowOp>(op)) {
    // d a^b / da = b a^(b-1); d a^b / db = a^b log a
    RankedTensorType t = typeOf(dy);
    Value a = op->getOperand(0), b = op->getOperand(1), y = op->getResult(0);
    Value bMinusOne = SubOp::create(builder, op->getLoc(), typeOf(b), b, h.constant(typeOf(b), 1.0));
    Value da = h.mul(h.mul(dy, b, t), PowOp::create(builder, op->getLoc(), t, a, bMinusOne), t);
    out[0] = h.unbroadcast(da, operandType(0));
    Value logA = LogOp::create(builder, op->getLoc(), typeOf(a), a);
    out[1] = h.unbroadcast(h.mul(h.mul(dy, y, t), logA, t), operandType(1));
    return success();
  }
  if (isa<SqrtOp>(op)) {
    RankedTensorType t = typeOf(dy);
    out[0] = h.div(h.mul(dy, h.constant(t, 0.5), t), op->getResult(0), t);
    return success();
  }
  if (isa<ReciprocalOp>(op)) {
    RankedTensorType t = typeOf(dy);
    Value y = op->getResult(0);
    out[0] = h.neg(h.mul(dy, h.mul(y, y, t), t));
    return success();
  }
  if (isa<SigmoidOp>(op)) {
    RankedTensorType t = typeOf(dy);
    Value y = op->getResult(0);
    out[0] = h.mul(h.mul(dy, y, t), h.sub(h.constant(t, 1.0), y, t), t);
    return success();
  }
  if (isa<LogOp>(op)) {
    out[0] = h.div(dy, op->getOperand(0), typeOf(dy));
    return success();
  }
  if (isa<AbsOp>(op)) {
    RankedTensorType t = typeOf(dy);
    auto boolType = RankedTensorType::get(t.getShape(), builder.getI1Type());
    Value negative = LessOp::create(builder, op->getLoc(), boolType, op->getOperand(0), h.constant(t, 0.0));
    out[0] = WhereOp::create(builder, op->getLoc(), t, negative, h.neg(dy), dy);
    return success();
  }
  if (isa<ErfOp>(op)) {
    // 2 / sqrt(pi) exp(-x^2)
    RankedTensorType t = typeOf(dy);
    Value x = op->getOperand(0);
    Value e = ExpOp::create(builder, op->getLoc(), t, h.neg(h.mul(x, x, t)));
    out[0] = h.mul(h.mul(dy, e, t), h.constant(t, 1.1283791670955126), t);
    return success();
  }
  handled = false;
  return success();
}

/// Values moved, not computed: reshardings and collectives (their duals), casts, views, slices, concatenations, gathers.
LogicalResult GradientRuleSet::layoutRules(bool &handled) {
  handled = true;
  if (isa<ParamOp, ConstantOp>(op))
    return success();
  if (auto reshard = dyn_cast<ReshardOp>(op)) {
    MLIRContext *context = op->getContext();
    out[0] = ReshardOp::create(builder, op->getLoc(), operandType(0), dy,
                               ShardingAttr::get(context, reshard.getToLayout().dual()),
                               ShardingAttr::get(context, reshard.getFromLayout().dual()), reshard.getMeshAttr());
    return success();
  }
  // Megatron's conjugate pair: the sum's readers are replicated, so its
  // gradient is already whole on every rank; a copy's readers are split,
  // so its gradient is the sum of the ranks' parts.
  if (isa<AllReduceOp>(op)) {
    out[0] = dy;
    return success();
  }
  if (auto copy = dyn_cast<CopyToRanksOp>(op)) {
    out[0] = AllReduceOp::create(builder, op->getLoc(), dy.getType(), dy, copy.getAxisAttr());
    return success();
  }
  // Sequence parallelism's pairs: gathered tokens feed split readers
  // (partial gradients, summed and scattered back); scattered sums and a
  // rank's slice of a replicated value feed token-split readers (each
  // rank's gradient slice, gathered whole).
  if (auto gather = dyn_cast<AllGatherOp>(op)) {
    out[0] = ReduceScatterOp::create(builder, op->getLoc(), operandType(0), dy, gather.getAxisAttr(),
                                     gather.getDimAttr());
    return success();
  }
  if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
    out[0] = AllGatherOp::create(builder, op->getLoc(), operandType(0), dy, scatter.getAxisAttr(),
                                 scatter.getDimAttr());
    return success();
  }
  // All-to-all sequence parallelism trades the tokens' split for the
  // heads'; the gradient trades it back.
  if (auto trade = dyn_cast<AllToAllOp>(op)) {
    out[0] = AllToAllOp::create(builder, op->getLoc(), operandType(0), dy, trade.getAxisAttr(),
                                trade.getConcatDimAttr(), trade.getSplitDimAttr());
    return success();
  }
  if (auto slice = dyn_cast<RankSliceOp>(op)) {
    out[0] = AllGatherOp::create(builder, op->getLoc(), operandType(0), dy, slice.getAxisAttr(), slice.getDimAttr());
    return success();
  }
  if (auto cast = dyn_cast<CastOp>(op)) {
    RankedTensorType from = operandType(0);
    if (!isa<FloatType>(from.getElementType()))
      return success();
    out[0] = CastOp::create(builder, op->getLoc(), from, dy, TypeAttr::get(from.getElementType()));
    return success();
  }
  if (isa<ReshapeOp>(op)) {
    out[0] = h.reshape(dy, operandType(0));
    return success();
  }
  if (isa<BroadcastOp>(op)) {
    out[0] = h.unbroadcast(dy, operandType(0));
    return success();
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> perm = t.getPerm();
    SmallVector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      inverse[size_t(perm[i])] = int64_t(i);
    out[0] = h.transpose(dy, inverse);
    return success();
  }
  if (auto g = dyn_cast<GatherOp>(op)) {
    out[0] = GatherGradOp::create(builder, op->getLoc(), operandType(0), g.getIndices(), dy, g.getAxisAttr(),
                                  g.getMeshAxisAttr());
    return success();
  }
  if (auto s = dyn_cast<SliceOp>(op)) {
    out[0] = SliceGradOp::create(builder, op->getLoc(), operandType(0), dy, s.getStartsAttr(), s.getLimitsAttr(),
                                 s.getStepsAttr());
    return success();
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    int64_t axis = int64_t(c.getAxis()), rank = typeOf(dy).getRank(), offset = 0;
    if (axis < 0)
      axis += rank;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      RankedTensorType t = operandType(i);
      SmallVector<int64_t> starts(rank, 0), limits(typeOf(dy).getShape()), steps(rank, 1);
      starts[axis] = offset;
      limits[axis] = offset + t.getDimSize(axis);
      offset += t.getDimSize(axis);
      out[i] = SliceOp::create(builder, op->getLoc(), t, dy, builder.getDenseI64ArrayAttr(starts),
                               builder.getDenseI64ArrayAttr(limits), builder.getDenseI64ArrayAttr(steps));
    }
    return success();
  }
  if (auto s = dyn_cast<SplitOp>(op)) {
    SmallVector<Value> pieces;
    for (auto [result, grad] : llvm::zip(op->getResults(), resultGrads))
      pieces.push_back(grad ? grad : zerosLike(builder, op->getLoc(), result.getType()));
    out[0] = ConcatOp::create(builder, op->getLoc(), operandType(0), pieces, s.getAxisAttr());
    return success();
  }
  if (auto t = dyn_cast<TriluOp>(op)) {
    out[0] = TriluOp::create(builder, op->getLoc(), typeOf(dy), dy, t.getUpperAttr(), t.getKAttr());
    return success();
  }
  handled = false;
  return success();
}

/// Products: linear layers, matrix products, convolutions, einsum.
LogicalResult GradientRuleSet::contractionRules(bool &handled) {
  handled = true;
  if (auto l = dyn_cast<LinearOp>(op)) {
    // y[..., n] = x[..., k] w[k, n] + b[n]
    Value x = l.getInput(), w = l.getWeight();
    RankedTensorType xt = typeOf(x), wt = typeOf(w), yt = typeOf(dy);
    int64_t k = wt.getDimSize(0), n = wt.getDimSize(1), rows = xt.getNumElements() / k;
    out[0] = h.matmul(dy, h.transpose(w, {1, 0}), xt);
    Value x2 = h.reshape(x, withShape(xt, {rows, k})), dy2 = h.reshape(dy, withShape(yt, {rows, n}));
    out[1] = h.matmul(h.transpose(x2, {1, 0}), dy2, wt);
    if (l.getBias()) {
      Value summed = h.reduceSum(dy2, {0});
      out[2] = h.reshape(summed, typeOf(l.getBias()));
    }
    return success();
  }
  if (auto g = dyn_cast<dist::GridLinearOp>(op)) {
    // SUMMA's backward steps on the same grid.
    auto grad = dist::GridLinearGradOp::create(builder, op->getLoc(), operandType(0), operandType(1), g.getInput(),
                                               g.getWeight(), dy, g.getRowAxisAttr(), g.getColumnAxisAttr(),
                                               g.getTransposeWeightAttr());
    out[0] = grad.getInputGrad();
    out[1] = grad.getWeightGrad();
    return success();
  }
  if (auto m = dyn_cast<MatMulOp>(op)) {
    RankedTensorType at = operandType(0), bt = operandType(1);
    if (at.getRank() < 2 || bt.getRank() < 2)
      return op->emitError("autodiff: matmul with a vector operand has no gradient rule yet");
    // dA = dY B^T, dB = A^T dY, each summed over broadcast batch dimensions.
    RankedTensorType yt = typeOf(dy);
    SmallVector<int64_t> aShape(yt.getShape()), bShape(yt.getShape());
    aShape.back() = at.getShape().back();
    bShape[bShape.size() - 2] = bt.getDimSize(bt.getRank() - 2);
    Value da = h.matmul(dy, h.swapLast2(m.getRhs()), withShape(yt, aShape));
    Value db;
    if (bt.getRank() == 2 && yt.getRank() > 2) {
      int64_t k = bt.getDimSize(0), n = bt.getDimSize(1), rows = yt.getNumElements() / n;
      Value a2 = h.reshape(m.getLhs(), withShape(at, {rows, k})), dy2 = h.reshape(dy, withShape(yt, {rows, n}));
      db = h.matmul(h.transpose(a2, {1, 0}), dy2, bt);
    } else {
      db = h.unbroadcast(h.matmul(h.swapLast2(m.getLhs()), dy, withShape(yt, bShape)), bt);
    }
    out[0] = h.unbroadcast(da, at);
    out[1] = db;
    return success();
  }
  if (auto c = dyn_cast<ConvOp>(op)) {
    auto grad = ConvGradOp::create(builder, op->getLoc(), operandType(0), operandType(1), c.getInput(), c.getWeight(),
                                   dy, c.getStridesAttr(), c.getPadsAttr(), c.getDilationsAttr(), c.getGroupAttr());
    out[0] = grad.getInputGrad();
    out[1] = grad.getWeightGrad();
    if (c.getBias()) {
      // Sum over the batch and every spatial dimension.
      SmallVector<int64_t> axes{0};
      for (int64_t d = 2; d < typeOf(dy).getRank(); ++d)
        axes.push_back(d);
      out[2] = h.reshape(h.reduceSum(dy, axes), typeOf(c.getBias()));
    }
    return success();
  }
  if (auto g = dyn_cast<GemmOp>(op)) {
    // y = alpha op(a) op(b) + beta c
    RankedTensorType at = operandType(0), yt = typeOf(dy);
    double alpha = g.getAlpha().convertToDouble(), beta = g.getBeta().convertToDouble();
    Value scaled = h.mul(dy, h.constant(yt, alpha), yt);
    Value opB = g.getTransB() ? g.getB() : h.transpose(g.getB(), {1, 0});   // op(b)^T
    Value opA = g.getTransA() ? g.getA() : h.transpose(g.getA(), {1, 0});   // op(a)^T
    int64_t m = yt.getDimSize(0), n = yt.getDimSize(1), k = g.getTransA() ? at.getDimSize(0) : at.getDimSize(1);
    Value dOpA = h.matmul(scaled, opB, withShape(yt, {m, k}));
    Value dOpB = h.matmul(opA, scaled, withShape(yt, {k, n}));
    out[0] = g.getTransA() ? h.transpose(dOpA, {1, 0}) : dOpA;
    out[1] = g.getTransB() ? h.transpose(dOpB, {1, 0}) : dOpB;
    if (g.getC())
      out[2] = h.unbroadcast(h.mul(dy, h.constant(yt, beta), yt), typeOf(g.getC()));
    return success();
  }
  if (auto e = dyn_cast<EinsumOp>(op))
    return einsumGrad(e, dy, out, h);
  handled = false;
  return success();
}

/// Normalisation, attention, the loss, dropout, softmax and reductions.
LogicalResult GradientRuleSet::networkRules(bool &handled) {
  handled = true;
  if (auto n = dyn_cast<LayerNormOp>(op)) {
    SmallVector<Type> types{operandType(0)};
    if (n.getScale())
      types.push_back(typeOf(n.getScale()));
    if (n.getBias())
      types.push_back(typeOf(n.getBias()));
    if (n.getBias() && !n.getScale())
      return op->emitError("autodiff: layer_norm with a bias but no scale has no gradient rule");
    auto grad = LayerNormGradOp::create(builder, op->getLoc(), types, n.getInput(), n.getScale(), dy, n.getAxisAttr(),
                                        n.getEpsilonAttr(), builder.getBoolAttr(bool(n.getBias())));
    out[0] = grad->getResult(0);
    if (n.getScale())
      out[1] = grad->getResult(1);
    if (n.getBias())
      out[2] = grad->getResult(2);
    return success();
  }
  if (auto n = dyn_cast<RmsNormOp>(op)) {
    SmallVector<Type> types{operandType(0)};
    if (n.getScale())
      types.push_back(typeOf(n.getScale()));
    auto grad = RmsNormGradOp::create(builder, op->getLoc(), types, n.getInput(), n.getScale(), dy, n.getAxisAttr(),
                                      n.getEpsilonAttr());
    out[0] = grad->getResult(0);
    if (n.getScale())
      out[1] = grad->getResult(1);
    return success();
  }
  if (auto a = dyn_cast<AttentionOp>(op)) {
    auto grad = AttentionGradOp::create(builder, op->getLoc(), typeOf(a.getQuery()), typeOf(a.getKey()),
                                        typeOf(a.getValue()), a.getQuery(), a.getKey(), a.getValue(), a.getMask(), dy,
                                        a.getScaleAttr(), a.getCausalAttr(), a.getRingAxisAttr(), a.getDropoutAttr(),
                                        a.getDropoutSiteAttr(), a.getDropoutAxisAttr());
    out[0] = grad.getQueryGrad();
    out[1] = grad.getKeyGrad();
    out[2] = grad.getValueGrad();
    return success();
  }
  if (auto c = dyn_cast<CrossEntropyOp>(op)) {
    out[0] = CrossEntropyGradOp::create(builder, op->getLoc(), operandType(0), c.getLogits(), c.getLabels(), dy,
                                        c.getReductionAttr(), c.getIgnoreIndexAttr(), c.getMeshAxisAttr(),
                                        c.getClassesAttr(), c.getTokenAxisAttr());
    return success();
  }
  if (auto n = dyn_cast<NegativeLogLikelihoodLossOp>(op)) {
    // The class weights are a buffer, not a parameter (Trainability.cpp).
    out[0] = NllLossGradOp::create(builder, op->getLoc(), operandType(0), n.getLabels(), n.getWeights(), dy,
                                   n.getReductionAttr(), n.getIgnoreIndexAttr());
    return success();
  }
  if (auto d = dyn_cast<DropoutOp>(op)) {
    // dy * mask / (1 - ratio), the mask the forward pass drew.
    RankedTensorType t = typeOf(dy);
    Value mask = CastOp::create(builder, op->getLoc(), t, d.getMask(), TypeAttr::get(t.getElementType()));
    double keep = 1.0 - d.getRatio().convertToDouble();
    out[0] = h.mul(h.mul(dy, mask, t), h.constant(t, 1.0 / keep), t);
    return success();
  }
  if (auto r = dyn_cast<ReduceSumOp>(op)) {
    RankedTensorType in = operandType(0);
    SmallVector<int64_t> kept = keptShape(in, r.getAxes());
    out[0] = BroadcastOp::create(builder, op->getLoc(), in, h.reshape(dy, withShape(typeOf(dy), kept)));
    return success();
  }
  if (auto r = dyn_cast<ReduceMeanOp>(op)) {
    RankedTensorType in = operandType(0);
    SmallVector<int64_t> kept = keptShape(in, r.getAxes());
    double count = double(in.getNumElements()) / double(withShape(in, kept).getNumElements());
    Value spread = BroadcastOp::create(builder, op->getLoc(), in, h.reshape(dy, withShape(typeOf(dy), kept)));
    out[0] = h.mul(spread, h.constant(in, 1.0 / count), in);
    return success();
  }
  if (auto s = dyn_cast<SoftmaxOp>(op)) {
    // dx = y (dy - sum(dy y, axis))
    Value y = op->getResult(0);
    RankedTensorType t = typeOf(y);
    int64_t axis = int64_t(s.getAxis());
    if (axis < 0)
      axis += t.getRank();
    Value dot = h.reduceSum(h.mul(dy, y, t), {axis});
    out[0] = h.mul(y, h.sub(dy, dot, t), t);
    return success();
  }
  if (auto s = dyn_cast<LogSoftmaxOp>(op)) {
    // dx = dy - exp(y) sum(dy, axis)
    Value y = op->getResult(0);
    RankedTensorType t = typeOf(y);
    int64_t axis = int64_t(s.getAxis());
    if (axis < 0)
      axis += t.getRank();
    Value total = h.reduceSum(dy, {axis});
    Value p = ExpOp::create(builder, op->getLoc(), t, y);
    out[0] = h.sub(dy, h.mul(p, total, t), t);
    return success();
  }
  if (auto r = dyn_cast<ReduceMaxOp>(op)) {
    // The elements equal to the maximum take the gradient (every one of them
    // on ties).
    RankedTensorType in = operandType(0);
    SmallVector<int64_t> kept = keptShape(in, r.getAxes());
    Value y = h.reshape(op->getResult(0), withShape(typeOf(op->getResult(0)), kept));
    Value g = h.reshape(dy, withShape(typeOf(dy), kept));
    auto boolType = RankedTensorType::get(in.getShape(), builder.getI1Type());
    Value isMax = EqualOp::create(builder, op->getLoc(), boolType, op->getOperand(0), y);
    Value spread = BroadcastOp::create(builder, op->getLoc(), in, g);
    out[0] = WhereOp::create(builder, op->getLoc(), in, isMax, spread, h.constant(in, 0.0));
    return success();
  }
  handled = false;
  return success();
}

} // namespace

Value zerosLike(OpBuilder &builder, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  Type e = t.getElementType();
  Attribute zero = isa<FloatType>(e) ? Attribute(builder.getFloatAttr(e, 0.0)) : builder.getIntegerAttr(e, 0);
  return ConstantOp::create(builder, loc, cast<ElementsAttr>(DenseElementsAttr::get(t, zero)));
}

LogicalResult gradientOf(Operation *op, ArrayRef<Value> resultGrads, SmallVectorImpl<Value> &out,
                         OpBuilder &builder) {
  Builder h{builder, op->getLoc()};
  out.assign(op->getNumOperands(), Value());
  Value dy = resultGrads.empty() ? Value() : resultGrads[0];
  GradientRuleSet rules{op, resultGrads, dy, out, h, builder};
  for (auto family : {&GradientRuleSet::elementwiseRules, &GradientRuleSet::layoutRules,
                      &GradientRuleSet::contractionRules, &GradientRuleSet::networkRules}) {
    bool handled = false;
    LogicalResult result = (rules.*family)(handled);
    if (handled)
      return result;
  }
  return op->emitError("autodiff: no gradient rule for ") << op->getName();
}

} // namespace colossal::autodiff
