//===- ShardedOptimizer.cpp - ZeRO stages 1 and 2 over the data axis -----===//

#include "colossal/runtime/ShardedOptimizer.h"

#include "colossal/runtime/Error.h"

#include <algorithm>
#include <cmath>

namespace colossal::rt {

ShardedOptimizer::ShardedOptimizer(Communicator &dp, int stage, const OptimizerConfig &config,
                                   const std::vector<TensorConventions> &conventions,
                                   const std::vector<std::vector<float> *> &weights)
    : dp_(dp), stage_(stage), config_(config), weights_(weights) {
  if (stage < 1 || stage > 2)
    fail("ZeRO stage " + std::to_string(stage), "the trainer shards optimizer state (1) and gradients (2) only");
  int64_t total = 0;
  for (const std::vector<float> *w : weights) {
    offsets_.push_back(total);
    sizes_.push_back(int64_t(w->size()));
    total += int64_t(w->size());
  }
  int64_t ranksCount = dp.size();
  shard_ = std::max<int64_t>(1, (total + ranksCount - 1) / ranksCount);
  begin_ = int64_t(dp.rank()) * shard_;
  bool second = momentsOf(config.kind) == 2;
  m_.assign(size_t(shard_), 0.0f);
  v_.assign(second ? size_t(shard_) : 0, 0.0f);
  momentBytes_ = MemoryCharge(momentsOf(config.kind) * shard_ * int64_t(sizeof(float)), MemoryCategory::OptimizerState);
  if (stage == 2) {
    grad_.assign(size_t(shard_), 0.0f);
    flat_.assign(size_t(shard_ * ranksCount), 0.0f);
    scratch_.assign(size_t(shard_), 0.0f);
    gradientBytes_ = MemoryCharge(shard_ * int64_t(sizeof(float)), MemoryCategory::Gradients);
    communicationBytes_ =
        MemoryCharge((shard_ * ranksCount + shard_) * int64_t(sizeof(float)), MemoryCategory::Communication);
  }
  for (size_t t = 0; t < sizes_.size(); ++t) {
    int64_t lo = std::max(offsets_[t], begin_), hi = std::min(offsets_[t] + sizes_[t], begin_ + shard_);
    if (lo >= hi)
      continue;
    pieces_.push_back({t, lo, hi - lo});
    int64_t inShard = lo - begin_;
    // Stage 1 points the gradient (and LAMB's update over it) at the
    // averaged full gradients each step (useGradients).
    float *grad = stage == 2 ? grad_.data() + inShard : nullptr;
    OptimizerTensor o{weights_[t]->data() + (lo - offsets_[t]), grad, m_.data() + inShard,
                      second ? v_.data() + inShard : nullptr, grad, hi - lo};
    applyConventions(conventions[t], o);
    tensors_.push_back(o);
  }
}

void ShardedOptimizer::beginStep() { std::fill(grad_.begin(), grad_.end(), 0.0f); }

void ShardedOptimizer::addMicrobatch(const std::vector<std::vector<float>> &grads, float scale) {
  for (size_t t = 0; t < grads.size(); ++t)
    for (int64_t k = 0; k < sizes_[t]; ++k)
      flat_[size_t(offsets_[t] + k)] = grads[t][size_t(k)] * scale;
  dp_.reduceScatter(Buffer::of(flat_.data(), DType::F32, int64_t(flat_.size())),
                    Buffer::of(scratch_.data(), DType::F32, shard_));
  for (int64_t k = 0; k < shard_; ++k)
    grad_[size_t(k)] += scratch_[size_t(k)];
}

void ShardedOptimizer::useGradients(std::vector<std::vector<float>> &averaged) {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const Piece &piece = pieces_[p];
    tensors_[p].grad = tensors_[p].update = averaged[piece.tensor].data() + (piece.start - offsets_[piece.tensor]);
  }
}

void ShardedOptimizer::finishAccumulation() {
  float inverse = 1.0f / float(dp_.size());
  for (float &g : grad_)
    g *= inverse;
}

std::vector<float> ShardedOptimizer::completePerTensor(const std::vector<float> &perPiece,
                                                       std::vector<float> *perTensorOut) {
  std::vector<float> perTensor(2 * sizes_.size(), 0.0f);
  for (size_t p = 0; p < pieces_.size(); ++p) {
    perTensor[2 * pieces_[p].tensor] += perPiece[2 * p];
    perTensor[2 * pieces_[p].tensor + 1] += perPiece[2 * p + 1];
  }
  dp_.allReduce(Buffer::of(perTensor.data(), DType::F32, int64_t(perTensor.size())));
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
  // The all-gather's buffers live for the exchange only.
  int64_t ranksCount = dp_.size();
  std::vector<float> mine(size_t(shard_), 0.0f), all(size_t(shard_ * ranksCount));
  MemoryCharge exchange((shard_ + shard_ * ranksCount) * int64_t(sizeof(float)), MemoryCategory::Communication);
  for (const Piece &p : pieces_)
    std::copy_n(weights_[p.tensor]->data() + (p.start - offsets_[p.tensor]), p.count, mine.data() + (p.start - begin_));
  dp_.allGather(Buffer::of(mine.data(), DType::F32, shard_), Buffer::of(all.data(), DType::F32, int64_t(all.size())));
  for (size_t t = 0; t < sizes_.size(); ++t)
    std::copy_n(all.data() + offsets_[t], sizes_[t], weights_[t]->data());
}

void ShardedOptimizer::gatherMoments(std::vector<std::vector<float>> &m, std::vector<std::vector<float>> &v) {
  int64_t ranksCount = dp_.size();
  std::vector<float> all(size_t(shard_ * ranksCount));
  MemoryCharge exchange(int64_t(all.size() * sizeof(float)), MemoryCategory::Communication);
  m.assign(sizes_.size(), {});
  v.assign(sizes_.size(), {});
  for (auto [mine, out] : {std::pair(&m_, &m), std::pair(&v_, &v)}) {
    if (mine->empty())
      continue;
    dp_.allGather(Buffer::of(mine->data(), DType::F32, shard_), Buffer::of(all.data(), DType::F32, int64_t(all.size())));
    for (size_t t = 0; t < sizes_.size(); ++t)
      (*out)[t].assign(all.begin() + offsets_[t], all.begin() + offsets_[t] + sizes_[t]);
  }
}

void ShardedOptimizer::scatterMoments(const std::vector<std::vector<float>> &m, const std::vector<std::vector<float>> &v) {
  for (const Piece &p : pieces_) {
    int64_t from = p.start - offsets_[p.tensor], to = p.start - begin_;
    std::copy_n(m[p.tensor].data() + from, p.count, m_.data() + to);
    if (!v_.empty())
      std::copy_n(v[p.tensor].data() + from, p.count, v_.data() + to);
  }
}

} // namespace colossal::rt
