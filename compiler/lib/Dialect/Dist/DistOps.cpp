//===- DistOps.cpp - the dist dialect's verifiers and accessors -----------===//

#include "colossal/Dialect/Dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace colossal::dist;

#define GET_OP_CLASSES
#include "colossal/Dialect/Dist/DistOps.cpp.inc"

static RankedTensorType rankedType(Value value) { return llvm::cast<RankedTensorType>(value.getType()); }

Layout ReshardOp::getFromLayout() { return getFrom().getLayout(); }
Layout ReshardOp::getToLayout() { return getTo().getLayout(); }

bool ReshardOp::movesNothing() {
  // A layout's dimensions and sums are its attribute's arrays name for
  // name, and attributes are uniqued: equal arrays, equal layouts.
  ShardingAttr from = getFrom(), to = getTo();
  return from.getDims() == to.getDims() && from.getSums() == to.getSums();
}

std::vector<std::pair<std::string, int64_t>> ReshardOp::getMeshAxes() {
  std::vector<std::pair<std::string, int64_t>> axes;
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr());
  if (!mesh)
    return axes;
  for (auto [axis, size] : llvm::zip(mesh.getAxes(), mesh.getSizes()))
    axes.push_back({llvm::cast<StringAttr>(axis).str(), size});
  return axes;
}

LogicalResult ReshardOp::verify() {
  RankedTensorType input = rankedType(getInput()), result = rankedType(getResult());
  if (input.getElementType() != result.getElementType() || input.getRank() != result.getRank())
    return emitOpError() << "moves " << input << " into " << result
                         << ": a resharding keeps the element type and the rank";
  Layout from = getFromLayout(), to = getToLayout();
  for (auto [name, layout] : {std::pair<const char *, const Layout *>{"from", &from}, {"to", &to}})
    if (int64_t(layout->dims.size()) != input.getRank())
      return emitOpError() << name << " = " << layout->str() << ": the layout has " << layout->dims.size()
                           << " dimension(s), the value " << input.getRank();
  // Neither direction invents a pending sum: the forward's sums come from
  // the input's, and so do the gradient's (the dual: copies).
  for (const std::string &axis : to.sums)
    if (!llvm::is_contained(from.sums, axis))
      return emitOpError() << "makes the value a partial sum over '" << axis
                           << "', which it is not in the input (a resharding cannot create one)";
  for (const std::string &axis : from.copies)
    if (!llvm::is_contained(to.copies, axis))
      return emitOpError() << "the input is read as copies over '" << axis
                           << "' and the result is not: the gradient would have to create a partial sum";
  return success();
}

LogicalResult ReshardOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr());
  if (!mesh)
    return emitOpError() << "mesh " << getMeshAttr() << " is not a dist.mesh of the module";
  RankedTensorType input = rankedType(getInput()), result = rankedType(getResult());
  Layout from = getFromLayout(), to = getToLayout();
  for (const Layout *layout : {&from, &to}) {
    std::vector<std::string> named = layout->sums;
    named.insert(named.end(), layout->copies.begin(), layout->copies.end());
    for (const auto &dim : layout->dims)
      named.insert(named.end(), dim.begin(), dim.end());
    for (const std::string &axis : named)
      if (mesh.sizeOf(axis) < 1)
        return emitOpError() << "mesh axis '" << axis << "' has no size in mesh " << getMeshAttr();
  }
  // The result is the input's whole value cut by `to`.
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t whole = input.getDimSize(d), parts = 1;
    for (const std::string &axis : from.dims[size_t(d)])
      whole *= mesh.sizeOf(axis);
    for (const std::string &axis : to.dims[size_t(d)])
      parts *= mesh.sizeOf(axis);
    if (whole % parts != 0 || result.getDimSize(d) != whole / parts)
      return emitOpError() << "dimension " << d << " is " << whole << " whole (" << input.getDimSize(d)
                           << " per rank under the input's layout), so " << parts << " part(s) of it under '"
                           << to.str() << "' are "
                           << (whole % parts ? "not whole numbers" : std::to_string(whole / parts)) << ", not "
                           << result.getDimSize(d);
  }
  return success();
}

int64_t MeshOp::sizeOf(llvm::StringRef axis) {
  for (auto [name, size] : llvm::zip(getAxes(), getSizes()))
    if (llvm::cast<StringAttr>(name).getValue() == axis)
      return size;
  return 0;
}

LogicalResult MeshOp::verify() {
  if (getAxes().size() != getSizes().size())
    return emitOpError() << "has " << getAxes().size() << " axes and " << getSizes().size() << " sizes";
  std::vector<llvm::StringRef> seen;
  for (auto [name, size] : llvm::zip(getAxes(), getSizes())) {
    llvm::StringRef axis = llvm::cast<StringAttr>(name).getValue();
    if (!isMeshAxisName(axis))
      return emitOpError() << "axis '" << axis << "' is not a mesh axis name (letters, digits, '_')";
    if (llvm::is_contained(seen, axis))
      return emitOpError() << "axis '" << axis << "' appears twice";
    seen.push_back(axis);
    if (size < 1)
      return emitOpError() << "axis '" << axis << "' has " << size << " ranks";
  }
  std::optional<ArrayRef<int64_t>> perNode = getPerNode();
  if (!perNode)
    return success();
  if (perNode->size() != getSizes().size())
    return emitOpError() << "has " << getAxes().size() << " axes and " << perNode->size() << " per_node entries";
  for (auto [name, size, onNode] : llvm::zip(getAxes(), getSizes(), *perNode))
    if (onNode < 1 || size % onNode != 0)
      return emitOpError() << "axis '" << llvm::cast<StringAttr>(name).getValue() << "' of " << size
                           << " ranks cannot have " << onNode << " of a group on one node";
  return success();
}

/// The shapes of a grid product's blocks: x [..., k], w [k, n], y [..., n].
static LogicalResult verifyGridProduct(Operation *op, Value input, Value weight, Value output, StringRef rowAxis,
                                       StringRef columnAxis, bool transposed) {
  RankedTensorType x = rankedType(input), w = rankedType(weight), y = rankedType(output);
  if (rowAxis == columnAxis)
    return op->emitOpError() << "needs two grid axes, and both are '" << rowAxis << "'";
  int64_t k = transposed ? 1 : 0;
  if (w.getRank() != 2 || x.getRank() < 1 || x.getDimSize(x.getRank() - 1) != w.getDimSize(k))
    return op->emitOpError() << "multiplies blocks " << x << " and " << w << (transposed ? " (transposed)" : "")
                             << " whose inner dimensions do not match";
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = w.getDimSize(1 - k);
  if (y.getShape() != ArrayRef<int64_t>(shape) || y.getElementType() != x.getElementType())
    return op->emitOpError() << "makes " << y << " from blocks " << x << " and " << w;
  return success();
}

LogicalResult GridLinearOp::verify() {
  return verifyGridProduct(*this, getInput(), getWeight(), getResult(), getRowAxis(), getColumnAxis(),
                           getTransposeWeight());
}

LogicalResult GridLinearGradOp::verify() {
  if (getInputGrad().getType() != getInput().getType() || getWeightGrad().getType() != getWeight().getType())
    return emitOpError() << "returns gradients of types other than its input's and weight's";
  return verifyGridProduct(*this, getInput(), getWeight(), getOutputGrad(), getRowAxis(), getColumnAxis(),
                           getTransposeWeight());
}
