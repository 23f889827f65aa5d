//===- TrainDialect.cpp - the train dialect ---------------------*- C++ -*-===//

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace colossal::train;

#include "colossal/Dialect/Train/TrainDialect.cpp.inc"
#include "colossal/Dialect/Train/ShardingRuleInterface.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "colossal/Dialect/Train/TrainOps.cpp.inc"
      >();
}

Operation *TrainDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                             Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
