//===- KernelRates.h - what a device's kernels achieve, by shape and kind -*- C++ -*-===//
//
// A roofline at peak rates is far from what small kernels reach: on a host
// a 128 x 256 x 256 product runs at a fraction of a square 2048 one's rate,
// and a layer norm pays a call (allocating and filling its result) before
// its bytes. A measured description (colossal-bench) holds:
//   - GEMM efficiency on a grid of shapes (m, n, k), read between grid
//     points on a log scale; a batched product is `batch` calls,
//   - the fused attention kernel's efficiency (the whole score matrix's
//     FLOPs over its time) by key length, forward and backward, without a
//     mask and causal, and the ring kernel's (sequence parallelism's,
//     measured on a ring of one rank without a mask),
//   - memory-bound kernels by kind: a call's overhead plus the forward op's
//     bytes over an achieved rate, for the forward and for the backward (the
//     backward's own traffic differs by kind; its rate folds that in),
//   - the optimizer's achieved bytes per second over its traffic, on the
//     device and on the host (an offloaded optimizer),
//   - how much faster kernels run when a node's other devices are idle (a
//     host's processes share memory bandwidth and caches; every rate above
//     is measured with all of them busy).
// A description without them (the GPU presets) is costed by the roofline.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_KERNELRATES_H
#define COLOSSAL_COST_KERNELRATES_H

#include "colossal/cost/Curve.h"

#include <map>
#include <string>
#include <vector>

namespace colossal::cost {

/// The memory-bound kernels, by what they compute per byte.
enum class KernelKind { Elementwise, Transcendental, Norm, Softmax, Loss, Embedding };

const char *nameOf(KernelKind kind);
const std::vector<KernelKind> &allKernelKinds();

struct GemmShapePoint {
  double m, n, k;
  /// Fraction of the data type's peak.
  double efficiency;
};

/// A memory-bound kernel: a call's overhead plus bytes over a rate.
struct StreamingCost {
  double callSeconds = 0, bytesPerSecond = 1;
  double seconds(double bytes) const { return callSeconds + bytes / bytesPerSecond; }
};

/// Both passes of one kind, by the forward op's bytes (inputs and outputs).
struct StreamingRate {
  StreamingCost forward, backward;
};

struct KernelRates {
  /// Sorted by (m, n, k); a full grid over the values it lists.
  std::vector<GemmShapePoint> gemm;
  std::vector<CurvePoint> attentionForward, attentionBackward, causalAttentionForward, causalAttentionBackward;
  std::vector<CurvePoint> ringAttentionForward, ringAttentionBackward;
  std::map<KernelKind, StreamingRate> streaming;
  /// The optimizer step's traffic (ModelStates.cpp) per second: on the
  /// device, and on the host's cores for an offloaded optimizer (the same
  /// on a host cluster).
  double optimizerBytesPerSecond = 0, hostOptimizerBytesPerSecond = 0;
  /// Kernel throughput with one device of the node busy over that with all
  /// busy (1 on a GPU node, whose devices share nothing kernels use).
  double aloneSpeedupGemm = 1, aloneSpeedupStreaming = 1, aloneSpeedupOptimizer = 1;

  bool empty() const {
    return gemm.empty() && attentionForward.empty() && streaming.empty() && optimizerBytesPerSecond == 0 &&
           hostOptimizerBytesPerSecond == 0;
  }
  /// Sorts `gemm` and indexes its grid: call after filling it.
  void indexGemmGrid();
  /// Efficiency of one [m, k] x [k, n] product, multilinear in the logs of
  /// the sizes between grid points, clamped at the grid's edges.
  double gemmEfficiency(double m, double n, double k) const;
  const StreamingRate *streamingOf(KernelKind kind) const {
    auto it = streaming.find(kind);
    return it == streaming.end() ? nullptr : &it->second;
  }
  /// Kernels' speedup when `busy` of a node's `perNode` devices compute
  /// (linear between all busy and one busy; a plan spanning a node or more
  /// keeps all busy).
  double speedupWhenBusy(double alone, int busy, int perNode) const;

  Json toJson() const;
  /// Reads the "kernels" object; `error` names the offending field.
  static KernelRates fromJson(const Json &json, const std::string &path, std::string &error);

private:
  /// The values of m, n and k the grid lists, ascending.
  std::vector<double> gridM, gridN, gridK;
};

} // namespace colossal::cost

#endif // COLOSSAL_COST_KERNELRATES_H
