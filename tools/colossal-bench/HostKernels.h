//===- HostKernels.h - what the host's kernels achieve ----------*- C++ -*-===//
//
// The kernels of emitted host programs, called as the programs call them
// (the runtime's host ops, each allocating its result): GEMM on a grid of
// shapes, the fused attention forward and backward, each memory-bound kind
// at three sizes (a call's overhead and a rate fitted by least squares), and
// a LAMB step (on the host target, the device optimizer and the offloaded
// one are the same). Every rank runs them at once, as a program's ranks do; a
// GEMM and a memory-bound kernel are timed again on rank 0 alone, for the
// speedup a rank sees when the node's other ranks are idle.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_BENCH_HOSTKERNELS_H
#define COLOSSAL_BENCH_HOSTKERNELS_H

#include "colossal/cost/KernelRates.h"
#include "colossal/runtime/comm/Communicator.h"

#include <vector>

namespace colossal::bench {

struct HostKernelMeasurements {
  struct Gemm {
    double m, n, k, flopsPerSecond;
  };
  struct Attention {
    bool causal, ring;
    double keys;
    /// The whole score matrix's FLOPs per second (backward: twice the forward's FLOPs).
    double forwardFlopsPerSecond, backwardFlopsPerSecond;
  };
  std::vector<Gemm> gemm;
  std::vector<Attention> attention;
  std::map<cost::KernelKind, cost::StreamingRate> streaming;
  double optimizerBytesPerSecond = 0;
  double aloneSpeedupGemm = 1, aloneSpeedupStreaming = 1, aloneSpeedupOptimizer = 1;

  double bestGemmRate() const;
  /// The rates with efficiencies over `peak` FLOP/s.
  cost::KernelRates rates(double peak) const;
};

HostKernelMeasurements measureHostKernels(rt::Communicator &world, bool quick);

/// A LAMB step on the host's cores, every rank at once: the cost model's
/// optimizer traffic per second (an offloaded optimizer's rate on a GPU node).
/// With `aloneSpeedup`, also how much faster it runs on rank 0 alone.
double measureHostOptimizer(rt::Communicator &world, bool quick, double *aloneSpeedup = nullptr);

} // namespace colossal::bench

#endif // COLOSSAL_BENCH_HOSTKERNELS_H
