//===- ShardedOptimizer.cpp - ZeRO stages 1, 2 and 3 over the data axis --===//

#include "colossal/runtime/train/ShardedOptimizer.h"

#include "colossal/runtime/Error.h"

#include <algorithm>
#include <cmath>

namespace colossal::rt {

ShardedOptimizer::ShardedOptimizer(Communicator &dp, int stage, const OptimizerConfig &config,
                                   const std::vector<TensorConventions> &conventions,
                                   const std::vector<Floats *> &weights, CopyEngine *offload)
    : dp_(dp), stage_(stage), config_(config), weights_(weights), offload_(offload) {
  if (stage < 1 || stage > 3)
    fail("ZeRO stage " + std::to_string(stage),
         "the trainer shards optimizer state (1), gradients (2) and weights (3) only");
  int64_t total = 0, ranksCount = dp.size();
  for (const Floats *w : weights) {
    offsets_.push_back(total);
    sizes_.push_back(int64_t(w->size()));
    total += int64_t(w->size());
  }
  if (stage == 3) {
    // Each tensor on its own: chunk r of every tensor, end to end, is rank r's shard.
    shard_ = 0;
    for (int64_t n : sizes_) {
      chunks_.push_back(std::max<int64_t>(1, (n + ranksCount - 1) / ranksCount));
      chunkAt_.push_back(shard_);
      shard_ += chunks_.back();
    }
    for (size_t t = 0; t < sizes_.size(); ++t) {
      int64_t first = int64_t(dp.rank()) * chunks_[t];
      int64_t count = std::min(chunks_[t], sizes_[t] - first);
      if (count > 0)
        pieces_.push_back({t, first, count, chunkAt_[t]});
    }
  } else {
    shard_ = std::max<int64_t>(1, (total + ranksCount - 1) / ranksCount);
    begin_ = int64_t(dp.rank()) * shard_;
    for (size_t t = 0; t < sizes_.size(); ++t) {
      int64_t lo = std::max(offsets_[t], begin_), hi = std::min(offsets_[t] + sizes_[t], begin_ + shard_);
      if (lo < hi)
        pieces_.push_back({t, lo - offsets_[t], hi - lo, lo - begin_});
    }
  }
  bool second = momentsOf(config.kind) == 2;
  // Offloaded state lives in (pinned) host memory.
  MemorySpace stateSpace = offload ? MemorySpace::PinnedHost : MemorySpace::Host;
  m_ = buffer<float>(size_t(shard_), MemoryCategory::OptimizerState, stateSpace);
  v_ = buffer<float>(second ? size_t(shard_) : 0, MemoryCategory::OptimizerState, stateSpace);
  if (stage >= 2) {
    grad_ = buffer<float>(size_t(shard_), MemoryCategory::Gradients);
    flat_ = buffer<float>(size_t(shard_ * ranksCount), MemoryCategory::Communication);
    scratch_ = buffer<float>(size_t(shard_), MemoryCategory::Communication);
  }
  if (stage == 3) {
    weightShard_ = buffer<float>(size_t(shard_), MemoryCategory::Parameters);
    for (const Piece &p : pieces_)
      std::copy_n(weights_[p.tensor]->data() + p.first, p.count, weightShard_.data() + p.at);
  }
  if (offload) {
    hostWeights_ = buffer<float>(size_t(shard_), MemoryCategory::Parameters, stateSpace);
    hostGrads_ = buffer<float>(size_t(shard_), MemoryCategory::Gradients, stateSpace);
    deviceGrads_.assign(pieces_.size(), nullptr);
  }
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const Piece &p = pieces_[i];
    // Stage 1 points the gradient (and LAMB's update over it) at the
    // averaged full gradients each step (useGradients); offload points the
    // update at the host's copies.
    float *grad = stage >= 2 ? grad_.data() + p.at : nullptr;
    float *param = deviceWeights(i);
    if (offload) {
      if (grad)
        deviceGrads_[i] = grad;
      offload->toHost(hostWeights_.data() + p.at, param, p.count * int64_t(sizeof(float)));
      grad = hostGrads_.data() + p.at;
      param = hostWeights_.data() + p.at;
    }
    OptimizerTensor o{param, grad, m_.data() + p.at, second ? v_.data() + p.at : nullptr, grad, p.count};
    applyConventions(conventions[p.tensor], o);
    tensors_.push_back(o);
  }
  if (offload)
    offload->synchronize();
}

float *ShardedOptimizer::deviceWeights(size_t p) {
  const Piece &piece = pieces_[p];
  return stage_ == 3 ? weightShard_.data() + piece.at : weights_[piece.tensor]->data() + piece.first;
}

