//===- ShardedOptimizer.h - ZeRO stages 1, 2 and 3 over the data axis -*- C++ -*-===//
//
// Stages 1 and 2: the trainable parameters, end to end in parameter order,
// form one flat space of N elements, split into equal contiguous shards of
// ceil(N / D) elements over the D data-parallel ranks (the last padded). Each
// rank keeps optimizer state (both moments) for its shard only and updates
// only its shard; an all-gather then gives every rank the new weights.
//
// - Stage 1: gradients are averaged with one all-reduce per tensor, as plain
//   data parallelism does, and each rank reads its shard of them in place.
// - Stage 2: each microbatch's gradients are reduce-scattered at once, so a
//   rank only accumulates its shard.
// - Stage 3: the weights are sharded too, and every tensor on its own: a
//   tensor of n elements is cut into D chunks of ceil(n / D) (the last
//   padded), rank r keeping chunk r of every tensor. One tensor is then one
//   all-gather away from whole, which the step does when it first reads it
//   (`gatherTensor`) and frees after its last read. The flat space is
//   rank-major (rank 0's chunks of every tensor, then rank 1's, ...), so one
//   reduce-scatter per microbatch still leaves each rank its chunks'
//   gradients. No rank holds whole weights between steps.
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
// Optimizer offload (ZeRO-Offload, Ren et al., ATC'21): given a CopyEngine,
// the shard's optimizer state lives in pinned host memory with an fp32 copy
// of the shard's weights and gradients. Once a step's gradients are complete
// the shard's go down to the host, the host runs the update (the same
// kernels, so the trajectory is bit for bit the one without offload), and
// the shard's new weights come back up before the all-gather. On one rank
// the shard is every weight.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_SHARDEDOPTIMIZER_H
#define COLOSSAL_RUNTIME_SHARDEDOPTIMIZER_H

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/Memory.h"
#include "colossal/runtime/train/Offload.h"
#include "colossal/runtime/train/OptimizerStep.h"
#include "colossal/runtime/TrackedAllocator.h"

#include <vector>

namespace colossal::rt {

class ShardedOptimizer {
public:
  /// `conventions` (weight decay, trust ratio) of the trainable tensors in
  /// parameter order, and `weights`, the trainer's own: each step updates
  /// this rank's shard of them in place and all-gathers the rest. Stage 3
  /// copies its chunks of them at construction; the trainer may then free
  /// them. With `offload` the update runs on the host (above); the engine
  /// must outlive the optimizer.
  ShardedOptimizer(Communicator &dp, int stage, const OptimizerConfig &config,
                   const std::vector<TensorConventions> &conventions, const std::vector<Floats *> &weights,
                   CopyEngine *offload = nullptr);

  int stage() const { return stage_; }
  /// Tensor parallelism: each tensor's sums of squares, completed over the
  /// data-parallel shards, are completed over the tensor axis too (the
  /// split tensors'), for the gradient norm and the trust ratios.
  void setCompleteSquares(CompleteSquares complete) { completeSquares_ = std::move(complete); }
  /// Pipelines: the global gradient norm sums over the stages this way.
  void setTotalSquares(TotalSquares total) { totalSquares_ = std::move(total); }
  /// The engine moving the shard to and from the host, or null.
  const CopyEngine *offload() const { return offload_; }
  /// Elements per shard (the flat space is this times the ranks).
  int64_t shardElements() const { return shard_; }

  /// Starts a step: the shard's gradient accumulator is zeroed (stage 2).
  void beginStep();
  /// Stage 2: reduce-scatters one microbatch's gradients (full tensors,
  /// scaled by `scale`) and adds this rank's shard to the accumulator.
  void addMicrobatch(const std::vector<Floats> &grads, float scale);
  /// Stage 2, a tensor at a time: gradient `t` of this microbatch (full,
  /// `elements` floats) scaled into the reduce-scatter's staging buffer, so
  /// the step can free it as soon as it is computed...
  void stageGradient(size_t t, const float *gradient, int64_t elements, float scale);
  /// ...and, every tensor staged, the microbatch's reduce-scatter into the
  /// accumulator (the same bits as addMicrobatch).
  void reduceStaged();
  /// Stage 1: the gradients, already averaged over the ranks, read in place
  /// (LAMB writes its update over this rank's shard of them).
  void useGradients(std::vector<Floats> &averaged);
  /// Stage 2: divides the accumulated sums by the ranks (the average).
  void finishAccumulation();
  /// The global gradient norm (collective); also keeps the per-tensor sums
  /// of squares LARS needs.
  double gradientNorm();
  /// Updates this rank's shard of the weights and, below stage 3,
  /// all-gathers the others' (collective).
  void step(double lr, int64_t step, float gradScale);

