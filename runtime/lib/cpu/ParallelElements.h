//===- ParallelElements.h - elementwise updates on several threads -*- C++ -*-===//
//
// The host optimizers' work over millions of parameters (a GPT-2 124M step,
// an offloaded optimizer shard) spread over the cores this rank may use, in
// ways that give the same bits for any number of threads: elementwise
// updates by element ranges, each element computed alone; per-tensor sums
// (norms) a whole tensor to a thread, each summed in its own order. Small
// steps stay on the calling thread.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_CPU_PARALLELELEMENTS_H
#define COLOSSAL_RUNTIME_CPU_PARALLELELEMENTS_H

#include "colossal/runtime/kernels/Optimizers.h"

#include <functional>

namespace colossal::rt::cpu {

/// Calls body(tensor, begin, end) on element ranges that cover every tensor
/// once.
void forEachElementRange(const OptimizerTensor *tensors, int64_t count,
                         const std::function<void(const OptimizerTensor &, int64_t, int64_t)> &body);

/// Calls body(t) once for every tensor index, the largest tensors first.
void forEachTensor(const OptimizerTensor *tensors, int64_t count, const std::function<void(int64_t)> &body);

} // namespace colossal::rt::cpu

#endif // COLOSSAL_RUNTIME_CPU_PARALLELELEMENTS_H
