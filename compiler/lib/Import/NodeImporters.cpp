//===- NodeImporters.cpp - one translation per ONNX op type ------*- C++ -*-===//
//
// Each importer reads its node's inputs and attributes (ONNX semantics, opsets
// 13 to 17), folds the result on the host when every input is a constant
// (shape arithmetic), and otherwise creates the train op. Ops that only
// rearrange shapes (Flatten, Squeeze, Unsqueeze) become train.reshape;
// Identity forwards its input; Shape, Range and ConstantOfShape are constants
// once shapes are bound.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>
#include <set>

using namespace mlir;

namespace colossal::import {
namespace {

/// "[2, 8, 16]"; a hostile file's thousand-entry shape is cut short.
std::string shapeString(ArrayRef<int64_t> shape) {
  constexpr size_t kShown = 8;
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape.take_front(kShown)))
    s += (i ? ", " : "") + std::to_string(d);
  if (shape.size() > kShown)
    s += ", ... (" + std::to_string(shape.size()) + " entries)";
  return s + "]";
}

/// The shape of input i without materialising a constant.
std::optional<std::vector<int64_t>> inputShape(NodeContext &ctx, int i) {
  if (const HostTensor *c = ctx.constantInput(i))
    return c->shape;
  RankedTensorType type = ctx.inputType(i);
  if (!type)
    return std::nullopt;
  return std::vector<int64_t>(type.getShape().begin(), type.getShape().end());
}

std::optional<ElementKind> inputKind(NodeContext &ctx, int i) {
  if (const HostTensor *c = ctx.constantInput(i))
    return c->kind;
  RankedTensorType type = ctx.inputType(i);
  if (!type)
    return std::nullopt;
  return elementKindOf(type.getElementType());
}

bool allConstant(NodeContext &ctx) {
  for (int i = 0; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i) && !ctx.constantInput(i))
      return false;
  return true;
}

LogicalResult produce(NodeContext &ctx, Operation *op) {
  if (!op)
    return failure();
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    ctx.setOutput(i, op->getResult(i));
  return success();
}

LogicalResult produceFolded(NodeContext &ctx, Folded<HostTensor> folded) {
  if (!folded.value)
    return ctx.fail(folded.error);
  ctx.setOutputConstant(0, std::move(*folded.value));
  return success();
}

NamedAttribute named(NodeContext &ctx, StringRef name, Attribute value) {
  return ctx.builder().getNamedAttr(name, value);
}
NamedAttribute i64(NodeContext &ctx, StringRef name, int64_t value) {
  return named(ctx, name, ctx.builder().getI64IntegerAttr(value));
}
NamedAttribute f32(NodeContext &ctx, StringRef name, float value) {
  return named(ctx, name, ctx.builder().getF32FloatAttr(value));
}
NamedAttribute i64s(NodeContext &ctx, StringRef name, ArrayRef<int64_t> values) {
  return named(ctx, name, ctx.builder().getDenseI64ArrayAttr(values));
}
NamedAttribute segments(NodeContext &ctx, ArrayRef<int32_t> sizes) {
  return named(ctx, "operandSegmentSizes", ctx.builder().getDenseI32ArrayAttr(sizes));
}

/// Normalises axes against `rank`, failing on out-of-range or repeated ones.
FailureOr<std::vector<int64_t>> normalizeAxes(NodeContext &ctx, const std::vector<int64_t> &axes,
                                              int64_t rank) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t axis : axes) {
    int64_t a = train::normalizeAxis(axis, rank);
    if (a < 0)
      return ctx.fail(llvm::formatv("axis {0} is out of range for rank {1}", axis, rank));
    if (!seen.insert(a).second)
      return ctx.fail(llvm::formatv("axis {0} appears twice", axis));
    out.push_back(a);
  }
  return out;
}