  /// Stage 3: tensor `t` (in trainable order) whole, gathered from every
  /// rank's chunk into `out` (collective; resized to the tensor).
  void gatherTensor(size_t t, Floats &out);
  /// Stage 3: every tensor whole into `out[t]` (collective, for a checkpoint).
  void gatherWeights(std::vector<Floats> &out);

  /// The full moments of every tensor (collective: gathered for a
  /// checkpoint); `m[t]` and `v[t]` are resized to the tensor (`v` left
  /// empty for optimizers with one moment).
  void gatherMoments(std::vector<Floats> &m, std::vector<Floats> &v);
  /// Every tensor whole into `out[t]` from every rank's shard `mine` of a
  /// flat buffer laid out as this optimizer's (collective).
  void gatherShards(const Floats &mine, std::vector<Floats> &out);
  /// Stages 2 and 3: this rank's shard of the step's gradients (averaged
  /// once `finishAccumulation` ran).
  const Floats &gradientShard() const { return grad_; }
  /// Takes this rank's shard of full moments (from a checkpoint).
  void scatterMoments(const std::vector<Floats> &m, const std::vector<Floats> &v);

private:
  CompleteSquares completeSquares_;
  TotalSquares totalSquares_;
  /// Completes per-tensor pairs of sums written per piece (collective):
  /// returns them per piece, summed over every rank's pieces of the same
  /// tensor; `perTensor` receives every tensor's pair.
  std::vector<float> completePerTensor(const std::vector<float> &perPiece, std::vector<float> *perTensor = nullptr);
  /// Offload: copies the shard's complete gradients (from `deviceGrads_`)
  /// down to the host.
  void gradientsToHost();
  /// Offload: copies the shard's updated weights back up.
  void weightsToDevice();
  /// Where piece p's weights live on the device (the trainer's weights, or
  /// the stage-3 shard).
  float *deviceWeights(size_t p);

  Communicator &dp_;
  int stage_;
  OptimizerConfig config_;
  std::vector<Floats *> weights_; // the trainer's, per tensor
  std::vector<int64_t> sizes_, offsets_;      // per tensor: elements; start in the flat space (stages 1-2)
  std::vector<int64_t> chunks_, chunkAt_;     // stage 3, per tensor: chunk size; start in a shard
  int64_t shard_ = 0, begin_ = 0;             // shard size; this rank's first element
  /// Where element k of tensor t lies in the flat space (the layouts above).
  int64_t flatIndex(size_t t, int64_t k) const;

  /// This rank's pieces: which tensor, its first element there, the element
  /// count, and where the piece starts in this rank's shard.
  struct Piece {
    size_t tensor;
    int64_t first, count, at;
  };
  std::vector<Piece> pieces_;
  std::vector<OptimizerTensor> tensors_; // one per piece
  /// The shard's gradient accumulator (stage 2), moments (v for LAMB and
  /// AdamW only), and stage 2's reduce-scatter buffers (a microbatch's
  /// gradients, flat, and this rank's share of their sum).
  Floats grad_, m_, v_, flat_, scratch_;
  /// Stage 3: this rank's chunks of the weights (the only copy it keeps).
  Floats weightShard_;
  std::vector<float> normSquares_;       // per piece: sum w^2, sum g^2 (completed)
  /// Offload: the engine, the host's fp32 copies of the shard's weights and
  /// gradients (pinned; the moments above are pinned too), and where each
  /// piece's complete gradients are on the device.
  CopyEngine *offload_ = nullptr;
  Floats hostWeights_, hostGrads_;
  std::vector<const float *> deviceGrads_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_SHARDEDOPTIMIZER_H
