//===- Checkpoint.h - sharded checkpoints with an index -----------*- C++ -*-===//
//
// A checkpoint is a directory: one safetensors file per rank
// (rank-00003-of-00008.safetensors) holding that rank's shards, and
// index.json, written last by rank 0, which records the step, each file's
// size and CRC-32, and for every tensor its global shape and the offsets and
// shape of each rank's shard, so a later version can reshard on load. Every
// file is written atomically; the index is the commit point, and any file
// that does not match it is refused.
//
// Loading is collective: if any rank cannot load its shard, every rank fails
// (the others say which rank), so no rank trains on while a peer is missing.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_CHECKPOINT_H
#define COLOSSAL_RUNTIME_CHECKPOINT_H

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/io/Safetensors.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace colossal::rt {

/// One rank's part of a tensor: `view.shape` elements starting at `offsets`
/// of a tensor of `globalShape`. An unsharded tensor has zero offsets and
/// its full shape.
struct Shard {
  TensorView view;
  std::vector<int64_t> globalShape;
  std::vector<int64_t> offsets;
  /// A grouped shard: along `groupDim` the view is `groups` equal parts,
  /// part g at offsets + g x (the global dimension / groups) (a fused QKV
  /// projection's slice: the rank's heads of query, key and value).
  int64_t groups = 1, groupDim = -1;
};

/// Collective over `world`. `info` (free-form strings: optimizer settings,
/// the data position) is stored in the index.
void saveCheckpoint(const std::string &directory, Communicator &world, int64_t step,
                    const std::vector<Shard> &shards, const std::map<std::string, std::string> &info = {});

class LoadedCheckpoint {
public:
  /// Collective over `world`; refuses a checkpoint written by another number
  /// of ranks, a missing or corrupt file, or a file that is not the one the
  /// index names.
  static LoadedCheckpoint load(const std::string &directory, Communicator &world);

  int64_t step() const { return step_; }
  const std::map<std::string, std::string> &info() const { return info_; }
  /// This rank's shard file.
  const SafetensorsFile &shard() const { return *file_; }

private:
  int64_t step_ = 0;
  std::map<std::string, std::string> info_;
  std::unique_ptr<SafetensorsFile> file_;
};

std::string checkpointFileName(int rank, int worldSize);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_CHECKPOINT_H
