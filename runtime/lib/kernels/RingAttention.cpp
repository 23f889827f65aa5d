//===- RingAttention.cpp --------------------------------------------------===//

#include "colossal/runtime/kernels/RingAttention.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/train/StepInterface.h"

#include <cmath>
#include <limits>

namespace colossal::rt::host {

namespace {

struct Dims {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, size = 0, valueSize = 0;
  /// The mask's batch (1: one mask for every sequence), 0 without a mask.
  int64_t maskBatch = 0;
  /// Key/value heads (grouped-query attention: fewer than `heads`).
  int64_t keyHeads = 0;
  int64_t rows() const { return batch * heads * queries; }
  int64_t keyFloats() const { return batch * keyHeads * keys * size; }
  int64_t valueFloats() const { return batch * keyHeads * keys * valueSize; }
  /// Key row c of query head g's (flattened batch x head) key/value head.
  int64_t keyRow(int64_t g, int64_t c) const { return g / (heads / keyHeads) * keys + c; }
  int64_t maskFloats() const { return maskBatch * keys; }
};

Dims dimsOf(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, const char *op) {
  auto shapes = describe(q.shape) + ", " + describe(k.shape) + ", " + describe(v.shape);
  if (q.integer || k.integer || v.integer || q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4)
    fail(op, "queries, keys and values must be float [batch, heads, tokens, size], not " + shapes);
  Dims d{q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3], 0, k.shape[1]};
  if (k.shape[0] != d.batch || v.shape[0] != d.batch || d.keyHeads < 1 || d.heads % d.keyHeads != 0 ||
      v.shape[1] != d.keyHeads || k.shape[3] != d.size || v.shape[2] != d.keys)
    fail(op, "queries, keys and values do not match: " + shapes);
  if (mask) {
    const Shape &m = mask->shape;
    if (mask->integer || m.size() != 4 || m[1] != 1 || m[2] != 1 || m[3] != d.keys || (m[0] != 1 && m[0] != d.batch))
      fail(op, "the mask must be a float mask of this rank's " + std::to_string(d.keys) + " keys, [batch or 1, 1, 1, " +
                   std::to_string(d.keys) + "], not " + describe(m));
    d.maskBatch = m[0];
  }
  return d;
}

/// What travels around the ring: this step's key block, value block and
/// their mask slice, then (backward) the block's gradient partial sums. A
/// communication buffer.
struct Blocks {
  Floats data = buffer<float>(0, MemoryCategory::Communication);
  int64_t values = 0, mask = 0, keyGrad = 0, valueGrad = 0;
  const float *key() const { return data.data(); }
  const float *value() const { return data.data() + values; }
  const float *maskOf() const { return data.data() + mask; }
  float *keyGradient() { return data.data() + keyGrad; }
  float *valueGradient() { return data.data() + valueGrad; }
};

Blocks blocksOf(const Dims &d, const Tensor &k, const Tensor &v, const Tensor *mask, bool withGradients) {
  Blocks b;
  b.values = d.keyFloats();
  b.mask = b.values + d.valueFloats();
  b.keyGrad = b.mask + d.maskFloats();
  b.valueGrad = b.keyGrad + d.keyFloats();
  b.data.reserve(size_t(b.valueGrad + (withGradients ? d.valueFloats() : 0)));
  b.data.insert(b.data.end(), k.floats.begin(), k.floats.end());
  b.data.insert(b.data.end(), v.floats.begin(), v.floats.end());
  if (mask)
    b.data.insert(b.data.end(), mask->floats.begin(), mask->floats.end());
  if (withGradients)
    b.data.resize(size_t(b.valueGrad + d.valueFloats()), 0.0f);
  return b;
}

/// `floats` to the next rank on the ring, the previous rank's received
/// (a communication buffer too).
Floats shifted(Floats floats, StepCollectives &collectives, const std::string &axis) {
  MemoryScope scope(MemoryCategory::Communication);
  int64_t n = int64_t(floats.size());
  return collectives.ringShift(Tensor::ofFloats({n}, std::move(floats)), axis).floats;
}

/// Where this rank is on the ring and which keys its queries may see.
struct Ring {
  int64_t rank = 0, ranks = 1;
  double scale = 1.0;
  bool causal = false;
  AttentionDropout dropout;
  /// The dropout's factor for query row (g, i) of this rank and key c of
  /// block `owner`: their places in the whole sequence index the masks.
  double factor(const Dims &d, int64_t g, int64_t i, int64_t owner, int64_t c) const {
    return dropout.factor(g, ranks * d.queries, ranks * d.keys, rank * d.queries + i, owner * d.keys + c);
  }
  /// Block `owner`'s keys are all after this rank's last query.
  bool skips(const Dims &d, int64_t owner) const {
    return causal && owner * d.keys > rank * d.queries + d.queries - 1;
  }
};

/// The scores of query row (g, i) against block `owner`'s keys, NaN where
/// the causal mask hides a key; returns whether any key counts.
bool scoresOf(const Dims &d, const Ring &ring, const float *q, const Blocks &b, int64_t owner, int64_t g, int64_t i,
              std::vector<double> &scores) {
  int64_t query = ring.rank * d.queries + i, batch = g / d.heads;
  const float *qi = q + (g * d.queries + i) * d.size;
  bool any = false;
  for (int64_t c = 0; c < d.keys; ++c) {
    if (ring.causal && owner * d.keys + c > query) {
      scores[size_t(c)] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    const float *kc = b.key() + d.keyRow(g, c) * d.size;
    double dot = 0;
    for (int64_t e = 0; e < d.size; ++e)
      dot += double(qi[e]) * double(kc[e]);
    double s = dot * ring.scale;
    if (d.maskBatch)
      s += double(b.maskOf()[(d.maskBatch == 1 ? 0 : batch) * d.keys + c]);
    scores[size_t(c)] = s;
    any = true;
  }
  return any;
}

/// Every row's running maximum, denominator and weighted sum of values.
struct Online {
  TrackedVector<double> maximum, denominator, sum;
};

/// Calls `fold(row, g, owner, scores)` for every query row of this rank against
/// each block of keys as it comes around the ring (blocks fully hidden by
/// the causal mask skipped), passing the blocks on after every step but the
/// last.
template <typename Fold>
void aroundTheRing(const Dims &d, const Ring &ring, const Tensor &q, Blocks &blocks, StepCollectives &collectives,
                   const std::string &axis, Fold fold) {
  std::vector<double> scores(size_t(d.keys));
  for (int64_t step = 0; step < ring.ranks; ++step) {
    int64_t owner = (ring.rank - step + ring.ranks) % ring.ranks;
    if (!ring.skips(d, owner))
      for (int64_t g = 0; g < d.batch * d.heads; ++g)
        for (int64_t i = 0; i < d.queries; ++i)
          if (scoresOf(d, ring, q.floats.data(), blocks, owner, g, i, scores))
            fold(g * d.queries + i, g, owner, scores);
    if (step + 1 < ring.ranks)
      blocks.data = shifted(std::move(blocks.data), collectives, axis);
  }
}

/// The forward ring: every block folded into every row's softmax.
Online forwardRing(const Dims &d, const Ring &ring, const Tensor &q, Blocks blocks, StepCollectives &collectives,
                   const std::string &axis) {
  Online o{scratch<double>(size_t(d.rows()), -std::numeric_limits<double>::infinity()),
           scratch<double>(size_t(d.rows()), 0.0), scratch<double>(size_t(d.rows() * d.valueSize), 0.0)};
  aroundTheRing(d, ring, q, blocks, collectives, axis,
                [&](int64_t row, int64_t g, int64_t owner, const std::vector<double> &scores) {
                  double blockMax = -std::numeric_limits<double>::infinity();
                  for (double s : scores)
                    if (!std::isnan(s))
                      blockMax = std::max(blockMax, s);
                  double maximum = std::max(o.maximum[size_t(row)], blockMax);
                  double rescale = std::exp(o.maximum[size_t(row)] - maximum); // 0 before the first block
                  o.denominator[size_t(row)] *= rescale;
                  double *sum = o.sum.data() + row * d.valueSize;
                  for (int64_t e = 0; e < d.valueSize; ++e)
                    sum[e] *= rescale;
                  for (int64_t c = 0; c < d.keys; ++c) {
                    if (std::isnan(scores[size_t(c)]))
                      continue;
                    double p = std::exp(scores[size_t(c)] - maximum);
                    o.denominator[size_t(row)] += p;
                    // Dropout weighs the value, not the denominator.
                    double weight = p * ring.factor(d, g, row % d.queries, owner, c);
                    const float *vc = blocks.value() + d.keyRow(g, c) * d.valueSize;
                    for (int64_t e = 0; e < d.valueSize; ++e)
                      sum[e] += weight * double(vc[e]);
                  }
                  o.maximum[size_t(row)] = maximum;
                });
  return o;
}

Ring ringOf(float scale, bool causal, StepCollectives &collectives, const std::string &axis,
            const AttentionDropout &dropout) {
  return Ring{collectives.rankOn(axis), collectives.ranksOn(axis), double(scale), causal, dropout};
}

} // namespace

Tensor ringAttention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal,
                     StepCollectives &collectives, const std::string &axis, const AttentionDropout &dropout) {
  Dims d = dimsOf(q, k, v, mask, "attention (ring)");
  Ring ring = ringOf(scale, causal, collectives, axis, dropout);
  Online o = forwardRing(d, ring, q, blocksOf(d, k, v, mask, false), collectives, axis);
  Tensor out = Tensor::zeros({d.batch, d.heads, d.queries, d.valueSize});
  for (int64_t row = 0; row < d.rows(); ++row)
    for (int64_t e = 0; e < d.valueSize; ++e)
      out.floats[size_t(row * d.valueSize + e)] =
          o.denominator[size_t(row)] > 0 ? float(o.sum[size_t(row * d.valueSize + e)] / o.denominator[size_t(row)])
                                         : 0.0f;
  return out;
}

