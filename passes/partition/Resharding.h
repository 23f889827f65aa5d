//===- Resharding.h - dist.reshard: how values lie on the mesh ----*- C++ -*-===//
//
// The partitioning passes say how values lie on the mesh and leave the
// collectives to one place: they insert `dist.reshard` ops between layouts
// (colossal/Dialect/Dist/Layout.h), train-autodiff differentiates them
// (the reshard between the dual layouts), and train-lower-resharding turns
// every one into the single-axis collectives the cost model's resharding
// plan names (cost/Resharding.h), so the bytes the search priced are the
// bytes the program moves. Megatron's pair is two layouts: a replicated
// value entering a split region is `[...] -> [...] copies(tp)` (nothing
// moves; its gradient is summed), a row-parallel layer's output is
// `[...] sum(tp) -> [...]` (an all-reduce); Megatron's sequence parallelism
// only changes those layouts to split the tokens.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PARTITION_RESHARDING_H
#define COLOSSAL_PASSES_PARTITION_RESHARDING_H

#include "colossal/Dialect/Dist/Layout.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace colossal::partition {

/// The `dist.mesh` of `module` with the one axis `axis` of `ranks` ranks,
/// declared at the module's start when it has none.
mlir::FlatSymbolRefAttr meshOf(mlir::ModuleOp module, llvm::StringRef axis, int64_t ranks);

/// `input` (laid out by `from`) as a value of `resultType` laid out by `to`
/// on a mesh whose axis `axis` has `ranks` ranks.
mlir::Value reshard(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value input, mlir::RankedTensorType resultType,
                    const dist::Layout &from, const dist::Layout &to, llvm::StringRef axis, int64_t ranks);

/// A replicated value read differently by each rank of `axis` (Megatron's
/// "f": the identity; its gradient is summed over the axis).
mlir::Value copyToRanks(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value value, llvm::StringRef axis,
                        int64_t ranks);
/// The ranks' partial sums over `axis`, summed (Megatron's "g").
mlir::Value sumOverRanks(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value partial, llvm::StringRef axis,
                         int64_t ranks);

/// Whether `op` reshards a whole value into copies over `axis` and nothing
/// else (copyToRanks), or a partial sum over `axis` into a whole value
/// (sumOverRanks).
bool isCopyToRanks(dist::ReshardOp op, llvm::StringRef axis);
bool isSumOverRanks(dist::ReshardOp op, llvm::StringRef axis);


} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_RESHARDING_H
