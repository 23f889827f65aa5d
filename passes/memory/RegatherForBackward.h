//===- RegatherForBackward.h - gathering a sequence shard again for the backward -*- C++ -*-===//
//
// Under Megatron sequence parallelism a tensor-parallel block's input lives
// split by tokens and is all-gathered at the block's entry; the block's
// column-parallel layers keep that gathered input for their weight
// gradients. Keeping it whole would hold t times the shard from the forward
// pass to the backward. Megatron-LM keeps the shard and gathers it again
// in the backward pass (Korthikanti et al. 2022, section 4.2.2), and so
// does this: `train-regather-for-backward` gives the backward pass its own
// all-gather of each gathered value it reads, placed just before its first
// use there. The forward gather's result is then freed after its forward
// uses; the backward gathers the same shard, so the values are bit for bit
// the same. The cost model charges this second gather (OpCost.cpp), so
// the bytes the program moves are the plan's.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_MEMORY_REGATHERFORBACKWARD_H
#define COLOSSAL_PASSES_MEMORY_REGATHERFORBACKWARD_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace colossal::memory {

/// Gives the backward pass of @forward_backward its own copy of every
/// forward `dist.all_gather` over mesh axis `axis` that it reads; returns
/// how many gathers were added. Fails with a diagnostic when the module has
/// no @forward_backward.
mlir::FailureOr<int64_t> regatherForBackward(mlir::ModuleOp module, llvm::StringRef axis);


} // namespace colossal::memory

#endif // COLOSSAL_PASSES_MEMORY_REGATHERFORBACKWARD_H
