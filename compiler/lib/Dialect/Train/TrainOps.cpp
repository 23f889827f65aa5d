//===- TrainOps.cpp - shape inference, verifiers and folders ----*- C++ -*-===//
//
// Shape inference is the verifier: every compute op infers its result types
// from its operands and attributes (InferTypeOpInterface), and MLIR checks that
// the declared result types equal the inferred ones. The importer builds ops
// without result types and lets inference fill them in.
//
//===----------------------------------------------------------------------===//

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace colossal::train;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace colossal::train {

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return -1;
  return axis < 0 ? axis + rank : axis;
}

bool broadcastShapes(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                     SmallVectorImpl<int64_t> &result) {
  size_t rank = std::max(lhs.size(), rhs.size());
  result.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l != r && l != 1 && r != 1)
      return false;
    result[i] = l == 1 ? r : l;
  }
  return true;
}

LogicalResult inferBroadcastResult(std::optional<Location> location, ArrayRef<Value> operands,
                                   Type resultElementType, SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  Type elementType;
  for (Value operand : operands) {
    auto type = llvm::dyn_cast<RankedTensorType>(operand.getType());
    if (!type)
      return emitOptionalError(location, "expected ranked tensor operands");
    if (!elementType)
      elementType = type.getElementType();
    else if (elementType != type.getElementType())
      return emitOptionalError(location, "operand element types differ: ", elementType, " vs ",
                               type.getElementType());
    SmallVector<int64_t> next;
    if (!broadcastShapes(shape, type.getShape(), next))
      return emitOptionalError(location, "shapes do not broadcast: [", shape, "] and [",
                               type.getShape(), "]");
    shape = std::move(next);
  }
  inferred.push_back(RankedTensorType::get(shape, resultElementType ? resultElementType
                                                                    : elementType));
  return success();
}

} // namespace colossal::train

static RankedTensorType rankedType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (getSymName().empty())
    return emitOpError() << "has an empty name";
  int64_t rank = cast<ShapedType>(getType()).getRank();
  if (int64_t(getSplits()) < 1)
    return emitOpError() << "splits must be at least 1, not " << int64_t(getSplits());
  if (getSplitDim() && (int64_t(*getSplitDim()) < 0 || int64_t(*getSplitDim()) >= rank))
    return emitOpError() << "split_dim " << int64_t(*getSplitDim()) << " is not a dimension of " << getType();
  if (getSplits() > 1 && !getSplitDim())
    return emitOpError() << "is split " << getSplits() << " ways along no split_dim";
  if (int64_t padding = int64_t(getPadding()); padding != 0) {
    if (padding < 0 || !getSplitDim() ||
        padding >= cast<ShapedType>(getType()).getDimSize(int64_t(*getSplitDim())))
      return emitOpError() << "padding " << padding << " needs a split_dim and must leave the last slice a real row";
  }
  if (int64_t groups = int64_t(getSplitGroups()); groups != 1) {
    if (groups < 1 || !getSplitDim())
      return emitOpError() << "split_groups " << groups << " needs a split_dim and at least one group";
    if (int64_t size = cast<ShapedType>(getType()).getDimSize(int64_t(*getSplitDim())); size % groups != 0)
      return emitOpError() << "split_groups " << groups << " do not divide the slice's " << size
                           << " elements along split_dim";
  }
  if (std::optional<ArrayRef<int64_t>> blocks = getBlockSplits()) {
    if (int64_t(blocks->size()) != rank || llvm::any_of(*blocks, [](int64_t b) { return b < 1; }))
      return emitOpError() << "block_splits needs one count of at least 1 per dimension of " << getType();
    if (getSplitDim())
      return emitOpError() << "is cut both into blocks and along split_dim";
  }
  if (std::optional<ArrayRef<int64_t>> groups = getBlockGroups()) {
    ArrayRef<int64_t> shape = cast<ShapedType>(getType()).getShape();
    if (!getBlockSplits() || int64_t(groups->size()) != rank ||
        llvm::count_if(*groups, [](int64_t g) { return g != 1; }) > 1)
      return emitOpError() << "block_groups needs block_splits and one count per dimension of " << getType()
                           << ", at most one of them above 1";
    for (size_t d = 0; d < groups->size(); ++d)
      if ((*groups)[d] < 1 || shape[d] % (*groups)[d] != 0)
        return emitOpError() << "block_groups " << (*groups)[d] << " do not divide the block's " << shape[d]
                             << " elements along dimension " << d;
  }
  return success();
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto parameter = symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!parameter)
    return emitOpError() << "refers to " << getNameAttr()
                         << ", which is not a train.parameter";
  if (parameter.getType() != getType())
    return emitOpError() << "result type " << getType() << " differs from parameter "
                         << getNameAttr() << " of type " << parameter.getType();
  return success();
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                           Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto type = llvm::dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type || !type.hasStaticShape())
    return emitOptionalError(location, "constant value must have a static tensor type");
  inferred.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return success();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  SmallVector<Type, 1> branch;
  if (failed(inferBroadcastResult(location, {adaptor.getOnTrue(), adaptor.getOnFalse()},
                                  nullptr, branch)))
    return failure();
  auto branchType = llvm::cast<RankedTensorType>(branch.front());
  SmallVector<int64_t> shape;
  if (!broadcastShapes(rankedType(adaptor.getCondition()).getShape(), branchType.getShape(),
                       shape))
    return emitOptionalError(location, "condition shape does not broadcast with the branches");
  inferred.push_back(RankedTensorType::get(shape, branchType.getElementType()));
  return success();
}

