//===- ShardingRule.h - einsum-like factor rules of train ops --*- C++ -*-===//
//
// A sharding factor rule says which "factors" index each dimension of an op's
// operands and results. Splitting a factor over a mesh axis splits every
// dimension it indexes; the rule's factor kinds tell the planner what that
// costs:
//
//   matmul  [b, m, k] x [b, k, n] -> [b, m, n]
//     factors: b (parallel), m (parallel), n (parallel), k (reduction)
//   splitting k leaves the result as a pending partial sum over that axis
//   (one all-reduce or reduce-scatter resolves it); splitting b, m or n needs
//   nothing.
//
// `whole` factors may only be split by a special algorithm registered later
// (ring attention over the key length, vocabulary-parallel cross-entropy over
// the class axis); the default planner keeps them replicated.
//
// The same vocabulary as Shardy's OpShardingRuleAttr and GSPMD's dot
// dimension numbers, kept free of MLIR attributes so that the bridge into the
// cost model can copy it as plain data.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_DIALECT_TRAIN_SHARDINGRULE_H
#define COLOSSAL_DIALECT_TRAIN_SHARDINGRULE_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace mlir {
class Operation;
} // namespace mlir

namespace colossal::train {

enum class FactorKind { Parallel, Reduction, Whole };

struct ShardingFactor {
  int64_t size;
  FactorKind kind;
};

/// The factors indexing one tensor dimension, major first; empty for a
/// broadcast (size-1) dimension that no factor indexes.
using DimFactors = llvm::SmallVector<int, 2>;
using TensorFactors = llvm::SmallVector<DimFactors, 4>;

struct ShardingRule {
  llvm::SmallVector<ShardingFactor, 8> factors;
  llvm::SmallVector<TensorFactors, 4> operands;
  llvm::SmallVector<TensorFactors, 2> results;

  int addFactor(int64_t size, FactorKind kind) {
    factors.push_back({size, kind});
    return static_cast<int>(factors.size()) - 1;
  }

  /// Prints the rule as `([i, j], [j, k]) -> ([i, k]) {i=8, j=16 reduction,
  /// k=4}`, with factor names i, j, k, ... in creation order; a dimension
  /// indexed by several factors prints them joined (`ij`), a broadcast
  /// dimension prints `1`.
  void print(llvm::raw_ostream &os) const;
  std::string str() const;
};

/// Computes the rule of a train op (the default of ShardingRuleOpInterface).
ShardingRule computeShardingRule(mlir::Operation *op);

} // namespace colossal::train

#endif // COLOSSAL_DIALECT_TRAIN_SHARDINGRULE_H
