//===- GradientDump.h - the first step's whole gradients, to compare -*- C++ -*-===//
//
// `model_train --dump-gradients DIR` writes the gradients of the first step
// (of the global batch's mean loss, unscaled) as whole tensors, one .npy per
// trainable parameter, whatever the strategy: ZeRO-2 and 3 shards are
// gathered over the data axis, tensor-parallel slices over the tensor axis.
// Every rank writes what it assembled (world rank 0 into DIR, rank k into
// DIR/rank-0000k), so each rank's copy can be compared with PyTorch's.
//
// The gradients are copied where the step leaves them, before the optimizer
// reads them (LAMB writes its update over them); the gathers run after the
// step is logged, so the dump's communication is not the step's.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_GRADIENTDUMP_H
#define COLOSSAL_RUNTIME_GRADIENTDUMP_H

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/train/ShardedOptimizer.h"
#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/train/StepInterface.h"

#include <string>
#include <vector>

namespace colossal::rt {

class GradientDump {
public:
  /// The whole gradient of each trainable tensor (this rank's slice of a
  /// split one), times `unscale`.
  static GradientDump ofTensors(const std::vector<Floats> &gradients, float unscale);
  /// ZeRO-2 and 3: this rank's shard of the flat gradients, times `unscale`.
  static GradientDump ofShard(const Floats &shard, float unscale);

  /// Gathers (collectives over the data axis for a shard, over `tp` for the
  /// split tensors; every rank of them calls it) and writes the files.
  /// `trainable` lists the program's trainable parameters in order.
  void write(const std::string &dir, const TrainingProgram &program, const std::vector<size_t> &trainable,
             ShardedOptimizer *sharded, Communicator *tp, int worldRank) const;

private:
  std::vector<Floats> tensors_;
  Floats shard_;
  bool sharded_ = false;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_GRADIENTDUMP_H
