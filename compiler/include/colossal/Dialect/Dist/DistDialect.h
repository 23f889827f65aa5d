//===- DistDialect.h - the dist dialect ----------------------*- C++ -*-===//

#ifndef COLOSSAL_DIALECT_DIST_DISTDIALECT_H
#define COLOSSAL_DIALECT_DIST_DISTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "colossal/Dialect/Dist/Layout.h"

#include "colossal/Dialect/Dist/DistDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "colossal/Dialect/Dist/DistAttrs.h.inc"

#define GET_OP_CLASSES
#include "colossal/Dialect/Dist/DistOps.h.inc"

#endif // COLOSSAL_DIALECT_DIST_DISTDIALECT_H
