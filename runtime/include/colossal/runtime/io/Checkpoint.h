//===- Checkpoint.h - sharded checkpoints with an index -----------*- C++ -*-===//
//
// A checkpoint is a directory: one safetensors file per rank
// (rank-00003-of-00008.safetensors) holding that rank's shards, and
// index.json, written last by rank 0, which records the step, each file's
// size and CRC-32, and for every tensor its global shape and the offsets and
// shape of each rank's shard. Loading reads the index and puts each tensor
// back together from whichever files hold its parts, so a checkpoint loads
// under any other number of ranks and any other split; any file that does
// not match the index is refused.
//
// A save is staged in DIR.saving and published as DIR in one step once every
// rank has written and the index is in place: a save that fails or is killed
// leaves the previous checkpoint at DIR as it was. Saving and loading are
// collective: if any rank fails, every rank fails (the others say which).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_CHECKPOINT_H
#define COLOSSAL_RUNTIME_CHECKPOINT_H

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/io/Safetensors.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
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
  /// The global tensor's last `padding` rows along `paddingDim` are zeros the
  /// split added (a vocabulary the ranks do not divide), not the model's.
  int64_t padding = 0, paddingDim = -1;
};

/// Collective over `world`. `info` (free-form strings: optimizer settings,
/// the data position) is stored in the index.
void saveCheckpoint(const std::string &directory, Communicator &world, int64_t step,
                    const std::vector<Shard> &shards, const std::map<std::string, std::string> &info = {});

/// A folder of checkpoints: each save in FOLDER/step-00000010, FOLDER/latest
/// naming the newest complete one, only the newest `keep` kept (0: all).
void saveCheckpointInFolder(const std::string &folder, Communicator &world, int64_t step,
                            const std::vector<Shard> &shards, const std::map<std::string, std::string> &info,
                            int64_t keep);

/// Whether a save may publish a checkpoint at `path` (or, with `folder`, a
/// folder of them): it is missing, empty, or holds only a checkpoint's files
/// (a folder's step-* and latest). A save never replaces anything else.
bool canHoldCheckpoint(const std::string &path, bool folder);

/// A tensor as a loading program wants it: whole, in its own global shape
/// (with its own padding, zero-filled).
struct WholeTensorRequest {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t padding = 0, paddingDim = -1;
};

struct IndexedTensor;

class LoadedCheckpoint {
public:
  /// Collective over `world`: `directory` is a checkpoint or a folder of
  /// them (its `latest`); refuses an index that is missing or corrupt, and
  /// the rank's own file when the job has the writer's rank count and that
  /// file does not match the index.
  static LoadedCheckpoint load(const std::string &directory, Communicator &world);

  int64_t step() const { return step_; }
  int worldSize() const { return worldSize_; }
  /// The checkpoint's own directory (inside a folder: the latest one).
  const std::string &directory() const { return directory_; }
  const std::map<std::string, std::string> &info() const { return info_; }
  /// The dtype tensor `name` was saved with, or nullopt when it holds none.
  std::optional<DType> dtypeOf(const std::string &name) const;

  /// Collective over `world`: each request's tensor, put together from the
  /// shards of every file that holds a part of it, handed to `use` with the
  /// request's index. Refuses a missing tensor, another dtype, another
  /// shape (padding aside), shards that leave part of a tensor uncovered,
  /// and any file that does not match the index.
  void readWhole(Communicator &world, const std::vector<WholeTensorRequest> &requests,
                 const std::function<void(size_t, const std::vector<unsigned char> &)> &use) const;

private:
  const SafetensorsFile &file(int rank) const;

  std::string directory_;
  int64_t step_ = 0;
  int worldSize_ = 0;
  std::map<std::string, std::string> info_;
  /// Each file's name and CRC-32 (hex) by rank, from the index.
  std::map<int, std::pair<std::string, std::string>> fileNames_;
  std::shared_ptr<const std::map<std::string, IndexedTensor>> tensors_;
  mutable std::map<int, SafetensorsFile> files_;
};

std::string checkpointFileName(int rank, int worldSize);

/// Runs `body` on every rank of `world`; if it fails on any, every rank
/// fails (this rank's own reason, or the failing rank's), so no rank goes on
/// to a collective its peers left.
void onEveryRankOrNone(Communicator &world, const std::string &what, const std::function<void()> &body);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_CHECKPOINT_H
