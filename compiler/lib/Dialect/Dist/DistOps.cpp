//===- DistOps.cpp - the dist dialect's verifiers and accessors -----------===//

#include "colossal/Dialect/Dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace colossal::dist;

#define GET_OP_CLASSES
#include "colossal/Dialect/Dist/DistOps.cpp.inc"

static RankedTensorType rankedType(Value value) { return llvm::cast<RankedTensorType>(value.getType()); }

Layout ReshardOp::getFromLayout() { return getFrom().getLayout(); }
Layout ReshardOp::getToLayout() { return getTo().getLayout(); }

bool ReshardOp::movesNothing() {
  Layout from = getFromLayout(), to = getToLayout();
  return from.dims == to.dims && from.sums == to.sums;
}

LogicalResult ReshardOp::verify() {
  RankedTensorType input = rankedType(getInput()), result = rankedType(getResult());
  if (input.getElementType() != result.getElementType() || input.getRank() != result.getRank())
    return emitOpError() << "moves " << input << " into " << result
                         << ": a resharding keeps the element type and the rank";
  std::optional<Layout> from = getFromLayout(), to = getToLayout();
  for (auto [name, layout] : {std::pair<const char *, const Layout *>{"from", &*from}, {"to", &*to}})
    if (int64_t(layout->dims.size()) != input.getRank())
      return emitOpError() << name << " = " << layout->str() << ": the layout has " << layout->dims.size()
                           << " dimension(s), the value " << input.getRank();
  auto sizeOf = [&](llvm::StringRef axis) -> int64_t {
    auto size = llvm::dyn_cast_if_present<IntegerAttr>(getMesh().get(axis));
    return size ? size.getInt() : 0;
  };
  for (const Layout *layout : {&*from, &*to}) {
    std::vector<std::string> named = layout->sums;
    named.insert(named.end(), layout->copies.begin(), layout->copies.end());
    for (const auto &dim : layout->dims)
      named.insert(named.end(), dim.begin(), dim.end());
    for (const std::string &axis : named)
      if (sizeOf(axis) < 1)
        return emitOpError() << "mesh axis '" << axis << "' has no size in mesh = " << getMesh();
  }
  // Neither direction invents a pending sum: the forward's sums come from
  // the input's, and so do the gradient's (the dual: copies).
  for (const std::string &axis : to->sums)
    if (!llvm::is_contained(from->sums, axis))
      return emitOpError() << "makes the value a partial sum over '" << axis
                           << "', which it is not in the input (a resharding cannot create one)";
  for (const std::string &axis : from->copies)
    if (!llvm::is_contained(to->copies, axis))
      return emitOpError() << "the input is read as copies over '" << axis
                           << "' and the result is not: the gradient would have to create a partial sum";
  // The result is the input's whole value cut by `to`.
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t whole = input.getDimSize(d), parts = 1;
    for (const std::string &axis : from->dims[size_t(d)])
      whole *= sizeOf(axis);
    for (const std::string &axis : to->dims[size_t(d)])
      parts *= sizeOf(axis);
    if (whole % parts != 0 || result.getDimSize(d) != whole / parts)
      return emitOpError() << "dimension " << d << " is " << whole << " whole (" << input.getDimSize(d)
                           << " per rank under the input's layout), so " << parts << " part(s) of it under '"
                           << to->str() << "' are " << (whole % parts ? "not whole numbers" : std::to_string(whole / parts))
                           << ", not " << result.getDimSize(d);
  }
  return success();
}