LogicalResult CastOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                       Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  Type to = adaptor.getTo();
  if (!to.isIntOrFloat())
    return emitOptionalError(location, "cast target must be an integer or float type");
  inferred.push_back(RankedTensorType::get(rankedType(adaptor.getInput()).getShape(), to));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType lhs = rankedType(adaptor.getLhs()), rhs = rankedType(adaptor.getRhs());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(location, "operand element types differ");
  if (lhs.getRank() == 0 || rhs.getRank() == 0)
    return emitOptionalError(location, "matmul operands must have rank >= 1");
  SmallVector<int64_t> l(lhs.getShape()), r(rhs.getShape());
  bool lhsVector = l.size() == 1, rhsVector = r.size() == 1;
  if (lhsVector)
    l.insert(l.begin(), 1);
  if (rhsVector)
    r.push_back(1);
  int64_t k = l.back(), m = l[l.size() - 2], kr = r[r.size() - 2], n = r.back();
  if (k != kr)
    return emitOptionalError(location, "contracted sizes differ: lhs has ", k, ", rhs has ", kr);
  SmallVector<int64_t> batch;
  if (!broadcastShapes(ArrayRef(l).drop_back(2), ArrayRef(r).drop_back(2), batch))
    return emitOptionalError(location, "batch dimensions do not broadcast");
  if (!lhsVector)
    batch.push_back(m);
  if (!rhsVector)
    batch.push_back(n);
  inferred.push_back(RankedTensorType::get(batch, lhs.getElementType()));
  return success();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                       Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType a = rankedType(adaptor.getA()), b = rankedType(adaptor.getB());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOptionalError(location, "gemm operands must be matrices");
  int64_t m = adaptor.getTransA() ? a.getDimSize(1) : a.getDimSize(0);
  int64_t ka = adaptor.getTransA() ? a.getDimSize(0) : a.getDimSize(1);
  int64_t kb = adaptor.getTransB() ? b.getDimSize(1) : b.getDimSize(0);
  int64_t n = adaptor.getTransB() ? b.getDimSize(0) : b.getDimSize(1);
  if (ka != kb)
    return emitOptionalError(location, "contracted sizes differ: a has ", ka, ", b has ", kb);
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(location, "operand element types differ");
  SmallVector<int64_t> shape{m, n};
  if (Value c = adaptor.getC()) {
    SmallVector<int64_t> out;
    if (!broadcastShapes(rankedType(c).getShape(), shape, out) || out != shape)
      return emitOptionalError(location, "c of shape [", rankedType(c).getShape(),
                               "] does not broadcast to [", shape, "]");
  }
  inferred.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput()),
                   weight = rankedType(adaptor.getWeight());
  if (weight.getRank() != 2 || input.getRank() < 1)
    return emitOptionalError(location, "linear needs a matrix weight and an input of rank >= 1");
  // The contracted and the output dimension of the weight.
  bool transposed = adaptor.getTransposeWeight();
  int64_t k = weight.getDimSize(transposed ? 1 : 0), n = weight.getDimSize(transposed ? 0 : 1);
  if (input.getShape().back() != k)
    return emitOptionalError(location, "input features ", input.getShape().back(), " differ from weight ",
                             transposed ? "columns " : "rows ", k);
  if (Value bias = adaptor.getBias()) {
    RankedTensorType b = rankedType(bias);
    if (b.getRank() != 1 || b.getDimSize(0) != n)
      return emitOptionalError(location, "bias must be a vector of ", n);
  }
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = n;
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                       Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput()),
                   weight = rankedType(adaptor.getWeight());
  int64_t rank = input.getRank(), spatial = rank - 2;
  if (rank < 3 || weight.getRank() != rank)
    return emitOptionalError(location, "conv input and weight must have the same rank >= 3");
  ArrayRef<int64_t> strides = adaptor.getStrides(), pads = adaptor.getPads(),
                    dilations = adaptor.getDilations();
  if ((int64_t)strides.size() != spatial || (int64_t)dilations.size() != spatial ||
      (int64_t)pads.size() != 2 * spatial)
    return emitOptionalError(location, "conv needs ", spatial, " strides and dilations and ",
                             2 * spatial, " pads");
  int64_t group = static_cast<int64_t>(adaptor.getGroup());
  int64_t channels = input.getDimSize(1), outChannels = weight.getDimSize(0);
  if (group <= 0 || channels % group != 0 || outChannels % group != 0 ||
      weight.getDimSize(1) * group != channels)
    return emitOptionalError(location, "input channels ", channels, " do not match weight ",
                             weight.getDimSize(1), " x group ", group);
  SmallVector<int64_t> shape{input.getDimSize(0), outChannels};
  for (int64_t i = 0; i < spatial; ++i) {
    // Bounded so that the extent arithmetic below cannot overflow.
    constexpr int64_t kLimit = int64_t(1) << 31;
    if (strides[i] <= 0 || dilations[i] <= 0 || strides[i] > kLimit || dilations[i] > kLimit)
      return emitOptionalError(location, "strides and dilations must lie in [1, 2^31]");
    if (pads[i] < 0 || pads[i + spatial] < 0 || pads[i] > kLimit || pads[i + spatial] > kLimit)
      return emitOptionalError(location, "pads must lie in [0, 2^31]");
    int64_t kernel = dilations[i] * (weight.getDimSize(2 + i) - 1) + 1;
    int64_t padded = input.getDimSize(2 + i) + pads[i] + pads[i + spatial];
    if (padded < kernel)
      return emitOptionalError(location, "kernel of extent ", kernel,
                               " exceeds padded input of extent ", padded);
    shape.push_back((padded - kernel) / strides[i] + 1);
  }
  if (Value bias = adaptor.getBias())
    if (rankedType(bias).getRank() != 1 || rankedType(bias).getDimSize(0) != outChannels)
      return emitOptionalError(location, "bias must be a vector of ", outChannels);
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

