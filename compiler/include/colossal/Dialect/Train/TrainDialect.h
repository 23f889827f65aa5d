//===- TrainDialect.h - the train dialect -------------------*- C++ -*-===//

#ifndef COLOSSAL_DIALECT_TRAIN_TRAINDIALECT_H
#define COLOSSAL_DIALECT_TRAIN_TRAINDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "colossal/Dialect/Dist/DistDialect.h"
#include "colossal/Dialect/Train/ShardingRule.h"

#include "colossal/Dialect/Train/TrainDialect.h.inc"
#include "colossal/Dialect/Train/ShardingRuleInterface.h.inc"

namespace colossal::train {

/// Infers the numpy-broadcast shape of `operands`; the element type is the
/// operands' (which must agree) unless `resultElementType` is given.
llvm::LogicalResult inferBroadcastResult(std::optional<mlir::Location> location,
                                         llvm::ArrayRef<mlir::Value> operands,
                                         mlir::Type resultElementType,
                                         llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Numpy broadcasting of two shapes; false when they do not broadcast.
bool broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                     llvm::SmallVectorImpl<int64_t> &result);

/// Normalises a possibly negative axis against `rank`; -1 when out of range.
int64_t normalizeAxis(int64_t axis, int64_t rank);

} // namespace colossal::train

#define GET_OP_CLASSES
#include "colossal/Dialect/Train/TrainOps.h.inc"

#endif // COLOSSAL_DIALECT_TRAIN_TRAINDIALECT_H
