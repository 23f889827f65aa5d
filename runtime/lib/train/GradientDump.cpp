//===- GradientDump.cpp ---------------------------------------------------===//

#include "colossal/runtime/train/GradientDump.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/Npy.h"
#include "colossal/runtime/kernels/TensorIndexing.h"
#include "colossal/runtime/train/TensorSlices.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace colossal::rt {

namespace {

Floats scaled(const Floats &values, float factor) {
  Floats out = buffer<float>(values.size(), MemoryCategory::Workspace);
  for (size_t k = 0; k < values.size(); ++k)
    out[k] = values[k] * factor;
  return out;
}

void makeDirectory(const std::string &dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    fail("--dump-gradients", "cannot create " + dir + ": " + std::strerror(errno));
}

} // namespace

GradientDump GradientDump::ofTensors(const std::vector<Floats> &gradients, float unscale) {
  GradientDump dump;
  for (const Floats &g : gradients)
    dump.tensors_.push_back(scaled(g, unscale));
  return dump;
}

GradientDump GradientDump::ofShard(const Floats &shard, float unscale) {
  GradientDump dump;
  dump.shard_ = scaled(shard, unscale);
  dump.sharded_ = true;
  return dump;
}

void GradientDump::write(const std::string &dir, const TrainingProgram &program, const std::vector<size_t> &trainable,
                         ShardedOptimizer *sharded, Communicator *tp, int worldRank) const {
  MemoryScope scope(MemoryCategory::Workspace);
  std::vector<Floats> local;
  if (sharded_) {
    if (!sharded)
      fail("--dump-gradients", "a gradient shard without its sharded optimizer");
    sharded->gatherShards(shard_, local);
  } else {
    local = tensors_;
  }
  if (local.size() != trainable.size())
    fail("--dump-gradients", std::to_string(local.size()) + " gradients for " + std::to_string(trainable.size()) +
                                 " trainable parameters");
  std::string where = worldRank == 0 ? dir : dir + "/rank-" + [&] {
    char name[16];
    std::snprintf(name, sizeof name, "%05d", worldRank);
    return std::string(name);
  }();
  makeDirectory(dir);
  makeDirectory(where);
  int64_t tensorRanks = tp ? tp->size() : 1;
  for (size_t t = 0; t < trainable.size(); ++t) {
    const ProgramParameter &p = program.parameters.at(trainable[t]);
    const Floats &mine = local[t];
    if ((p.splitDim < 0 && p.gridSplit.empty()) || tensorRanks == 1) {
      writeNpy(where + "/" + p.name + ".npy", DType::F32, p.shape, mine.data());
      continue;
    }
    // Every rank's slice, in rank order, each put in its place (a block
    // held by a whole grid row or column is placed once per holder).
    Floats slices = buffer<float>(mine.size() * size_t(tensorRanks), MemoryCategory::Communication);
    tp->allGather(Buffer::of(const_cast<float *>(mine.data()), DType::F32, int64_t(mine.size())),
                  Buffer::of(slices.data(), DType::F32, int64_t(slices.size())));
    SliceOf first = sliceOf(p, 0, tensorRanks);
    Floats whole(size_t(indexing::product(first.whole)));
    for (int64_t r = 0; r < tensorRanks; ++r)
      placeSlice(slices.data() + r * int64_t(mine.size()), sliceOf(p, r, tensorRanks), p.shape, whole.data());
    writeNpy(where + "/" + p.name + ".npy", DType::F32, first.whole, whole.data());
  }
}

} // namespace colossal::rt
