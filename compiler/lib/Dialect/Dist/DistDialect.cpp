//===- DistDialect.cpp - the dist dialect and its attributes ----*- C++ -*-===//

#include "colossal/Dialect/Dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace colossal::dist;

#include "colossal/Dialect/Dist/DistDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "colossal/Dialect/Dist/DistAttrs.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "colossal/Dialect/Dist/DistOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "colossal/Dialect/Dist/DistAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// #dist.sharding
//===----------------------------------------------------------------------===//

namespace {

ArrayAttr namesAttr(MLIRContext *context, const std::vector<std::string> &names) {
  SmallVector<Attribute> attrs;
  for (const std::string &name : names)
    attrs.push_back(StringAttr::get(context, name));
  return ArrayAttr::get(context, attrs);
}

std::vector<std::string> namesOf(ArrayAttr attr) {
  std::vector<std::string> names;
  for (Attribute a : attr)
    names.push_back(llvm::cast<StringAttr>(a).str());
  return names;
}

/// An axis name, and axes joined by `separator` (`*` within a dimension, `,`
/// in sum(...) and copies(...)).
ParseResult parseAxes(AsmParser &parser, std::vector<std::string> &axes, bool starSeparated) {
  do {
    std::string axis;
    if (parser.parseKeywordOrString(&axis))
      return failure();
    axes.push_back(axis);
  } while (starSeparated ? succeeded(parser.parseOptionalStar()) : succeeded(parser.parseOptionalComma()));
  return success();
}

} // namespace

ShardingAttr ShardingAttr::get(MLIRContext *context, const Layout &layout) {
  SmallVector<Attribute> dims;
  for (const std::vector<std::string> &dim : layout.dims)
    dims.push_back(namesAttr(context, dim));
  return get(context, ArrayAttr::get(context, dims), namesAttr(context, layout.sums),
             namesAttr(context, layout.copies));
}

Layout ShardingAttr::getLayout() const {
  Layout layout;
  for (Attribute dim : getDims())
    layout.dims.push_back(namesOf(llvm::cast<ArrayAttr>(dim)));
  layout.sums = namesOf(getSums());
  layout.copies = namesOf(getCopies());
  return layout;
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr dims, ArrayAttr sums,
                                   ArrayAttr copies) {
  std::vector<llvm::StringRef> seen;
  auto check = [&](ArrayAttr names) -> LogicalResult {
    for (Attribute a : names) {
      auto name = llvm::dyn_cast<StringAttr>(a);
      if (!name || !isMeshAxisName(name.getValue()))
        return emitError() << "a sharding names mesh axes (letters, digits, '_'), not " << a;
      if (llvm::is_contained(seen, name.getValue()))
        return emitError() << "mesh axis '" << name.getValue() << "' appears twice in the sharding";
      seen.push_back(name.getValue());
    }
    return success();
  };
  for (Attribute dim : dims) {
    auto names = llvm::dyn_cast<ArrayAttr>(dim);
    if (!names)
      return emitError() << "a sharding's dimension is a list of mesh axes, not " << dim;
    if (failed(check(names)))
      return failure();
  }
  return failure(failed(check(sums)) || failed(check(copies)));
}

// `<[-, tp, sp*tp] sum(dp) copies(tp)>`
Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  Layout layout;
  if (parser.parseLess() || parser.parseLSquare())
    return {};
  if (failed(parser.parseOptionalRSquare())) {
    do {
      std::vector<std::string> axes;
      if (failed(parser.parseOptionalMinus()) && failed(parseAxes(parser, axes, /*starSeparated=*/true)))
        return {};
      layout.dims.push_back(std::move(axes));
    } while (succeeded(parser.parseOptionalComma()));
    if (parser.parseRSquare())
      return {};
  }
  while (true) {
    std::vector<std::string> *list = nullptr;
    if (succeeded(parser.parseOptionalKeyword("sum")))
      list = &layout.sums;
    else if (succeeded(parser.parseOptionalKeyword("copies")))
      list = &layout.copies;
    else
      break;
    if (parser.parseLParen() || parseAxes(parser, *list, /*starSeparated=*/false) || parser.parseRParen())
      return {};
  }
  if (parser.parseGreater())
    return {};
  SmallVector<Attribute> dims;
  MLIRContext *context = parser.getContext();
  for (const std::vector<std::string> &dim : layout.dims)
    dims.push_back(namesAttr(context, dim));
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, context, ArrayAttr::get(context, dims),
                    namesAttr(context, layout.sums), namesAttr(context, layout.copies));
}

void ShardingAttr::print(AsmPrinter &printer) const { printer << "<" << getLayout().str() << ">"; }
