//===- ParameterSlices.h - parameters cut into per-rank slices ---*- C++ -*-===//
//
// What tensor parallelism's splits share: a weight operand seen back through
// transposes to the parameter it reads, and the rewrite that makes that
// parameter (and the views of it) one rank's slice along a dimension.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_PARAMETERSLICES_H
#define COLOSSAL_PASSES_PARTITION_PARAMETERSLICES_H

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace colossal::partition {

inline mlir::RankedTensorType typeOf(mlir::Value v) { return mlir::cast<mlir::RankedTensorType>(v.getType()); }

/// Elementwise ops a split value passes through unchanged in shape.
bool isSliceWise(mlir::Operation *op);

/// `type` with dimension `dim` of size `size`.
mlir::RankedTensorType withDim(mlir::RankedTensorType type, int64_t dim, int64_t size);

/// A weight or bias operand as a parameter read seen through transposes:
/// dimension `dim` of the operand is dimension `parameterDim` of the
/// parameter. Each op on the way is used once, so splitting it splits only
/// this use.
struct SplitOperand {
  train::ParamOp read;
  int64_t parameterDim = 0;
  llvm::SmallVector<train::TransposeOp> views; // from the read outwards
  /// Split in this many equal groups along the dimension, each split by the
  /// ranks (a fused QKV projection: query, key and value).
  int64_t groups = 1;
  /// Rows of zeros appended along the dimension first, so that the ranks
  /// divide it (a padded vocabulary).
  int64_t padding = 0;
};

/// The parameter read that `value`'s dimension `dim` comes from, through
/// single-use transposes; none when something else computes it.
std::optional<SplitOperand> traceToParameter(mlir::Value value, int64_t dim);

/// Makes the parameter of `operand` one of `ranks` slices along its
/// dimension `operand.parameterDim` (recording `split_dim`, `splits` and,
/// for a grouped split, `split_groups`), with the read and the transposes
/// after it retyped to match.
void splitParameter(mlir::SymbolTable &parameters, const SplitOperand &operand, int64_t ranks);

/// Which dimensions of `from` make up each dimension of `to` in a reshape
/// (row-major grouping), as [first, last) of `from` for each of `to`;
/// empty when the shapes do not group.
std::optional<llvm::SmallVector<std::pair<int64_t, int64_t>>> reshapeGroups(llvm::ArrayRef<int64_t> from,
                                                                            llvm::ArrayRef<int64_t> to);

/// `transpose`'s result type recomputed from its (retyped) input.
void retypeTranspose(train::TransposeOp transpose);

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_PARAMETERSLICES_H
