//===- CostGraphBridge.h - train IR to the cost model's graph --*- C++ -*-===//
//
// The one place that translates IR into `cost::Graph` (ARCHITECTURE.md): each
// op's factor rule comes from ShardingRuleOpInterface, its FLOPs from its
// kind and iteration space, and the tensors it keeps for backward from the
// conventions of the kernels it will lower to (a contraction keeps its
// activation inputs, an activation function its input, softmax its output,
// dropout its mask, a norm its input, fused attention q, k, v and its output).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PLAN_COSTGRAPHBRIDGE_H
#define COLOSSAL_PASSES_PLAN_COSTGRAPHBRIDGE_H

#include "colossal/cost/Graph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace colossal::plan {

/// Whether the cost graph counts `op` as an op: the train ops (by their
/// sharding rules), SUMMA's product of blocks, and a weight block gathered
/// for a product (isParameterGather).
bool isCostGraphOp(mlir::Operation *op);

/// A resharding that gathers a parameter (3D's weight block gathered over
/// tp_w): a cost-graph op named "dist.reshard", lowered after
/// differentiation to collectives the graph does not count.
bool isParameterGather(mlir::Operation *op);

struct CostGraphOptions {
  /// Every resharding that moves data (a gather, a slice, a pending sum
  /// completed), stated or lowered, as an op of its own: one rank's graph
  /// of a tensor grid, whose gathered and sliced blocks are values the
  /// step makes and ops keep for the backward pass. Off, such a value has
  /// no producer op, and layer detection follows it to its source's (the
  /// graph the partitioner's split is read back from).
  bool reshardingsAsOps = false;
  /// Only the ops, their factors' sizes and their tensors' dimensions: what
  /// reading a partitioner's split back takes (AppliedSharding.h). No
  /// FLOPs, kept tensors, gradients' paths, factor names or layers, which
  /// cost more to find than the rest on a model of a hundred layers.
  bool shapesOnly = false;
};

/// Builds the cost graph of `function`; ops without a sharding rule
/// (constants, parameter reads) become values, not ops. Its layers are the
/// repeated blocks LayerDetection.h finds. Fails with a
/// diagnostic on an element type the cost model cannot represent.
mlir::FailureOr<cost::Graph> buildCostGraph(mlir::func::FuncOp function, const CostGraphOptions &options = {});

} // namespace colossal::plan

#endif // COLOSSAL_PASSES_PLAN_COSTGRAPHBRIDGE_H
