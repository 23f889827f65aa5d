//===- RereadParameters.h - when the step reads each weight ----------*- C++ -*-===//
//
// A `train.param` read is where a program fetches a parameter, and it stays
// fetched until the last use of that read. Whole weights are cheap when
// every rank keeps them, but under ZeRO-3 a fetch is an all-gather and a
// fetched weight occupies memory: a read in the forward pass whose uses
// extend into the backward pass would keep the weight whole across the
// whole step. `train-reread-parameters` gives the backward pass its own
// read, placed before its first use there, so each weight is whole twice,
// briefly (the ZeRO-3 schedule: gather for the forward, free, gather again
// for the backward). The backward pass is what follows the op that computes
// the loss in @forward_backward.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_MEMORY_REREADPARAMETERS_H
#define COLOSSAL_PASSES_MEMORY_REREADPARAMETERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringSet.h"

#include <memory>

namespace colossal::memory {

/// Splits every parameter read of @forward_backward used on both sides of
/// the loss into a forward read and a backward read. Fails with a
/// diagnostic when the module has no @forward_backward.
mlir::LogicalResult rereadParametersForBackward(mlir::ModuleOp module);

/// The parameters @forward_backward uses after its loss (the weights the
/// backward pass needs, whichever read they come from).
llvm::StringSet<> parametersReadByBackward(mlir::func::FuncOp forwardBackward);


} // namespace colossal::memory

#endif // COLOSSAL_PASSES_MEMORY_REREADPARAMETERS_H
