//===- ParameterSlices.cpp ------------------------------------------------===//

#include "passes/partition/ParameterSlices.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace colossal::partition {

using namespace mlir;
using namespace colossal::train;

bool isSliceWise(Operation *op) {
  return isa<GeluOp, ReluOp, SiluOp, TanhOp, SigmoidOp, ErfOp, NegOp, AbsOp, ExpOp>(op);
}

RankedTensorType withDim(RankedTensorType type, int64_t dim, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape[size_t(dim)] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

std::optional<SplitOperand> traceToParameter(Value value, int64_t dim) {
  SmallVector<TransposeOp> views;
  while (true) {
    if (!value.hasOneUse())
      return std::nullopt;
    Operation *def = value.getDefiningOp();
    if (auto read = dyn_cast_or_null<ParamOp>(def)) {
      std::reverse(views.begin(), views.end());
      return SplitOperand{read, dim, views, 1, 0};
    }
    auto transpose = dyn_cast_or_null<TransposeOp>(def);
    if (!transpose)
      return std::nullopt;
    views.push_back(transpose);
    dim = transpose.getPerm()[size_t(dim)];
    value = transpose.getInput();
  }
}

std::optional<SmallVector<std::pair<int64_t, int64_t>>> reshapeGroups(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  SmallVector<std::pair<int64_t, int64_t>> groups;
  size_t f = 0;
  for (int64_t size : to) {
    size_t first = f;
    if (size == 1 && (f >= from.size() || from[f] != 1)) {
      groups.push_back({int64_t(f), int64_t(f)}); // an inserted 1
      continue;
    }
    int64_t product = 1;
    do {
      if (f >= from.size())
        return std::nullopt;
      product *= from[f++];
    } while (product < size);
    if (product != size)
      return std::nullopt;
    groups.push_back({int64_t(first), int64_t(f)});
  }
  while (f < from.size() && from[f] == 1)
    ++f;
  if (f != from.size())
    return std::nullopt;
  return groups;
}

void retypeTranspose(TransposeOp transpose) {
  RankedTensorType input = typeOf(transpose.getInput());
  SmallVector<int64_t> shape;
  for (int64_t p : transpose.getPerm())
    shape.push_back(input.getDimSize(p));
  transpose.getResult().setType(RankedTensorType::get(shape, input.getElementType()));
}

void splitParameter(SymbolTable &parameters, const SplitOperand &operand, int64_t ranks) {
  ParamOp read = operand.read;
  auto parameter = parameters.lookup<ParameterOp>(read.getName());
  RankedTensorType sliced =
      withDim(parameter.getTensorType(), operand.parameterDim,
              (parameter.getTensorType().getDimSize(operand.parameterDim) + operand.padding) / ranks);
  Builder b(parameter.getContext());
  parameter.setTypeAttr(TypeAttr::get(sliced));
  parameter.setSplitDimAttr(b.getI64IntegerAttr(operand.parameterDim));
  parameter.setSplitsAttr(b.getI64IntegerAttr(ranks));
  if (operand.groups > 1)
    parameter.setSplitGroupsAttr(b.getI64IntegerAttr(operand.groups));
  if (operand.padding > 0)
    parameter.setPaddingAttr(b.getI64IntegerAttr(operand.padding));
  read.getResult().setType(sliced);
  for (TransposeOp view : operand.views)
    retypeTranspose(view);
}

} // namespace colossal::partition
