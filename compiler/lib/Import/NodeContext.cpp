//===- NodeContext.cpp - inputs, attributes and op creation ------*- C++ -*-===//

#include "GraphImporter.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace colossal::import {

bool isReasonableType(Type type) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return true;
  std::vector<int64_t> shape(tensor.getShape().begin(), tensor.getShape().end());
  return llvm::all_of(shape, [](int64_t d) { return d >= 0 && d <= kMaxTensorElements; }) &&
         numElementsOf(shape) <= kMaxTensorElements;
}

OpBuilder &NodeContext::builder() { return importer.builder; }
MLIRContext *NodeContext::context() { return &importer.context; }
int64_t NodeContext::opset() const { return importer.opsetVersion; }

int64_t NodeContext::nextRandomSite() { return ++importer.randomSites; }

LogicalResult NodeContext::fail(const Twine &reason) { return importer.nodeError(node, reason); }

Value NodeContext::input(int i) {
  if (!hasInput(i)) {
    (void)fail("missing required input " + Twine(i));
    return {};
  }
  Value value = importer.materialize(node.input(i), loc);
  if (!value)
    (void)fail("input '" + node.input(i) + "' has no value");
  return value;
}

RankedTensorType NodeContext::inputType(int i) {
  Value value = input(i);
  return value ? llvm::cast<RankedTensorType>(value.getType()) : RankedTensorType();
}

const HostTensor *NodeContext::constantInput(int i) {
  if (!hasInput(i))
    return nullptr;
  auto it = importer.values.find(node.input(i));
  if (it == importer.values.end() || !it->second.constant)
    return nullptr;
  return &*it->second.constant;
}

const HostTensor *NodeContext::requireConstant(int i, StringRef what) {
  const HostTensor *constant = constantInput(i);
  if (!constant)
    (void)fail(what + " (input " + Twine(i) + ", '" +
               (hasInput(i) ? node.input(i) : std::string("absent")) +
               "') must be a constant once shapes are bound; it depends on data");
  return constant;
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

bool NodeContext::hasAttr(StringRef name) const { return attr(name) != nullptr; }

int64_t NodeContext::attrInt(StringRef name, int64_t fallback) const {
  const auto *a = attr(name);
  return a ? a->i() : fallback;
}

float NodeContext::attrFloat(StringRef name, float fallback) const {
  const auto *a = attr(name);
  return a ? a->f() : fallback;
}

std::string NodeContext::attrString(StringRef name, StringRef fallback) const {
  const auto *a = attr(name);
  return a ? a->s() : fallback.str();
}

std::optional<std::vector<int64_t>> NodeContext::attrInts(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

void NodeContext::setOutput(int i, Value value) {
  if (hasOutput(i))
    importer.values[node.output(i)].value = value;
}

void NodeContext::setOutputConstant(int i, HostTensor constant) {
  if (hasOutput(i))
    importer.values[node.output(i)].constant = std::move(constant);
}

Operation *NodeContext::create(StringRef opName, ValueRange operands,
                               ArrayRef<NamedAttribute> attributes, unsigned numResults) {
  if (llvm::any_of(operands, [](Value v) { return !v; }))
    return nullptr;
  OperationState state(loc, opName);
  state.addOperands(operands);
  state.addAttributes(attributes);
  // AttrSizedOperandSegments ops take their segment sizes from the caller.
  state.addTypes(SmallVector<Type>(numResults, NoneType::get(context())));
  Operation *op = builder().create(state);
  SmallVector<Type> types;
  std::string reason;
  {
    // Shape inference reports through diagnostics; capture its message so the
    // error names this node rather than an anonymous location.
    ScopedDiagnosticHandler capture(context(), [&](Diagnostic &diag) {
      if (reason.empty())
        reason = diag.str();
      return success();
    });
    auto inference = llvm::cast<InferTypeOpInterface>(op);
    if (failed(inference.inferReturnTypes(context(), loc, op->getOperands(),
                                          op->getRawDictionaryAttrs(),
                                          op->getPropertiesStorage(), op->getRegions(), types)))
      types.clear();
  }
  if (types.size() != numResults) {
    op->erase();
    (void)fail(reason.empty() ? std::string("invalid operands") : reason);
    return nullptr;
  }
  for (Type type : types)
    if (!isReasonableType(type)) {
      op->erase();
      (void)fail("the result would hold more than 2^48 elements");
      return nullptr;
    }
  for (auto [result, type] : llvm::zip(op->getResults(), types))
    result.setType(type);
  return op;
}

Operation *NodeContext::createTyped(StringRef opName, ValueRange operands, Type resultType) {
  if (llvm::any_of(operands, [](Value v) { return !v; }))
    return nullptr;
  if (!isReasonableType(resultType)) {
    (void)fail("the result would hold more than 2^48 elements");
    return nullptr;
  }
  OperationState state(loc, opName);
  state.addOperands(operands);
  state.addTypes(resultType);
  return builder().create(state);
}

} // namespace colossal::import