std::vector<int64_t> intsOf(const HostTensor &t) {
  std::vector<int64_t> v(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    v[i] = t.asInt(i);
  return v;
}

/// Emits a reshape of input 0 to `shape`, folding constants.
LogicalResult reshapeTo(NodeContext &ctx, const std::vector<int64_t> &shape) {
  if (const HostTensor *c = ctx.constantInput(0)) {
    if (numElementsOf(shape) != c->numElements())
      return ctx.fail("cannot reshape " + shapeString(c->shape) + " into " + shapeString(shape));
    ctx.setOutputConstant(0, foldReshape(*c, shape));
    return success();
  }
  RankedTensorType type = ctx.inputType(0);
  if (!type)
    return failure();
  if (numElementsOf(shape) != type.getNumElements())
    return ctx.fail("cannot reshape " + shapeString(type.getShape()) + " into " +
                    shapeString(shape));
  if (type.getShape() == ArrayRef<int64_t>(shape)) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  return produce(ctx, ctx.createTyped(train::ReshapeOp::getOperationName(), ctx.input(0),
                                      RankedTensorType::get(shape, type.getElementType())));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <BinaryFn fn, typename OpT> LogicalResult importBinary(NodeContext &ctx) {
  const HostTensor *lhs = ctx.constantInput(0), *rhs = ctx.constantInput(1);
  // Constants fold on the host, unless broadcasting them makes a tensor too
  // large to hold as a constant (a causal mask of a long sequence compares
  // two rows of positions into sequence x sequence): that stays an op.
  std::optional<std::vector<int64_t>> folded = lhs && rhs ? broadcastShape(lhs->shape, rhs->shape) : std::nullopt;
  if (lhs && rhs && (!folded || numElementsOf(*folded) <= kMaxFoldedElements))
    return produceFolded(ctx, foldBinary(fn, *lhs, *rhs));
  // Pow may raise a value to an exponent of another type (ONNX allows it);
  // the IR keeps one type, the base's.
  if (fn == BinaryFn::Pow && !rhs) {
    RankedTensorType base = ctx.inputType(0), exponent = ctx.inputType(1);
    if (!base || !exponent)
      return failure();
    Value e = ctx.input(1);
    if (exponent.getElementType() != base.getElementType()) {
      Operation *cast = ctx.create(train::CastOp::getOperationName(), e,
                                   {named(ctx, "to", TypeAttr::get(base.getElementType()))});
      if (!cast)
        return failure();
      e = cast->getResult(0);
    }
    return produce(ctx, ctx.create(OpT::getOperationName(), {ctx.input(0), e}));
  }
  if (fn == BinaryFn::Pow && rhs && !lhs) {
    RankedTensorType base = ctx.inputType(0);
    if (!base)
      return failure();
    HostTensor exponent = foldCast(*rhs, elementKindOf(base.getElementType()));
    auto type = RankedTensorType::get(exponent.shape, base.getElementType());
    Value e = train::ConstantOp::create(ctx.builder(), ctx.loc, denseAttrOf(exponent, type));
    return produce(ctx, ctx.create(OpT::getOperationName(), {ctx.input(0), e}));
  }
  return produce(ctx, ctx.create(OpT::getOperationName(), {ctx.input(0), ctx.input(1)}));
}

/// Max and Min take any number of inputs.
template <BinaryFn fn, typename OpT> LogicalResult importVariadic(NodeContext &ctx) {
  if (allConstant(ctx)) {
    HostTensor acc = *ctx.constantInput(0);
    for (int i = 1; i < ctx.numInputs(); ++i) {
      auto folded = foldBinary(fn, acc, *ctx.constantInput(i));
      if (!folded.value)
        return ctx.fail(folded.error);
      acc = std::move(*folded.value);
    }
    ctx.setOutputConstant(0, std::move(acc));
    return success();
  }
  Value acc = ctx.input(0);
  for (int i = 1; i < ctx.numInputs() && acc; ++i) {
    Operation *op = ctx.create(OpT::getOperationName(), {acc, ctx.input(i)});
    acc = op ? op->getResult(0) : Value();
  }
  if (!acc)
    return failure();
  ctx.setOutput(0, acc);
  return success();
}

template <UnaryFn fn, typename OpT> LogicalResult importUnary(NodeContext &ctx) {
  if (const HostTensor *c = ctx.constantInput(0)) {
    ctx.setOutputConstant(0, foldUnary(fn, *c));
    return success();
  }
  return produce(ctx, ctx.create(OpT::getOperationName(), ctx.input(0)));
}

LogicalResult importWhere(NodeContext &ctx) {
  if (allConstant(ctx))
    return produceFolded(ctx, foldWhere(*ctx.constantInput(0), *ctx.constantInput(1),
                                        *ctx.constantInput(2)));
  return produce(ctx, ctx.create(train::WhereOp::getOperationName(),
                                 {ctx.input(0), ctx.input(1), ctx.input(2)}));
}

LogicalResult importCast(NodeContext &ctx) {
  int64_t to = ctx.attrInt("to", 0);
  Type element = elementTypeOf(ctx.context(), int32_t(to));
  if (!element)
    return ctx.fail(llvm::formatv("cast to unsupported element type {0}", to));
  if (const HostTensor *c = ctx.constantInput(0)) {
    ctx.setOutputConstant(0, foldCast(*c, ElementKind(to)));
    return success();
  }
  RankedTensorType type = ctx.inputType(0);
  if (!type)
    return failure();
  if (type.getElementType() == element) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  return produce(ctx, ctx.create(train::CastOp::getOperationName(), ctx.input(0),
                                 {named(ctx, "to", TypeAttr::get(element))}));
}

LogicalResult importIdentity(NodeContext &ctx) {
  if (const HostTensor *c = ctx.constantInput(0)) {
    ctx.setOutputConstant(0, *c);
    return success();
  }
  Value v = ctx.input(0);
  if (!v)
    return failure();
  ctx.setOutput(0, v);
  return success();
}

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

LogicalResult importConstant(NodeContext &ctx) {
  if (const auto *a = ctx.attr("value")) {
    std::string error;
    auto tensor = readTensor(a->t(), ".", error);
    if (!tensor)
      return ctx.fail("value " + error);
    ctx.setOutputConstant(0, std::move(*tensor));
    return success();
  }
  if (const auto *a = ctx.attr("value_float")) {
    ctx.setOutputConstant(0, HostTensor::ofFloats({}, {a->f()}));
    return success();
  }
  if (const auto *a = ctx.attr("value_floats")) {
    std::vector<double> v(a->floats().begin(), a->floats().end());
    ctx.setOutputConstant(0, HostTensor::ofFloats({int64_t(v.size())}, v));
    return success();
  }
  if (const auto *a = ctx.attr("value_int")) {
    ctx.setOutputConstant(0, HostTensor::ofInts({}, {a->i()}));
    return success();
  }
  if (const auto *a = ctx.attr("value_ints")) {
    std::vector<int64_t> v(a->ints().begin(), a->ints().end());
    ctx.setOutputConstant(0, HostTensor::ofInts({int64_t(v.size())}, v));
    return success();
  }
  return ctx.fail("only tensor, float(s) and int(s) constant values are supported");
}

LogicalResult importShape(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  if (!shape)
    return failure();
  int64_t rank = shape->size();
  int64_t start = ctx.attrInt("start", 0), end = ctx.attrInt("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims(shape->begin() + start, shape->begin() + std::max(start, end));
  ctx.setOutputConstant(0, HostTensor::ofInts({int64_t(dims.size())}, dims));
  return success();
}

LogicalResult importConstantOfShape(NodeContext &ctx) {
  const HostTensor *shapeInput = ctx.requireConstant(0, "the shape");
  if (!shapeInput)
    return failure();
  std::vector<int64_t> shape = intsOf(*shapeInput);
  for (int64_t d : shape)
    if (d < 0)
      return ctx.fail("shape " + shapeString(shape) + " has a negative dimension");
  HostTensor scalar = HostTensor::ofFloats({}, {0.0});
  if (const auto *a = ctx.attr("value")) {
    std::string error;
    auto value = readTensor(a->t(), ".", error);
    if (!value || value->numElements() != 1)
      return ctx.fail("value must be a one-element tensor");
    scalar = *value;
  }
  if (numElementsOf(shape) <= kMaxFoldedElements) {
    ctx.setOutputConstant(0, HostTensor::splat(scalar, shape));
    return success();
  }
  // Too large to fold: a splat attribute costs nothing whatever the size.
  auto type = RankedTensorType::get(shape, elementTypeOf(ctx.context(), int32_t(scalar.kind)));
  auto attr = DenseElementsAttr::get(
      type, denseAttrOf(scalar, RankedTensorType::get({}, type.getElementType()))
                .getSplatValue<Attribute>());
  ctx.setOutput(0, train::ConstantOp::create(ctx.builder(), ctx.loc, attr));
  return success();
}

LogicalResult importRange(NodeContext &ctx) {
  const HostTensor *start = ctx.requireConstant(0, "start"), *limit = ctx.requireConstant(1, "limit"),
                   *delta = ctx.requireConstant(2, "delta");
  if (!start || !limit || !delta)
    return failure();
  return produceFolded(ctx, foldRange(*start, *limit, *delta));
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult importMatMul(NodeContext &ctx) {
  return produce(ctx, ctx.create(train::MatMulOp::getOperationName(), {ctx.input(0), ctx.input(1)}));
}

LogicalResult importGemm(NodeContext &ctx) {
  SmallVector<Value> operands{ctx.input(0), ctx.input(1)};
  bool hasC = ctx.hasInput(2);
  if (hasC)
    operands.push_back(ctx.input(2));
  return produce(ctx, ctx.create(train::GemmOp::getOperationName(), operands,
                                 {named(ctx, "trans_a", ctx.builder().getBoolAttr(ctx.attrInt("transA", 0))),
                                  named(ctx, "trans_b", ctx.builder().getBoolAttr(ctx.attrInt("transB", 0))),
                                  f32(ctx, "alpha", ctx.attrFloat("alpha", 1.0f)),
                                  f32(ctx, "beta", ctx.attrFloat("beta", 1.0f))}));
}

LogicalResult importConv(NodeContext &ctx) {
  RankedTensorType input = ctx.inputType(0), weight = ctx.inputType(1);
  if (!input || !weight)
    return failure();
  int64_t spatial = input.getRank() - 2;
  if (spatial < 1 || weight.getRank() != input.getRank())
    return ctx.fail("input and weight must have the same rank >= 3");
  std::vector<int64_t> kernel(weight.getShape().begin() + 2, weight.getShape().end());
  if (auto declared = ctx.attrInts("kernel_shape"); declared && *declared != kernel)
    return ctx.fail("kernel_shape " + shapeString(*declared) + " differs from the weight's " +
                    shapeString(kernel));
  std::vector<int64_t> strides = ctx.attrInts("strides").value_or(std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> dilations =
      ctx.attrInts("dilations").value_or(std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = ctx.attrInts("pads").value_or(std::vector<int64_t>(2 * spatial, 0));
  if ((int64_t)strides.size() != spatial || (int64_t)dilations.size() != spatial ||
      (int64_t)pads.size() != 2 * spatial)
    return ctx.fail(llvm::formatv("strides, dilations and pads need {0}, {0} and {1} values",
                                  spatial, 2 * spatial));
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < spatial; ++i) {
      if (strides[i] <= 0 || strides[i] > (int64_t(1) << 31) || dilations[i] <= 0 ||
          dilations[i] > (int64_t(1) << 31))
        return ctx.fail("strides and dilations must lie in [1, 2^31]");
      int64_t size = input.getDimSize(2 + i), out = (size + strides[i] - 1) / strides[i];
      int64_t extent = dilations[i] * (kernel[i] - 1) + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + extent - size);
      int64_t small = total / 2, large = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : large;
      pads[i + spatial] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return ctx.fail("auto_pad \"" + autoPad + "\" is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  }
  SmallVector<Value> operands{ctx.input(0), ctx.input(1)};
  bool hasBias = ctx.hasInput(2);
  if (hasBias)
    operands.push_back(ctx.input(2));
  return produce(ctx, ctx.create(train::ConvOp::getOperationName(), operands,
                                 {i64s(ctx, "strides", strides), i64s(ctx, "pads", pads),
                                  i64s(ctx, "dilations", dilations),
                                  i64(ctx, "group", ctx.attrInt("group", 1))}));
}

/// Makes an einsum equation explicit, with ellipses expanded into letters
/// unused elsewhere: "...ij,...jk" becomes "ABij,ABjk->ABik".
FailureOr<std::string> normalizeEinsum(NodeContext &ctx, std::string equation,
                                       ArrayRef<int64_t> ranks) {
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  std::optional<std::string> rhs;
  if (arrow != std::string::npos)
    rhs = equation.substr(arrow + 2);
  SmallVector<std::string> terms;
  for (StringRef t : llvm::split(StringRef(lhs), ','))
    terms.push_back(t.str());
  if (terms.size() != ranks.size())
    return ctx.fail(llvm::formatv("equation \"{0}\" has {1} terms for {2} inputs", equation,
                                  terms.size(), ranks.size()));
  std::set<char> used;
  for (char c : equation)
    if (llvm::isAlpha(c))
      used.insert(c);
  std::string spare;
  for (char c = 'A'; c <= 'Z'; ++c)
    if (!used.count(c))
      spare += c;
  for (char c = 'a'; c <= 'z'; ++c)
    if (!used.count(c))
      spare += c;
  int64_t ellipsisRank = 0;
  for (auto [term, rank] : llvm::zip(terms, ranks)) {
    size_t dots = term.find("...");
    if (dots == std::string::npos)
      continue;
    int64_t k = rank - int64_t(term.size() - 3);
    if (k < 0)
      return ctx.fail("term \"" + term + "\" has more letters than its input's rank");
    ellipsisRank = std::max(ellipsisRank, k);
  }
  if (ellipsisRank > (int64_t)spare.size())
    return ctx.fail("too many ellipsis dimensions");
  std::string ellipsis = spare.substr(0, ellipsisRank);
  for (auto [term, rank] : llvm::zip(terms, ranks)) {
    size_t dots = term.find("...");
    if (dots == std::string::npos)
      continue;
    int64_t k = rank - int64_t(term.size() - 3);
    term.replace(dots, 3, ellipsis.substr(ellipsisRank - k));
  }
  std::string output;
  if (rhs) {
    output = *rhs;
    size_t dots = output.find("...");
    if (dots != std::string::npos)
      output.replace(dots, 3, ellipsis);
  } else {
    // Implicit output: ellipsis dimensions, then letters seen once, sorted.
    std::map<char, int> counts;
    for (const std::string &term : terms)
      for (char c : term)
        if (!ellipsis.empty() && ellipsis.find(c) != std::string::npos)
          continue;
        else
          ++counts[c];
    output = ellipsis;
    for (auto [c, n] : counts)
      if (n == 1)
        output += c;
  }
  return llvm::join(terms, ",") + "->" + output;
}

LogicalResult importEinsum(NodeContext &ctx) {
  SmallVector<Value> operands;
  SmallVector<int64_t> ranks;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    Value v = ctx.input(i);
    if (!v)
      return failure();
    operands.push_back(v);
    ranks.push_back(llvm::cast<RankedTensorType>(v.getType()).getRank());
  }
  FailureOr<std::string> equation = normalizeEinsum(ctx, ctx.attrString("equation", ""), ranks);
  if (failed(equation))
    return failure();
  return produce(ctx, ctx.create(train::EinsumOp::getOperationName(), operands,
                                 {named(ctx, "equation", ctx.builder().getStringAttr(*equation))}));
}

//===----------------------------------------------------------------------===//
// Normalisation and softmax
//===----------------------------------------------------------------------===//

template <typename OpT> LogicalResult importSoftmax(NodeContext &ctx) {
  return produce(ctx, ctx.create(OpT::getOperationName(), ctx.input(0),
                                 {i64(ctx, "axis", ctx.attrInt("axis", -1))}));
}

LogicalResult importLayerNormalization(NodeContext &ctx) {
  RankedTensorType inputType = ctx.inputType(0);
  if (!inputType)
    return failure();
  // A non-negative axis, as raising produces, so both export forms agree.
  int64_t axis = train::normalizeAxis(ctx.attrInt("axis", -1), inputType.getRank());
  if (axis < 0)
    return ctx.fail("axis is out of range for rank " + std::to_string(inputType.getRank()));
  float epsilon = ctx.attrFloat("epsilon", 1e-5f);
  SmallVector<Value> operands{ctx.input(0), ctx.input(1)};
  bool hasBias = ctx.hasInput(2);
  if (hasBias)
    operands.push_back(ctx.input(2));
  if (failed(produce(ctx, ctx.create(train::LayerNormOp::getOperationName(), operands,
                                     {i64(ctx, "axis", axis), f32(ctx, "epsilon", epsilon),
                                      segments(ctx, {1, 1, hasBias ? 1 : 0})}))))
    return failure();
  if (!ctx.hasOutput(1) && !ctx.hasOutput(2))
    return success();
  // The optional Mean and InvStdDev outputs, from primitive ops.
  Value x = ctx.input(0);
  int64_t rank = llvm::cast<RankedTensorType>(x.getType()).getRank();
  int64_t first = train::normalizeAxis(axis, rank);
  std::vector<int64_t> axes;
  for (int64_t d = first; d < rank; ++d)
    axes.push_back(d);
  auto reduceMean = [&](Value v) -> Value {
    Operation *op = ctx.create(train::ReduceMeanOp::getOperationName(), v,
                               {i64s(ctx, "axes", axes),
                                named(ctx, "keepdims", ctx.builder().getBoolAttr(true))});
    return op ? op->getResult(0) : Value();
  };
  Value mean = reduceMean(x);
  if (!mean)
    return failure();
  Operation *centered = ctx.create(train::SubOp::getOperationName(), {x, mean});
  if (!centered)
    return failure();
  Value c = centered->getResult(0);
  Value variance = reduceMean(ctx.create(train::MulOp::getOperationName(), {c, c})->getResult(0));
  auto scalarType = RankedTensorType::get({}, llvm::cast<RankedTensorType>(x.getType()).getElementType());
  Value eps = train::ConstantOp::create(ctx.builder(), 
      ctx.loc, DenseElementsAttr::get(scalarType, ctx.builder().getFloatAttr(scalarType.getElementType(), epsilon)));
  Value shifted = ctx.create(train::AddOp::getOperationName(), {variance, eps})->getResult(0);
  Value root = ctx.create(train::SqrtOp::getOperationName(), shifted)->getResult(0);
  Value invStdDev = ctx.create(train::ReciprocalOp::getOperationName(), root)->getResult(0);
  ctx.setOutput(1, mean);
  ctx.setOutput(2, invStdDev);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename OpT> LogicalResult importReduce(NodeContext &ctx) {
  std::vector<int64_t> axes;
  bool axesAsInput = std::is_same_v<OpT, train::ReduceSumOp> && ctx.opset() >= 13;
  if (axesAsInput && ctx.hasInput(1)) {
    const HostTensor *c = ctx.requireConstant(1, "axes");
    if (!c)
      return failure();
    axes = intsOf(*c);
  } else if (auto attr = ctx.attrInts("axes")) {
    axes = *attr;
  }
  RankedTensorType type = ctx.inputType(0);
  if (!type)
    return failure();
  if (axes.empty() && ctx.attrInt("noop_with_empty_axes", 0)) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  auto normalized = normalizeAxes(ctx, axes, type.getRank());
  if (failed(normalized))
    return failure();
  return produce(ctx, ctx.create(OpT::getOperationName(), ctx.input(0),
                                 {i64s(ctx, "axes", *normalized),
                                  named(ctx, "keepdims",
                                        ctx.builder().getBoolAttr(ctx.attrInt("keepdims", 1)))}));
}

//===----------------------------------------------------------------------===//
// Randomness and losses
//===----------------------------------------------------------------------===//

LogicalResult importDropout(NodeContext &ctx) {
  double ratio = 0.5;
  if (ctx.hasInput(1)) {
    const HostTensor *c = ctx.requireConstant(1, "ratio");
    if (!c)
      return failure();
    if (c->numElements() != 1)
      return ctx.fail(llvm::formatv("ratio has {0} elements; it is a scalar", c->numElements()));
    ratio = c->asDouble(0);
  }
  bool training = false;
  if (ctx.hasInput(2)) {
    const HostTensor *c = ctx.requireConstant(2, "training_mode");
    if (!c)
      return failure();
    if (c->numElements() != 1)
      return ctx.fail(llvm::formatv("training_mode has {0} elements; it is a scalar", c->numElements()));
    training = c->asInt(0) != 0;
  }
  if (!(ratio >= 0 && ratio < 1))
    return ctx.fail(llvm::formatv("ratio {0} is outside [0, 1)", ratio));
  RankedTensorType type = ctx.inputType(0);
  if (!type)
    return failure();
  if (!training) {
    // Inference-mode dropout is the identity with an all-true mask.
    ctx.setOutput(0, ctx.input(0));
    if (ctx.hasOutput(1))
      ctx.setOutputConstant(
          1, HostTensor::ofInts(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                                std::vector<int64_t>(type.getNumElements(), 1), ElementKind::Bool));
    return success();
  }
  return produce(ctx, ctx.create(train::DropoutOp::getOperationName(), ctx.input(0),
                                 {f32(ctx, "ratio", float(ratio)),
                                  named(ctx, "site", ctx.builder().getI64IntegerAttr(ctx.nextRandomSite()))},
                                 2));
}

template <typename OpT> LogicalResult importClassLoss(NodeContext &ctx) {
  SmallVector<Value> operands{ctx.input(0), ctx.input(1)};
  bool hasWeights = ctx.hasInput(2);
  if (hasWeights)
    operands.push_back(ctx.input(2));
  SmallVector<NamedAttribute> attrs{
      named(ctx, "reduction", ctx.builder().getStringAttr(ctx.attrString("reduction", "mean")))};
  if (ctx.hasAttr("ignore_index"))
    attrs.push_back(i64(ctx, "ignore_index", ctx.attrInt("ignore_index", 0)));
  if (failed(produce(ctx, ctx.create(OpT::getOperationName(), operands, attrs))))
    return failure();
  if (std::is_same_v<OpT, train::SoftmaxCrossEntropyLossOp> && ctx.hasOutput(1)) {
    Operation *logProb = ctx.create(train::LogSoftmaxOp::getOperationName(), ctx.input(0),
                                    {i64(ctx, "axis", 1)});
    if (!logProb)
      return failure();
    ctx.setOutput(1, logProb->getResult(0));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult importGather(NodeContext &ctx) {
  auto dataShape = inputShape(ctx, 0);
  if (!dataShape)
    return failure();
  int64_t axis = train::normalizeAxis(ctx.attrInt("axis", 0), dataShape->size());
  if (axis < 0)
    return ctx.fail("axis is out of range for rank " + std::to_string(dataShape->size()));
  // ONNX allows only int32 and int64 indices; anything else is a malformed
  // file, not something to truncate into an index.
  std::optional<ElementKind> indexKind = inputKind(ctx, 1);
  if (!indexKind)
    return failure();
  if (*indexKind != ElementKind::Int64 && *indexKind != ElementKind::Int32)
    return ctx.fail(std::string("indices must be int32 or int64, not ") +
                    elementKindName(*indexKind));
  const HostTensor *data = ctx.constantInput(0), *indices = ctx.constantInput(1);
  if (data && indices)
    return produceFolded(ctx, foldGather(*data, *indices, axis));
  Value indexValue;
  if (indices) {
    // Constant indices: check and normalise negative ones now.
    int64_t size = (*dataShape)[axis];
    HostTensor normalized = *indices;
    for (int64_t i = 0; i < normalized.numElements(); ++i) {
      int64_t index = normalized.asInt(i);
      if (index < -size || index >= size)
        return ctx.fail(llvm::formatv("index {0} is out of range for axis {1} of size {2}",
                                      index, axis, size));
      normalized.ints[i] = index < 0 ? index + size : index;
    }
    auto type = RankedTensorType::get(normalized.shape,
                                      elementTypeOf(ctx.context(), int32_t(normalized.kind)));
    indexValue = train::ConstantOp::create(ctx.builder(), ctx.loc, denseAttrOf(normalized, type));
  } else {
    indexValue = ctx.input(1);
  }
  return produce(ctx, ctx.create(train::GatherOp::getOperationName(), {ctx.input(0), indexValue},
                                 {i64(ctx, "axis", axis)}));
}

LogicalResult importSlice(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  if (!shape)
    return failure();
  int64_t rank = shape->size();
  const HostTensor *startsIn = ctx.requireConstant(1, "starts");
  const HostTensor *endsIn = ctx.requireConstant(2, "ends");
  if (!startsIn || !endsIn)
    return failure();
  std::vector<int64_t> starts = intsOf(*startsIn), ends = intsOf(*endsIn), axes, steps;
  if (ctx.hasInput(3)) {
    const HostTensor *c = ctx.requireConstant(3, "axes");
    if (!c)
      return failure();
    axes = intsOf(*c);
  } else {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (ctx.hasInput(4)) {
    const HostTensor *c = ctx.requireConstant(4, "steps");
    if (!c)
      return failure();
    steps = intsOf(*c);
  } else {
    steps.assign(starts.size(), 1);
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ctx.fail("starts, ends, axes and steps differ in length");
  auto normalizedAxes = normalizeAxes(ctx, axes, rank);
  if (failed(normalizedAxes))
    return failure();
  std::vector<int64_t> outStarts(rank, 0), limits(*shape), outSteps(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t d = (*normalizedAxes)[i], size = (*shape)[d], step = steps[i];
    if (step == 0)
      return ctx.fail("step of axis " + std::to_string(d) + " is zero");
    // Clamp as ONNX specifies; INT64_MAX and INT64_MIN mean "to the end".
    auto adjust = [size](int64_t v) { return v < 0 ? (v < -size ? -1 - size : v) + size : v; };
    int64_t start = adjust(starts[i]), end = adjust(ends[i]);
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, 0, size);
      end = std::max(end, start);
    } else {
      start = std::clamp<int64_t>(start, -1, size - 1);
      end = std::clamp<int64_t>(end, -1, size - 1);
      end = std::min(end, start);
    }
    outStarts[d] = start;
    limits[d] = end;
    outSteps[d] = step;
  }
  if (const HostTensor *c = ctx.constantInput(0)) {
    ctx.setOutputConstant(0, foldSlice(*c, outStarts, limits, outSteps));
    return success();
  }
  if (outStarts == std::vector<int64_t>(rank, 0) && limits == *shape &&
      outSteps == std::vector<int64_t>(rank, 1)) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  return produce(ctx, ctx.create(train::SliceOp::getOperationName(), ctx.input(0),
                                 {i64s(ctx, "starts", outStarts), i64s(ctx, "limits", limits),
                                  i64s(ctx, "steps", outSteps)}));
}

LogicalResult importConcat(NodeContext &ctx) {
  auto firstShape = inputShape(ctx, 0);
  if (!firstShape)
    return failure();
  int64_t axis = train::normalizeAxis(ctx.attrInt("axis", 0), firstShape->size());
  if (axis < 0)
    return ctx.fail("axis is out of range for rank " + std::to_string(firstShape->size()));
  if (allConstant(ctx)) {
    std::vector<const HostTensor *> inputs;
    for (int i = 0; i < ctx.numInputs(); ++i)
      inputs.push_back(ctx.constantInput(i));
    return produceFolded(ctx, foldConcat(inputs, axis));
  }
  SmallVector<Value> operands;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    // Empty pieces (a size-0 extent along the axis) contribute nothing.
    auto shape = inputShape(ctx, i);
    if (shape && shape->size() == firstShape->size() && (*shape)[axis] == 0)
      continue;
    operands.push_back(ctx.input(i));
  }
  if (operands.size() == 1) {
    ctx.setOutput(0, operands.front());
    return success();
  }
  return produce(ctx, ctx.create(train::ConcatOp::getOperationName(), operands,
                                 {i64(ctx, "axis", axis)}));
}

LogicalResult importSplit(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  if (!type)
    return failure();
  int64_t axis = train::normalizeAxis(ctx.attrInt("axis", 0), type.getRank());
  if (axis < 0)
    return ctx.fail("axis is out of range for rank " + std::to_string(type.getRank()));
  std::vector<int64_t> sizes;
  if (ctx.hasInput(1)) {
    const HostTensor *c = ctx.requireConstant(1, "split sizes");
    if (!c)
      return failure();
    sizes = intsOf(*c);
  } else if (auto attr = ctx.attrInts("split")) {
    sizes = *attr;
  } else {
    int64_t pieces = ctx.node.output_size(), size = type.getDimSize(axis);
    if (pieces == 0 || size % pieces != 0)
      return ctx.fail(llvm::formatv("dimension {0} of size {1} does not split evenly into {2}",
                                    axis, size, pieces));
    sizes.assign(pieces, size / pieces);
  }
  if ((int64_t)sizes.size() != ctx.node.output_size())
    return ctx.fail(llvm::formatv("{0} split sizes for {1} outputs", sizes.size(),
                                  ctx.node.output_size()));
  return produce(ctx, ctx.create(train::SplitOp::getOperationName(), ctx.input(0),
                                 {i64(ctx, "axis", axis), i64s(ctx, "sizes", sizes)},
                                 sizes.size()));
}

LogicalResult importReshape(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  const HostTensor *target = ctx.requireConstant(1, "the target shape");
  if (!shape || !target)
    return failure();
  std::vector<int64_t> dims = intsOf(*target);
  bool allowZero = ctx.attrInt("allowzero", 0);
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowZero) {
      if (i >= shape->size())
        return ctx.fail("shape copies dimension " + std::to_string(i) + " of a rank-" +
                        std::to_string(shape->size()) + " input");
      dims[i] = (*shape)[i];
    }
    if (dims[i] == -1) {
      if (inferred >= 0)
        return ctx.fail("shape " + shapeString(intsOf(*target)) + " has two -1 entries");
      inferred = i;
      continue;
    }
    if (dims[i] < 0)
      return ctx.fail("shape " + shapeString(intsOf(*target)) + " has a negative entry");
    known = saturatingMul(known, dims[i]);
  }
  int64_t total = numElementsOf(*shape);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return ctx.fail("cannot reshape " + shapeString(*shape) + " into " +
                      shapeString(intsOf(*target)));
    dims[inferred] = total / known;
  }
  return reshapeTo(ctx, dims);
}

LogicalResult importFlatten(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  if (!shape)
    return failure();
  int64_t rank = shape->size(), axis = ctx.attrInt("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return ctx.fail("axis is out of range for rank " + std::to_string(rank));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) = saturatingMul(d < axis ? outer : inner, (*shape)[d]);
  return reshapeTo(ctx, {outer, inner});
}

FailureOr<std::vector<int64_t>> axesInputOrAttr(NodeContext &ctx) {
  if (ctx.hasInput(1)) {
    const HostTensor *c = ctx.requireConstant(1, "axes");
    if (!c)
      return failure();
    return intsOf(*c);
  }
  return ctx.attrInts("axes").value_or(std::vector<int64_t>{});
}

LogicalResult importUnsqueeze(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  auto axes = axesInputOrAttr(ctx);
  if (!shape || failed(axes))
    return failure();
  int64_t rank = shape->size() + axes->size();
  auto normalized = normalizeAxes(ctx, *axes, rank);
  if (failed(normalized))
    return failure();
  std::vector<int64_t> out;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    out.push_back(llvm::is_contained(*normalized, d) ? 1 : (*shape)[next++]);
  return reshapeTo(ctx, out);
}

LogicalResult importSqueeze(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  auto axes = axesInputOrAttr(ctx);
  if (!shape || failed(axes))
    return failure();
  auto normalized = normalizeAxes(ctx, *axes, shape->size());
  if (failed(normalized))
    return failure();
  std::vector<int64_t> out;
  for (int64_t d = 0; d < (int64_t)shape->size(); ++d) {
    bool listed = llvm::is_contained(*normalized, d);
    if (listed && (*shape)[d] != 1)
      return ctx.fail(llvm::formatv("cannot squeeze axis {0} of size {1}", d, (*shape)[d]));
    if (listed || (normalized->empty() && (*shape)[d] == 1))
      continue;
    out.push_back((*shape)[d]);
  }
  return reshapeTo(ctx, out);
}

LogicalResult importExpand(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  const HostTensor *target = ctx.requireConstant(1, "the target shape");
  if (!shape || !target)
    return failure();
  auto out = broadcastShape(*shape, intsOf(*target));
  if (!out)
    return ctx.fail("cannot expand " + shapeString(*shape) + " to " + shapeString(intsOf(*target)));
  if (const HostTensor *c = ctx.constantInput(0); c && numElementsOf(*out) <= kMaxFoldedElements) {
    ctx.setOutputConstant(0, foldBroadcast(*c, *out));
    return success();
  }
  if (*out == *shape) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  RankedTensorType type = ctx.inputType(0);
  if (!type)
    return failure();
  return produce(ctx, ctx.createTyped(train::BroadcastOp::getOperationName(), ctx.input(0),
                                      RankedTensorType::get(*out, type.getElementType())));
}

LogicalResult importTranspose(NodeContext &ctx) {
  auto shape = inputShape(ctx, 0);
  if (!shape)
    return failure();
  std::vector<int64_t> perm(shape->size());
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto attr = ctx.attrInts("perm"))
    perm = *attr;
  std::vector<int64_t> sorted = perm;
  llvm::sort(sorted);
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted.size() != shape->size() || sorted[i] != int64_t(i))
      return ctx.fail("perm " + shapeString(perm) + " is not a permutation of the input's " +
                      std::to_string(shape->size()) + " dimensions");
  if (const HostTensor *c = ctx.constantInput(0)) {
    ctx.setOutputConstant(0, foldTranspose(*c, perm));
    return success();
  }
  return produce(ctx, ctx.create(train::TransposeOp::getOperationName(), ctx.input(0),
                                 {i64s(ctx, "perm", perm)}));
}

LogicalResult importTrilu(NodeContext &ctx) {
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    const HostTensor *c = ctx.requireConstant(1, "k");
    if (!c)
      return failure();
    if (c->numElements() != 1)
      return ctx.fail(llvm::formatv("k has {0} elements; it is a scalar", c->numElements()));
    k = c->asInt(0);
  }
  bool upper = ctx.attrInt("upper", 1);
  if (const HostTensor *c = ctx.constantInput(0)) {
    if (c->shape.size() < 2)
      return ctx.fail("input must have rank >= 2");
    ctx.setOutputConstant(0, foldTrilu(*c, upper, k));
    return success();
  }
  return produce(ctx, ctx.create(train::TriluOp::getOperationName(), ctx.input(0),
                                 {named(ctx, "upper", ctx.builder().getBoolAttr(upper)),
                                  i64(ctx, "k", k)}));
}

} // namespace

const llvm::StringMap<NodeImporter> &nodeImporters() {
  // Input counts are the ONNX schemas' for opsets 13 to 17 (an optional
  // input may be present and named "").
  static const llvm::StringMap<NodeImporter> table = {
      {"Add", {importBinary<BinaryFn::Add, train::AddOp>, 2, 2}},
      {"Sub", {importBinary<BinaryFn::Sub, train::SubOp>, 2, 2}},
      {"Mul", {importBinary<BinaryFn::Mul, train::MulOp>, 2, 2}},
      {"Div", {importBinary<BinaryFn::Div, train::DivOp>, 2, 2}},
      {"Pow", {importBinary<BinaryFn::Pow, train::PowOp>, 2, 2}},
      {"Equal", {importBinary<BinaryFn::Equal, train::EqualOp>, 2, 2}},
      {"Less", {importBinary<BinaryFn::Less, train::LessOp>, 2, 2}},
      {"Greater", {importBinary<BinaryFn::Greater, train::GreaterOp>, 2, 2}},
      {"LessOrEqual", {[](NodeContext &ctx) { return importComparisonOrEqual(ctx, /*less=*/true); }, 2, 2}},
      {"GreaterOrEqual", {[](NodeContext &ctx) { return importComparisonOrEqual(ctx, /*less=*/false); }, 2, 2}},
      {"Max", {importVariadic<BinaryFn::Max, train::MaxOp>, 1, kVariadic}},
      {"Min", {importVariadic<BinaryFn::Min, train::MinOp>, 1, kVariadic}},
      {"Sqrt", {importUnary<UnaryFn::Sqrt, train::SqrtOp>, 1, 1}},
      {"Reciprocal", {importUnary<UnaryFn::Reciprocal, train::ReciprocalOp>, 1, 1}},
      {"Neg", {importUnary<UnaryFn::Neg, train::NegOp>, 1, 1}},
      {"Abs", {importUnary<UnaryFn::Abs, train::AbsOp>, 1, 1}},
      {"Exp", {importUnary<UnaryFn::Exp, train::ExpOp>, 1, 1}},
      {"Log", {importUnary<UnaryFn::Log, train::LogOp>, 1, 1}},
      {"Erf", {importUnary<UnaryFn::Erf, train::ErfOp>, 1, 1}},
      {"Tanh", {importUnary<UnaryFn::Tanh, train::TanhOp>, 1, 1}},
      {"Sigmoid", {importUnary<UnaryFn::Sigmoid, train::SigmoidOp>, 1, 1}},
      {"Relu", {importUnary<UnaryFn::Relu, train::ReluOp>, 1, 1}},
      {"Sin", {importUnary<UnaryFn::Sin, train::SinOp>, 1, 1}},
      {"Cos", {importUnary<UnaryFn::Cos, train::CosOp>, 1, 1}},
      {"Where", {importWhere, 3, 3}},
      {"Cast", {importCast, 1, 1}},
      {"Identity", {importIdentity, 1, 1}},
      {"Constant", {importConstant, 0, 0}},
      {"Shape", {importShape, 1, 1}},
      {"ConstantOfShape", {importConstantOfShape, 1, 1}},
      {"Range", {importRange, 3, 3}},
      {"MatMul", {importMatMul, 2, 2}},
      {"Gemm", {importGemm, 2, 3}},
      {"Conv", {importConv, 2, 3}},
      {"Einsum", {importEinsum, 1, kVariadic}},
      {"Softmax", {importSoftmax<train::SoftmaxOp>, 1, 1}},
      {"LogSoftmax", {importSoftmax<train::LogSoftmaxOp>, 1, 1}},
      {"LayerNormalization", {importLayerNormalization, 2, 3}},
      {"ReduceMean", {importReduce<train::ReduceMeanOp>, 1, 1}},
      {"ReduceSum", {importReduce<train::ReduceSumOp>, 1, 2}},
      {"ReduceMax", {importReduce<train::ReduceMaxOp>, 1, 1}},
      {"Dropout", {importDropout, 1, 3}},
      {"SoftmaxCrossEntropyLoss", {importClassLoss<train::SoftmaxCrossEntropyLossOp>, 2, 3}},
      {"NegativeLogLikelihoodLoss", {importClassLoss<train::NegativeLogLikelihoodLossOp>, 2, 3}},
      {"Gather", {importGather, 2, 2}},
      {"Slice", {importSlice, 3, 5}},
      {"Concat", {importConcat, 1, kVariadic}},
      {"Split", {importSplit, 1, 2}},
      {"Reshape", {importReshape, 2, 2}},
      {"Flatten", {importFlatten, 1, 1}},
      {"Unsqueeze", {importUnsqueeze, 2, 2}},
      {"Squeeze", {importSqueeze, 1, 2}},
      {"Expand", {importExpand, 2, 2}},
      {"Tile", {importTile, 2, 2}},
      {"Transpose", {importTranspose, 1, 1}},
      {"Trilu", {importTrilu, 1, 2}},
  };
  return table;
}

} // namespace colossal::import

namespace colossal {
const std::vector<std::string> &supportedOnnxOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const auto &entry : import::nodeImporters())
      names.push_back(entry.getKey().str());
    std::sort(names.begin(), names.end());
    return names;
  }();
  return ops;
}
} // namespace colossal
