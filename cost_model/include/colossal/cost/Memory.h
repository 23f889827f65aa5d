//===- Memory.h - per-rank memory by category -----------------------*- C++ -*-===//
//
// Model states follow ZeRO (Rajbhandari et al., SC'20): with Psi parameters,
// 16-bit weights and gradients and K bytes of optimizer state per parameter
// (K = 12 for mixed-precision Adam or LAMB: fp32 master weight, m and v),
// over a data-parallel degree Nd:
//
//   ZeRO-0  (2 + 2 + K) Psi        ZeRO-1  (2 + 2) Psi + K Psi / Nd
//   ZeRO-2  2 Psi + (2 + K) Psi / Nd   ZeRO-3  (2 + 2 + K) Psi / Nd
//
// (7.5B parameters at Nd = 64: 120, 31.4, 16.6 and 1.9 GB.) Offloading the
// optimizer moves the K Psi / Nd term to pinned host memory, where the update
// also needs fp32 gradients (4 Psi / Nd) and, when K holds no fp32 master
// (fp32 training), fp32 weights (4 Psi / Nd): 16 bytes per parameter of the
// shard for Adam either way (ZeRO-Offload, Ren et al., ATC'21). Activations are summed over
// the tensors each op keeps for backward (Graph.h), times the microbatches a
// pipeline rank holds at once (Pipeline.h).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_MEMORY_H
#define COLOSSAL_COST_MEMORY_H

#include "colossal/support/Json.h"

namespace colossal::cost {

using support::Json;

struct MemoryBreakdown {
  double parameters = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double communication = 0;
  double workspace = 0;
  /// Host memory (pinned) used by offload, not part of total(): the
  /// optimizer state, the fp32 gradients the host update reads, and the fp32
  /// weights it writes when the optimizer state holds no master copy.
  double hostOptimizer = 0;
  double hostGradients = 0;
  double hostParameters = 0;

  double host() const { return hostOptimizer + hostGradients + hostParameters; }

  double total() const {
    return parameters + gradients + optimizer + activations + communication + workspace;
  }
  Json toJson() const;
};

struct ModelStateBytes {
  double parameters, gradients, optimizer;
  double total() const { return parameters + gradients + optimizer; }
};

/// Model-state bytes per rank for `psi` parameters held by the rank's model
/// shard, data-parallel degree `nd`, ZeRO `stage`, `weightBytes` per weight
/// and gradient and `optimizerBytes` (K) per parameter.
ModelStateBytes zeroModelStates(double psi, int nd, int stage, double weightBytes = 2,
                                double optimizerBytes = 12);

} // namespace colossal::cost

#endif // COLOSSAL_COST_MEMORY_H