std::vector<Tensor> ringAttentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                      const Tensor &dOut, float scale, bool causal, StepCollectives &collectives,
                                      const std::string &axis, const AttentionDropout &dropout) {
  const char *op = "attention_grad (ring)";
  Dims d = dimsOf(q, k, v, mask, op);
  if (dOut.integer || dOut.shape != Shape{d.batch, d.heads, d.queries, d.valueSize})
    fail(op, "the result gradient is " + describe(dOut.shape));
  Ring ring = ringOf(scale, causal, collectives, axis, dropout);
  // The rows' log-sum-exp and dO . O, from the forward ring again.
  Online o = forwardRing(d, ring, q, blocksOf(d, k, v, mask, false), collectives, axis);
  TrackedVector<double> logSumExp = scratch<double>(size_t(d.rows())), dot = scratch<double>(size_t(d.rows()), 0.0);
  for (int64_t row = 0; row < d.rows(); ++row) {
    double l = o.denominator[size_t(row)];
    logSumExp[size_t(row)] = l > 0 ? o.maximum[size_t(row)] + std::log(l) : std::numeric_limits<double>::infinity();
    for (int64_t e = 0; e < d.valueSize; ++e)
      if (l > 0)
        dot[size_t(row)] += double(dOut.floats[size_t(row * d.valueSize + e)]) *
                            (o.sum[size_t(row * d.valueSize + e)] / l);
  }
  Tensor dq = Tensor::zeros(q.shape);
  Blocks blocks = blocksOf(d, k, v, mask, true);
  aroundTheRing(d, ring, q, blocks, collectives, axis,
                [&](int64_t row, int64_t g, int64_t owner, const std::vector<double> &scores) {
                  const float *dOi = dOut.floats.data() + row * d.valueSize;
                  const float *qi = q.floats.data() + row * d.size;
                  float *dqi = dq.floats.data() + row * d.size;
                  for (int64_t c = 0; c < d.keys; ++c) {
                    if (std::isnan(scores[size_t(c)]))
                      continue;
                    double p = std::exp(scores[size_t(c)] - logSumExp[size_t(row)]);
                    double factor = ring.factor(d, g, row % d.queries, owner, c);
                    const float *vc = blocks.value() + d.keyRow(g, c) * d.valueSize;
                    const float *kc = blocks.key() + d.keyRow(g, c) * d.size;
                    float *dvc = blocks.valueGradient() + d.keyRow(g, c) * d.valueSize;
                    float *dkc = blocks.keyGradient() + d.keyRow(g, c) * d.size;
                    double dp = 0;
                    for (int64_t e = 0; e < d.valueSize; ++e) {
                      dvc[e] += float(p * factor * double(dOi[e]));
                      dp += double(dOi[e]) * double(vc[e]);
                    }
                    dp *= factor;
                    double ds = p * (dp - dot[size_t(row)]) * ring.scale;
                    for (int64_t e = 0; e < d.size; ++e) {
                      dqi[e] += float(ds * double(kc[e]));
                      dkc[e] += float(ds * double(qi[e]));
                    }
                  }
                });
  // The gradients of the block this rank holds last belong to the next
  // rank: one more step hands every block's to its owner.
  Floats gradients = buffer<float>(0, MemoryCategory::Communication);
  gradients.assign(blocks.data.begin() + blocks.keyGrad, blocks.data.end());
  if (ring.ranks > 1)
    gradients = shifted(std::move(gradients), collectives, axis);
  Tensor dk = Tensor::ofFloats(k.shape, Floats(gradients.begin(), gradients.begin() + d.keyFloats()));
  Tensor dv = Tensor::ofFloats(v.shape, Floats(gradients.begin() + d.keyFloats(), gradients.end()));
  return results(std::move(dq), std::move(dk), std::move(dv));
}

} // namespace colossal::rt::host