void ShardedOptimizer::gradientsToHost() {
  for (size_t p = 0; p < pieces_.size(); ++p)
    offload_->toHost(hostGrads_.data() + pieces_[p].at, deviceGrads_[p], pieces_[p].count * int64_t(sizeof(float)));
  offload_->synchronize();
}

void ShardedOptimizer::weightsToDevice() {
  for (size_t p = 0; p < pieces_.size(); ++p)
    offload_->toDevice(deviceWeights(p), hostWeights_.data() + pieces_[p].at, pieces_[p].count * int64_t(sizeof(float)));
  offload_->synchronize();
}

int64_t ShardedOptimizer::flatIndex(size_t t, int64_t k) const {
  if (stage_ < 3)
    return offsets_[t] + k;
  int64_t rank = k / chunks_[t];
  return rank * shard_ + chunkAt_[t] + (k - rank * chunks_[t]);
}

void ShardedOptimizer::beginStep() { std::fill(grad_.begin(), grad_.end(), 0.0f); }

void ShardedOptimizer::addMicrobatch(const std::vector<Floats> &grads, float scale) {
  for (size_t t = 0; t < grads.size(); ++t)
    stageGradient(t, grads[t].data(), int64_t(grads[t].size()), scale);
  reduceStaged();
}

void ShardedOptimizer::stageGradient(size_t t, const float *gradient, int64_t elements, float scale) {
  if (t >= sizes_.size() || elements != sizes_[t])
    throw Error(dp_.worldRanks()[size_t(dp_.rank())], "ShardedOptimizer::stageGradient", "gradient " + std::to_string(t) + " has " +
                                                       std::to_string(elements) + " elements, not " +
                                                       std::to_string(t < sizes_.size() ? sizes_[t] : 0));
  for (int64_t k = 0; k < elements; ++k)
    flat_[size_t(flatIndex(t, k))] = gradient[k] * scale;
}

void ShardedOptimizer::reduceStaged() {
  dp_.reduceScatter(Buffer::of(flat_.data(), DType::F32, int64_t(flat_.size())),
                    Buffer::of(scratch_.data(), DType::F32, shard_));
  for (int64_t k = 0; k < shard_; ++k)
    grad_[size_t(k)] += scratch_[size_t(k)];
}

void ShardedOptimizer::useGradients(std::vector<Floats> &averaged) {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const Piece &piece = pieces_[p];
    float *grad = averaged[piece.tensor].data() + piece.first;
    if (offload_)
      deviceGrads_[p] = grad;
    else
      tensors_[p].grad = tensors_[p].update = grad;
  }
  if (offload_)
    gradientsToHost();
}

void ShardedOptimizer::finishAccumulation() {
  float inverse = 1.0f / float(dp_.size());
  for (float &g : grad_)
    g *= inverse;
  if (offload_)
    gradientsToHost();
}

std::vector<float> ShardedOptimizer::completePerTensor(const std::vector<float> &perPiece,
                                                       std::vector<float> *perTensorOut) {
  std::vector<float> perTensor(2 * sizes_.size(), 0.0f);
  for (size_t p = 0; p < pieces_.size(); ++p) {
    perTensor[2 * pieces_[p].tensor] += perPiece[2 * p];
    perTensor[2 * pieces_[p].tensor + 1] += perPiece[2 * p + 1];
  }
  dp_.allReduce(Buffer::of(perTensor.data(), DType::F32, int64_t(perTensor.size())));
  if (completeSquares_)
    completeSquares_(perTensor);
  std::vector<float> completed(2 * pieces_.size());
  for (size_t p = 0; p < pieces_.size(); ++p) {
    completed[2 * p] = perTensor[2 * pieces_[p].tensor];
    completed[2 * p + 1] = perTensor[2 * pieces_[p].tensor + 1];
  }
  if (perTensorOut)
    *perTensorOut = std::move(perTensor);
  return completed;
}

double ShardedOptimizer::gradientNorm() {
  std::vector<float> squares(2 * pieces_.size(), 0.0f);
  cpu::tensorSquares(Stream{}, tensors_.data(), int64_t(tensors_.size()), 1.0f, squares.data());
  // Every rank receives every tensor's sums: the same norm everywhere, summed
  // per tensor as the single-rank optimizer sums it.
  std::vector<float> perTensor;
  normSquares_ = completePerTensor(squares, &perTensor);
  if (totalSquares_)
    return std::sqrt(totalSquares_(perTensor));
  double sum = 0;
  for (size_t t = 0; t < sizes_.size(); ++t)
    sum += perTensor[2 * t + 1];
  return std::sqrt(sum);
}