/// Splits "ab,bc->ac" into its input terms and output term; fails on anything
/// but letters, commas and one arrow.
static LogicalResult parseEinsum(StringRef equation, SmallVectorImpl<StringRef> &inputs,
                                 StringRef &output) {
  auto arrow = equation.split("->");
  if (arrow.second.empty() && !equation.contains("->"))
    return failure();
  output = arrow.second.trim();
  SmallVector<StringRef> terms;
  arrow.first.split(terms, ',');
  for (StringRef term : terms)
    inputs.push_back(term.trim());
  auto lettersOnly = [](StringRef s) { return llvm::all_of(s, llvm::isAlpha); };
  return success(llvm::all_of(inputs, lettersOnly) && lettersOnly(output));
}

LogicalResult EinsumOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  SmallVector<StringRef> terms;
  StringRef output;
  if (failed(parseEinsum(adaptor.getEquation(), terms, output)))
    return emitOptionalError(location, "equation \"", adaptor.getEquation(),
                             "\" must be explicit letters: \"ab,bc->ac\"");
  if (terms.size() != adaptor.getInputs().size() || terms.empty())
    return emitOptionalError(location, "equation has ", terms.size(), " terms for ",
                             adaptor.getInputs().size(), " operands");
  llvm::DenseMap<char, int64_t> sizes;
  Type elementType;
  for (auto [term, value] : llvm::zip(terms, adaptor.getInputs())) {
    RankedTensorType type = rankedType(value);
    if (elementType && elementType != type.getElementType())
      return emitOptionalError(location, "operand element types differ");
    elementType = type.getElementType();
    if ((int64_t)term.size() != type.getRank())
      return emitOptionalError(location, "term \"", term, "\" has ", term.size(),
                               " letters for an operand of rank ", type.getRank());
    for (auto [letter, size] : llvm::zip(term, type.getShape())) {
      auto [it, inserted] = sizes.try_emplace(letter, size);
      if (!inserted && it->second != size) {
        if (it->second != 1 && size != 1)
          return emitOptionalError(location, "letter '", StringRef(&letter, 1),
                                   "' has sizes ", it->second, " and ", size);
        it->second = std::max(it->second, size);
      }
    }
  }
  SmallVector<int64_t> shape;
  for (char letter : output) {
    auto it = sizes.find(letter);
    if (it == sizes.end())
      return emitOptionalError(location, "output letter '", StringRef(&letter, 1),
                               "' appears in no input");
    shape.push_back(it->second);
  }
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, attention
//===----------------------------------------------------------------------===//

