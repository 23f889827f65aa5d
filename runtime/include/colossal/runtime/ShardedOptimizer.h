//===- ShardedOptimizer.h - ZeRO stages 1 and 2 over the data axis -*- C++ -*-===//
//
// The trainable parameters, end to end in parameter order, form one flat
// space of N elements, split into equal contiguous shards of ceil(N / D)
// elements over the D data-parallel ranks (the last padded). Each rank keeps
// optimizer state (both moments) for its shard only and updates only its
// shard; an all-gather then gives every rank the new weights.
//
// - Stage 1: gradients are averaged with one all-reduce per tensor, as plain
//   data parallelism does, and each rank reads its shard of them.
// - Stage 2: each microbatch's gradients are reduce-scattered at once, so a
//   rank only accumulates its shard.
//
// A shard cuts tensors, so the norms an optimizer needs per tensor are
// completed across ranks: one all-reduce of (sum w^2, sum g^2) per tensor
// gives the global gradient norm (the log, clipping) and LARS's norms, and
// for LAMB a second one of (sum w^2, sum u^2) gives the trust ratios.
// The collective adds the ranks' partial sums in its own order, so norms
// (and through them the update) differ from one rank's only by float
// reassociation.
//
// The cost model charges exactly these collectives (Estimator.h:
// EstimateOptions::shardedNormReductions), so the counters can be checked.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_SHARDEDOPTIMIZER_H
#define COLOSSAL_RUNTIME_SHARDEDOPTIMIZER_H

#include "colossal/runtime/Communicator.h"
#include "colossal/runtime/OptimizerStep.h"

#include <vector>

namespace colossal::rt {

class ShardedOptimizer {
public:
  /// `sizes` and `conventions` (weight decay, trust ratio) of the trainable
  /// tensors in parameter order.
  ShardedOptimizer(Communicator &dp, int stage, const OptimizerConfig &config, const std::vector<int64_t> &sizes,
                   const std::vector<TensorConventions> &conventions);

  int stage() const { return stage_; }
  /// Elements per shard (the flat space is this times the ranks).
  int64_t shardElements() const { return shard_; }

  /// The current weights (one vector per trainable tensor), after loading
  /// or resuming; steps keep them afterwards.
  void setWeights(const std::vector<const std::vector<float> *> &weights);
  /// Starts a step: the shard's gradient accumulator is zeroed.
  void beginStep();
  /// Stage 2: reduce-scatters one microbatch's gradients (full tensors,
  /// scaled by `scale`) and adds this rank's shard to the accumulator.
  void addMicrobatch(const std::vector<std::vector<float>> &grads, float scale);
  /// Stage 1: takes this rank's shard of gradients already averaged over
  /// the ranks.
  void takeShard(const std::vector<std::vector<float>> &averaged);
  /// Stage 2: divides the accumulated sums by the ranks (the average).
  void finishAccumulation();
  /// The global gradient norm (collective); also keeps the per-tensor sums
  /// of squares LARS needs.
  double gradientNorm();
  /// Updates this rank's shard and all-gathers the new weights into
  /// `weights` (one vector per trainable tensor; collective).
  void step(double lr, int64_t step, float gradScale, std::vector<std::vector<float> *> &weights);

  /// The full moments of every tensor (collective: gathered for a
  /// checkpoint); `m[t]` and `v[t]` are resized to the tensor.
  void gatherMoments(std::vector<std::vector<float>> &m, std::vector<std::vector<float>> &v);
  /// Takes this rank's shard of full moments (from a checkpoint).
  void scatterMoments(const std::vector<std::vector<float>> &m, const std::vector<std::vector<float>> &v);

private:
  /// Completes per-tensor pairs of sums written per piece (collective):
  /// returns them per piece, summed over every rank's pieces of the same
  /// tensor; `perTensor` receives every tensor's pair.
  std::vector<float> completePerTensor(const std::vector<float> &perPiece, std::vector<float> *perTensor = nullptr);

  Communicator &dp_;
  int stage_;
  OptimizerConfig config_;
  std::vector<int64_t> sizes_, offsets_; // per tensor, in the flat space
  int64_t shard_ = 0, begin_ = 0;        // shard size; this rank's first element
  /// This rank's pieces: which tensor, the flat start, the element count.
  struct Piece {
    size_t tensor;
    int64_t start, count;
  };
  std::vector<Piece> pieces_;
  std::vector<OptimizerTensor> tensors_; // one per piece, into the buffers below
  std::vector<float> weights_;           // the whole flat space (gathered)
  std::vector<float> grad_, m_, v_, update_, scratch_;
  std::vector<float> flat_;              // a microbatch's gradients, to reduce-scatter
  std::vector<float> normSquares_;       // per piece: sum w^2, sum g^2 (completed)
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_SHARDEDOPTIMIZER_H