void ShardedOptimizer::step(double lr, int64_t step, float gradScale) {
  const Stream host{};
  int64_t count = int64_t(tensors_.size());
  switch (config_.kind) {
  case OptimizerKind::Sgd:
    cpu::sgdStep(host, tensors_.data(), count, sgdSettings(config_, lr, step), gradScale);
    break;
  case OptimizerKind::AdamW:
    cpu::adamwStep(host, tensors_.data(), count, adamSettings(config_, lr, step), gradScale);
    break;
  case OptimizerKind::Lamb: {
    std::vector<float> squares(2 * pieces_.size(), 0.0f);
    cpu::lambStage1(host, tensors_.data(), count, adamSettings(config_, lr, step), gradScale, squares.data());
    std::vector<float> completed = completePerTensor(squares);
    cpu::lambStage2(host, tensors_.data(), count, float(lr), completed.data());
    break;
  }
  case OptimizerKind::Lars: {
    // The completed squares hold sum g^2; LARS wants sum (gradScale g)^2.
    std::vector<float> squares = normSquares_;
    for (size_t p = 0; p < pieces_.size(); ++p)
      squares[2 * p + 1] *= gradScale * gradScale;
    cpu::larsStep(host, tensors_.data(), count, larsSettings(config_, lr), gradScale, squares.data());
    break;
  }
  }
  if (offload_)
    weightsToDevice();
  if (stage_ == 3)
    return; // each step gathers the tensors it reads
  int64_t ranksCount = dp_.size();
  if (ranksCount == 1)
    return; // the one shard is every weight, updated in place
  // The all-gather's buffers live for the exchange only.
  Floats mine = buffer<float>(size_t(shard_), MemoryCategory::Communication),
         all = buffer<float>(size_t(shard_ * ranksCount), MemoryCategory::Communication);
  for (const Piece &p : pieces_)
    std::copy_n(weights_[p.tensor]->data() + p.first, p.count, mine.data() + p.at);
  dp_.allGather(Buffer::of(mine.data(), DType::F32, shard_), Buffer::of(all.data(), DType::F32, int64_t(all.size())));
  for (size_t t = 0; t < sizes_.size(); ++t)
    std::copy_n(all.data() + offsets_[t], sizes_[t], weights_[t]->data());
}

void ShardedOptimizer::gatherTensor(size_t t, Floats &out) {
  if (stage_ != 3 || t >= sizes_.size())
    fail("ZeRO stage " + std::to_string(stage_), "only stage 3 gathers tensors (asked for tensor " + std::to_string(t) + ")");
  int64_t ranksCount = dp_.size();
  // The padded whole: chunk r of the tensor from rank r, in rank order.
  out.assign(size_t(chunks_[t] * ranksCount), 0.0f);
  dp_.allGather(Buffer::of(weightShard_.data() + chunkAt_[t], DType::F32, chunks_[t]),
                Buffer::of(out.data(), DType::F32, int64_t(out.size())));
  out.resize(size_t(sizes_[t]));
}

void ShardedOptimizer::gatherWeights(std::vector<Floats> &out) {
  out.assign(sizes_.size(), {});
  for (size_t t = 0; t < sizes_.size(); ++t)
    gatherTensor(t, out[t]);
}

void ShardedOptimizer::gatherShards(const Floats &mine, std::vector<Floats> &out) {
  if (int64_t(mine.size()) != shard_)
    fail("ZeRO stage " + std::to_string(stage_), "a shard of " + std::to_string(mine.size()) + " elements, not " +
                                                     std::to_string(shard_));
  Floats all = buffer<float>(size_t(shard_ * dp_.size()), MemoryCategory::Communication);
  dp_.allGather(Buffer::of(const_cast<float *>(mine.data()), DType::F32, shard_),
                Buffer::of(all.data(), DType::F32, int64_t(all.size())));
  out.assign(sizes_.size(), {});
  for (size_t t = 0; t < sizes_.size(); ++t) {
    out[t].resize(size_t(sizes_[t]));
    for (int64_t k = 0; k < sizes_[t]; ++k)
      out[t][size_t(k)] = all[size_t(flatIndex(t, k))];
  }
}

void ShardedOptimizer::gatherMoments(std::vector<Floats> &m, std::vector<Floats> &v) {
  gatherShards(m_, m);
  if (v_.empty())
    v.assign(sizes_.size(), {});
  else
    gatherShards(v_, v);
}

void ShardedOptimizer::scatterMoments(const std::vector<Floats> &m, const std::vector<Floats> &v) {
  for (const Piece &p : pieces_) {
    std::copy_n(m[p.tensor].data() + p.first, p.count, m_.data() + p.at);
    if (!v_.empty())
      std::copy_n(v[p.tensor].data() + p.first, p.count, v_.data() + p.at);
  }
}

} // namespace colossal::rt