static LogicalResult inferSameAsInputWithAxis(std::optional<Location> location, Value input,
                                              int64_t axis, SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(input);
  if (normalizeAxis(axis, type.getRank()) < 0)
    return emitOptionalError(location, "axis ", axis, " is out of range for rank ",
                             type.getRank());
  inferred.push_back(type);
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferSameAsInputWithAxis(location, adaptor.getInput(),
                                  static_cast<int64_t>(adaptor.getAxis()), inferred);
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                             Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferSameAsInputWithAxis(location, adaptor.getInput(),
                                  static_cast<int64_t>(adaptor.getAxis()), inferred);
}

/// Checks that an affine parameter (scale or bias) broadcasts to the
/// normalised trailing shape `input[axis:]`.
static LogicalResult checkNormParameter(std::optional<Location> location, StringRef what,
                                        Value parameter, RankedTensorType input, int64_t axis) {
  if (!parameter)
    return success();
  ArrayRef<int64_t> normalised = input.getShape().drop_front(axis);
  SmallVector<int64_t> out;
  ArrayRef<int64_t> shape = rankedType(parameter).getShape();
  if (shape.size() > normalised.size() || !broadcastShapes(shape, normalised, out) ||
      ArrayRef<int64_t>(out) != normalised)
    return emitOptionalError(location, what, " of shape [", shape,
                             "] does not broadcast to the normalised shape [", normalised, "]");
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  int64_t axis = normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), input.getRank());
  if (axis < 0)
    return emitOptionalError(location, "axis is out of range for rank ", input.getRank());
  if (failed(checkNormParameter(location, "scale", adaptor.getScale(), input, axis)) ||
      failed(checkNormParameter(location, "bias", adaptor.getBias(), input, axis)))
    return failure();
  inferred.push_back(input);
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (getBias() && !getScale())
    return emitOpError() << "has a bias but no scale";
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  int64_t axis = normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), input.getRank());
  if (axis < 0)
    return emitOptionalError(location, "axis is out of range for rank ", input.getRank());
  if (failed(checkNormParameter(location, "scale", adaptor.getScale(), input, axis)))
    return failure();
  inferred.push_back(input);
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType q = rankedType(adaptor.getQuery()), k = rankedType(adaptor.getKey()),
                   v = rankedType(adaptor.getValue());
  int64_t rank = q.getRank();
  if (rank < 2 || k.getRank() != rank || v.getRank() != rank)
    return emitOptionalError(location, "query, key and value must have one rank >= 2");
  if (k.getShape().drop_back(2) != v.getShape().drop_back(2))
    return emitOptionalError(location, "key and value batch dimensions differ");
  // Equal batch dimensions, but for grouped-query attention's heads (the
  // dimension before the tokens): the key/value heads divide the query heads.
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (q.getDimSize(d) != k.getDimSize(d) &&
        (d + 3 != rank || k.getDimSize(d) < 1 || q.getDimSize(d) % k.getDimSize(d) != 0))
      return emitOptionalError(location, "query and key batch dimensions differ (only key/value heads that divide "
                                         "the query heads may)");
  if (q.getShape().back() != k.getShape().back())
    return emitOptionalError(location, "query and key head sizes differ");
  if (k.getDimSize(rank - 2) != v.getDimSize(rank - 2))
    return emitOptionalError(location, "key and value lengths differ");
  float dropout = adaptor.getDropout().convertToFloat();
  if (dropout < 0 || dropout >= 1)
    return emitOptionalError(location, "dropout must lie in [0, 1)");
  SmallVector<int64_t> shape(q.getShape());
  if (Value mask = adaptor.getMask()) {
    SmallVector<int64_t> scores(q.getShape().drop_back(1)), out;
    scores.push_back(k.getDimSize(rank - 2));
    if (!broadcastShapes(rankedType(mask).getShape(), scores, out) || out != scores)
      return emitOptionalError(location, "mask does not broadcast to the scores [", scores, "]");
  }
  shape.back() = v.getShape().back();
  inferred.push_back(RankedTensorType::get(shape, q.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(std::optional<Location> location, Value input,
                                 ArrayRef<int64_t> axes, bool keepdims,
                                 SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(input);
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t axis : axes) {
    int64_t normalized = normalizeAxis(axis, type.getRank());
    if (normalized < 0)
      return emitOptionalError(location, "axis ", axis, " is out of range for rank ",
                               type.getRank());
    if (!reduced.insert(normalized).second)
      return emitOptionalError(location, "axis ", axis, " appears twice");
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    bool isReduced = axes.empty() || reduced.contains(i);
    if (!isReduced)
      shape.push_back(type.getDimSize(i));
    else if (keepdims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

#define COLOSSAL_REDUCE_INFERENCE(OP)                                                          \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> location,         \
                                     Adaptor adaptor, SmallVectorImpl<Type> &inferred) {      \
    return inferReduce(location, adaptor.getInput(), adaptor.getAxes(), adaptor.getKeepdims(), \
                       inferred);                                                              \
  }
COLOSSAL_REDUCE_INFERENCE(ReduceSumOp)
COLOSSAL_REDUCE_INFERENCE(ReduceMeanOp)
COLOSSAL_REDUCE_INFERENCE(ReduceMaxOp)
#undef COLOSSAL_REDUCE_INFERENCE

//===----------------------------------------------------------------------===//
// Randomness and losses
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  float ratio = adaptor.getRatio().convertToFloat();
  if (!(ratio >= 0 && ratio < 1))
    return emitOptionalError(location, "ratio must lie in [0, 1), got ", ratio);
  RankedTensorType type = rankedType(adaptor.getInput());
  inferred.push_back(type);
  inferred.push_back(RankedTensorType::get(type.getShape(), IntegerType::get(context, 1)));
  return success();
}

/// Shared by the three loss ops: scores [N, C, d...], labels [N, d...].
static LogicalResult inferClassLoss(std::optional<Location> location, Value scores, Value labels,
                                    Value weights, StringRef reduction,
                                    SmallVectorImpl<Type> &inferred) {
  RankedTensorType s = rankedType(scores), l = rankedType(labels);
  if (s.getRank() < 2)
    return emitOptionalError(location, "scores must have rank >= 2 ([N, C, ...])");
  if (!l.getElementType().isInteger())
    return emitOptionalError(location, "labels must be integers, got ", l.getElementType());
  SmallVector<int64_t> expected(s.getShape());
  expected.erase(expected.begin() + 1);
  if (l.getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(location, "labels of shape [", l.getShape(),
                             "] do not match scores without the class axis [", expected, "]");
  if (weights && (rankedType(weights).getRank() != 1 ||
                  rankedType(weights).getDimSize(0) != s.getDimSize(1)))
    return emitOptionalError(location, "weights must be a vector of ", s.getDimSize(1));
  if (reduction == "none")
    inferred.push_back(RankedTensorType::get(expected, s.getElementType()));
  else if (reduction == "sum" || reduction == "mean")
    inferred.push_back(RankedTensorType::get({}, s.getElementType()));
  else
    return emitOptionalError(location, "reduction must be none, sum or mean, got \"", reduction,
                             "\"");
  return success();
}

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> location,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &inferred) {
  return inferClassLoss(location, adaptor.getScores(), adaptor.getLabels(), adaptor.getWeights(),
                        adaptor.getReduction(), inferred);
}

LogicalResult NegativeLogLikelihoodLossOp::inferReturnTypes(MLIRContext *,
                                                            std::optional<Location> location,
                                                            Adaptor adaptor,
                                                            SmallVectorImpl<Type> &inferred) {
  return inferClassLoss(location, adaptor.getLogProbs(), adaptor.getLabels(),
                        adaptor.getWeights(), adaptor.getReduction(), inferred);
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                               Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferClassLoss(location, adaptor.getLogits(), adaptor.getLabels(), Value(),
                        adaptor.getReduction(), inferred);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType data = rankedType(adaptor.getData()),
                   indices = rankedType(adaptor.getIndices());
  int64_t axis = normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), data.getRank());
  if (axis < 0)
    return emitOptionalError(location, "axis is out of range for rank ", data.getRank());
  if (!indices.getElementType().isInteger())
    return emitOptionalError(location, "indices must be integers");
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  inferred.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits(),
                    steps = adaptor.getSteps();
  int64_t rank = input.getRank();
  if ((int64_t)starts.size() != rank || (int64_t)limits.size() != rank ||
      (int64_t)steps.size() != rank)
    return emitOptionalError(location, "slice needs one start, limit and step per dimension (",
                             rank, ")");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = input.getDimSize(d), start = starts[d], limit = limits[d], step = steps[d];
    if (step == 0)
      return emitOptionalError(location, "step of dimension ", d, " is zero");
    if (step > 0 && (start < 0 || start > size || limit < start || limit > size))
      return emitOptionalError(location, "dimension ", d, ": [", start, ", ", limit,
                               ") is not within [0, ", size, "]");
    if (step < 0 && (start < -1 || start >= size || limit > start || limit < -1))
      return emitOptionalError(location, "dimension ", d, ": reverse range from ", start,
                               " to ", limit, " is not within the dimension of size ", size);
    int64_t extent = step > 0 ? limit - start : start - limit;
    uint64_t magnitude = step > 0 ? uint64_t(step) : 0 - uint64_t(step);
    shape.push_back(extent <= 0 ? 0 : int64_t((uint64_t(extent) - 1) / magnitude + 1));
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(location, "concat needs at least one input");
  RankedTensorType first = rankedType(adaptor.getInputs().front());
  int64_t axis = normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), first.getRank());
  if (axis < 0)
    return emitOptionalError(location, "axis is out of range for rank ", first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value input : adaptor.getInputs()) {
    RankedTensorType type = rankedType(input);
    if (type.getRank() != first.getRank() || type.getElementType() != first.getElementType())
      return emitOptionalError(location, "inputs differ in rank or element type");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(location, "inputs differ in dimension ", d, ": ",
                                 first.getDimSize(d), " vs ", type.getDimSize(d));
    // Checked: a file may declare dimensions whose sum leaves int64.
    if (llvm::AddOverflow(shape[axis], type.getDimSize(axis), shape[axis]))
      return emitOptionalError(location, "concatenated dimension ", axis,
                               " exceeds the largest representable size");
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  int64_t axis = normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), input.getRank());
  if (axis < 0)
    return emitOptionalError(location, "axis is out of range for rank ", input.getRank());
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 0)
      return emitOptionalError(location, "split sizes must not be negative");
    // Checked: a file may give sizes whose sum leaves int64.
    if (llvm::AddOverflow(total, size, total))
      return emitOptionalError(location, "split sizes sum past the largest representable size");
    SmallVector<int64_t> shape(input.getShape());
    shape[axis] = size;
    inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  }
  if (total != input.getDimSize(axis))
    return emitOptionalError(location, "split sizes sum to ", total, ", dimension is ",
                             input.getDimSize(axis));
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = rankedType(getInput()), result = getResult().getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "element type " << result.getElementType()
                         << " differs from the input's " << input.getElementType();
  if (input.getNumElements() != result.getNumElements())
    return emitOpError() << "reshapes " << input.getNumElements() << " elements into "
                         << result.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto source = getInput().getDefiningOp<ReshapeOp>()) {
    // reshape(reshape(x)) is one reshape of x.
    getInputMutable().assign(source.getInput());
    return getResult();
  }
  if (auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if ((int64_t)perm.size() != input.getRank())
    return emitOptionalError(location, "perm has ", perm.size(), " entries for rank ",
                             input.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return emitOptionalError(location, "perm [", perm, "] is not a permutation");
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::all_of(llvm::enumerate(perm), [](auto e) { return e.value() == int64_t(e.index()); }))
    return getInput();
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    // transpose(transpose(x, p), q) = transpose(x, p[q[i]]).
    SmallVector<int64_t> composed;
    for (int64_t q : perm)
      composed.push_back(inner.getPerm()[q]);
    setPerm(composed);
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = rankedType(getInput()), result = getResult().getType();
  SmallVector<int64_t> out;
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "element types differ";
  if (input.getRank() > result.getRank() ||
      !broadcastShapes(input.getShape(), result.getShape(), out) ||
      ArrayRef<int64_t>(out) != result.getShape())
    return emitOpError() << "cannot broadcast [" << input.getShape() << "] to ["
                         << result.getShape() << "]";
  return success();
}

