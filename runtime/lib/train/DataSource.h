//===- DataSource.h - where each step's batch comes from -------------*- C++ -*-===//
//
// Feeds (.npy), a token file or synthetic data, made once per step as the
// global batch, of which each rank reads its rows and each microbatch its
// block. Charged as data.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_LIB_TRAIN_DATASOURCE_H
#define COLOSSAL_RUNTIME_LIB_TRAIN_DATASOURCE_H

#include "TrainerOptions.h"
#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/io/TokenData.h"

#include <optional>
#include <vector>

namespace colossal::rt::trainer {

using host::Shape;
using host::Tensor;

/// Where each step's global batch comes from.
class DataSource {
public:
  /// Rank `rank` of `ranks` reads rows [rank, rank + 1) * (its share) of
  /// every global batch.
  DataSource(const TrainingProgram &program, const Options &options, int rank, int ranks);

  /// The inputs of microbatch `m` of (0-based) step `step`.
  std::vector<Tensor> microbatch(int64_t step, int64_t m);

  /// Tokens per step for the throughput figure: the elements of the first
  /// integer input, else the global batch size.
  int64_t tokensPerStep() const;

private:
  Shape globalShape(const ProgramInput &in) const;

  void loadFeeds();

  void openTokens();

  Tensor globalInput(size_t i, int64_t step);

  /// A feed file's batches, charged as data.
  struct Feed {
    int64_t batches = 1;
    Floats floats = buffer<float>(0, MemoryCategory::Data);
    Ints ints = buffer<int64_t>(0, MemoryCategory::Data);
  };

  const TrainingProgram &program_;
  Options options_;
  int64_t cachedStep_ = -1;
  std::vector<Tensor> cachedGlobal_;
  int64_t rank_ = 0, ranks_ = 1;
  int64_t microbatches_ = 1;
  std::vector<Shape> globalShapes_;
  std::vector<Feed> feeds_;
  std::optional<TokenDataset> tokens_;
};

} // namespace colossal::rt::trainer

#endif // COLOSSAL_RUNTIME_LIB_TRAIN_DATASOURCE_H