LogicalResult TriluOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  if (input.getRank() < 2)
    return emitOptionalError(location, "trilu needs rank >= 2");
  inferred.push_back(input);
  return success();
}

LogicalResult OptimizerUpdateOp::verify() {
  StringRef kind = getKind();
  if (kind != "lamb" && kind != "adamw" && kind != "sgd" && kind != "lars")
    return emitOpError() << "kind must be lamb, adamw, sgd or lars, got \"" << kind << "\"";
  size_t n = getParams().size();
  if (n == 0)
    return emitOpError() << "updates no tensor";
  if (getGrads().size() != n || getMoment1().size() != n)
    return emitOpError() << "has " << n << " params, " << getGrads().size() << " grads and "
                         << getMoment1().size() << " moment1 tensors; they must match";
  size_t second = hasSecondMoment(kind) ? n : 0;
  if (getMoment2().size() != second)
    return emitOpError() << kind << " keeps " << (second ? "a second moment per parameter" : "no second moment")
                         << ": expected " << second << " moment2 tensors, got " << getMoment2().size();
  if (getDecay().size() != n || getTrustRatio().size() != n)
    return emitOpError() << "decay and trust_ratio need one entry per parameter (" << n << "), got "
                         << getDecay().size() << " and " << getTrustRatio().size();
  for (size_t i = 0; i < n; ++i) {
    Type type = getParams()[i].getType();
    if (!cast<RankedTensorType>(type).getElementType().isF32())
      return emitOpError() << "param " << i << " has type " << type << "; weights are float32 masters";
    auto same = [&](ValueRange list, StringRef what) -> LogicalResult {
      if (i < list.size() && list[i].getType() != type)
        return emitOpError() << what << " " << i << " has type " << list[i].getType() << ", its param " << type;
      return success();
    };
    if (failed(same(getGrads(), "grad")) || failed(same(getMoment1(), "moment1")) ||
        failed(same(getMoment2(), "moment2")))
      return failure();
  }
  if (getNumResults() != 2 * n + second)
    return emitOpError() << "yields " << getNumResults() << " results; expected " << 2 * n + second
                         << " (new params, then new moments)";
  for (auto [result, operand] : llvm::zip(getResults(), llvm::concat<Value>(getParams(), getMoment1(), getMoment2())))
    if (result.getType() != operand.getType())
      return emitOpError() << "result " << cast<OpResult>(result).getResultNumber() << " has type "
                           << result.getType() << ", the value it replaces " << operand.getType();
  for (size_t i = 0; i < n; ++i) {
    bool wanted = kind == "lamb";
    if ((kind == "lamb" || kind == "adamw" || kind == "sgd") && getTrustRatio()[i] != wanted)
      return emitOpError() << kind << (wanted ? " scales every tensor by its trust ratio" : " has no trust ratio")
                           << "; trust_ratio[" << i << "] says otherwise";
  }
  auto unitInterval = [&](double x) { return x >= 0.0 && x < 1.0; };
  if (!unitInterval(getBeta1().convertToDouble()) || !unitInterval(getBeta2().convertToDouble()))
    return emitOpError() << "beta1 and beta2 must lie in [0, 1)";
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError() << "eps must be positive";
  if (!(getWeightDecay().convertToDouble() >= 0.0))
    return emitOpError() << "weight_decay must not be negative";
  if (!(getMomentum().convertToDouble() >= 0.0))
    return emitOpError() << "momentum must not be negative";
  if (!(getEta().convertToDouble() > 0.0))
    return emitOpError() << "eta must be positive";
  return success();
}

#define GET_OP_CLASSES
#include "colossal/Dialect/Train/TrainOps.cpp.inc"
