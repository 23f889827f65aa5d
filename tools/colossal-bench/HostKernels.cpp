//===- HostKernels.cpp - what the host's kernels achieve ------------------===//

#include "HostKernels.h"
#include "Timing.h"

#include "colossal/runtime/kernels/HostTensor.h"
#include "colossal/runtime/kernels/Optimizers.h"
#include "colossal/runtime/kernels/RingAttention.h"
#include "colossal/runtime/train/StepInterface.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace colossal::bench {
namespace {

using cost::KernelKind;
using rt::host::Shape;
using rt::host::Tensor;

Tensor filled(Shape shape) {
  Tensor t = Tensor::zeros(std::move(shape));
  for (size_t i = 0; i < t.floats.size(); ++i)
    t.floats[i] = 0.01f * float(int(i % 13) - 6);
  return t;
}

Tensor labels(int64_t rows, int64_t classes) {
  Tensor t = Tensor::zeros({rows}, /*integer=*/true);
  for (int64_t i = 0; i < rows; ++i)
    t.ints[size_t(i)] = (i * 7919) % classes;
  return t;
}

/// Seconds per call of `body`, repeated inside each sample until a sample
/// lasts about 2 ms (every rank the same count).
double perCall(rt::Communicator &world, int repeats, const std::function<void()> &body, bool alone = false) {
  double probe = now();
  body();
  probe = now() - probe;
  world.allReduce(rt::Buffer::of(&probe, rt::DType::F64, 1), rt::ReduceOp::Max);
  int inner = int(std::clamp(std::ceil(2e-3 / std::max(probe, 1e-9)), 1.0, 2000.0));
  double seconds = timed(
      world, repeats,
      [&] {
        for (int i = 0; i < inner; ++i)
          body();
      },
      [] {}, alone);
  return seconds / inner;
}

/// A ring of one rank: every collective returns its input.
class OneRankRing : public rt::StepCollectives {
public:
  Tensor allReduce(const Tensor &x, const std::string &) override { return x; }
  Tensor allReduceMax(const Tensor &x, const std::string &) override { return x; }
  Tensor allGather(const Tensor &x, const std::string &, int64_t) override { return x; }
  Tensor reduceScatter(const Tensor &x, const std::string &, int64_t) override { return x; }
  Tensor allToAll(const Tensor &x, const std::string &, int64_t, int64_t) override { return x; }
  Tensor ringShift(const Tensor &x, const std::string &) override { return x; }
  int64_t rankOn(const std::string &) override { return 0; }
  int64_t ranksOn(const std::string &) override { return 1; }
};

/// t = call + bytes / rate by least squares over the sizes measured; a
/// negative intercept is taken as none.
cost::StreamingCost fit(const std::vector<double> &bytes, const std::vector<double> &seconds) {
  double n = double(bytes.size()), mb = 0, mt = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    mb += bytes[i] / n, mt += seconds[i] / n;
  double sbt = 0, sbb = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    sbt += (bytes[i] - mb) * (seconds[i] - mt), sbb += (bytes[i] - mb) * (bytes[i] - mb);
  double slope = sbt / sbb, call = mt - slope * mb;
  if (call < 0 || slope <= 0) {
    call = 0, sbt = 0, sbb = 0;
    for (size_t i = 0; i < bytes.size(); ++i)
      sbt += bytes[i] * seconds[i], sbb += bytes[i] * bytes[i];
    slope = sbt / sbb;
  }
  return {call, 1 / slope};
}

/// One memory-bound kind at a size: its forward and backward bodies and the
/// bytes the cost model charges them (KernelTime.cpp).
struct StreamingCase {
  double forwardBytes, backwardBytes;
  std::function<void()> forward, backward;
};

StreamingCase streamingCase(KernelKind kind, int64_t n) {
  const int64_t cols = kind == KernelKind::Loss ? 1024 : 256, rows = n / cols;
  auto x = std::make_shared<Tensor>(filled({rows, cols})), dy = std::make_shared<Tensor>(filled({rows, cols}));
  double bytes = double(n) * 4;
  switch (kind) {
  case KernelKind::Elementwise: {
    // A residual add forward; a same-sized product backward (a product's
    // factor gradient, a transpose's transpose).
    auto y = std::make_shared<Tensor>(filled({rows, cols}));
    return {3 * bytes, 3 * bytes,
            [=] {
              rt::host::binary(rt::host::Binary::Add, *x, *y, {rows, cols}, false);
            },
            [=] {
              rt::host::binary(rt::host::Binary::Mul, *dy, *y, {rows, cols}, false);
            }};
  }
  case KernelKind::Transcendental:
    return {2 * bytes, 2 * bytes, [=] { rt::host::unary(rt::host::Unary::Gelu, *x); },
            [=] { rt::host::geluGrad(*x, *dy, false); }};
  case KernelKind::Norm: {
    auto scale = std::make_shared<Tensor>(filled({cols})), bias = std::make_shared<Tensor>(filled({cols}));
    return {2 * bytes, 2 * bytes, [=] { rt::host::layerNorm(*x, scale.get(), bias.get(), -1, 1e-5f); },
            [=] { rt::host::layerNormGrad(*x, scale.get(), *dy, -1, 1e-5f, true, 3); }};
  }
  case KernelKind::Softmax: {
    // The backward the train dialect's rule emits: y (dy - sum(dy y)).
    auto y = std::make_shared<Tensor>(rt::host::softmax(*x, -1, false));
    return {2 * bytes, 2 * bytes, [=] { rt::host::softmax(*x, -1, false); },
            [=] {
              Tensor p = rt::host::binary(rt::host::Binary::Mul, *dy, *y, {rows, cols}, false);
              Tensor s = rt::host::reduce(rt::host::ReduceKind::Sum, p, {1}, {rows, 1});
              Tensor d = rt::host::binary(rt::host::Binary::Sub, *dy, s, {rows, cols}, false);
              rt::host::binary(rt::host::Binary::Mul, d, *y, {rows, cols}, false);
            }};
  }
  case KernelKind::Loss: {
    auto target = std::make_shared<Tensor>(labels(rows, cols));
    auto dloss = std::make_shared<Tensor>(Tensor::ofFloats(Shape{}, std::vector<float>{1.0f}));
    return {bytes + 8.0 * double(rows), bytes + 8.0 * double(rows),
            [=] { rt::host::crossEntropy(*x, *target, std::nullopt, "mean"); },
            [=] { rt::host::crossEntropyGrad(*x, *target, *dloss, std::nullopt, "mean"); }};
  }
  case KernelKind::Embedding: {
    // A table of 1024 rows; forward reads the rows it looks up and writes
    // them; backward makes the whole table's gradient.
    const int64_t vocab = 1024, tokens = rows;
    auto table = std::make_shared<Tensor>(filled({vocab, cols}));
    auto ids = std::make_shared<Tensor>(labels(tokens, vocab));
    return {2 * bytes, double(vocab * cols) * 4 + 2 * bytes,
            [=] {
              rt::host::gather(*table, *ids, 0, {tokens, cols});
            },
            [=] {
              rt::host::gatherGrad(*ids, *dy, 0, {vocab, cols});
            }};
  }
  }
  return {};
}

} // namespace

double HostKernelMeasurements::bestGemmRate() const {
  double best = 0;
  for (const Gemm &g : gemm)
    best = std::max(best, g.flopsPerSecond);
  return best;
}

cost::KernelRates HostKernelMeasurements::rates(double peak) const {
  cost::KernelRates r;
  for (const Gemm &g : gemm)
    r.gemm.push_back({g.m, g.n, g.k, std::min(1.0, g.flopsPerSecond / peak)});
  r.indexGemmGrid();
  for (const Attention &a : attention) {
    (a.ring     ? r.ringAttentionForward
     : a.causal ? r.causalAttentionForward
                : r.attentionForward)
        .push_back({a.keys, std::min(1.0, a.forwardFlopsPerSecond / peak)});
    (a.ring     ? r.ringAttentionBackward
     : a.causal ? r.causalAttentionBackward
                : r.attentionBackward)
        .push_back({a.keys, std::min(1.0, a.backwardFlopsPerSecond / peak)});
  }
  r.streaming = streaming;
  r.optimizerBytesPerSecond = r.hostOptimizerBytesPerSecond = optimizerBytesPerSecond;
  r.aloneSpeedupGemm = aloneSpeedupGemm;
  r.aloneSpeedupStreaming = aloneSpeedupStreaming;
  r.aloneSpeedupOptimizer = aloneSpeedupOptimizer;
  return r;
}

double measureHostOptimizer(rt::Communicator &world, bool quick, double *aloneSpeedup) {
  // A LAMB step (the gradient norm, both stages) over four tensors, against
  // the cost model's fp32 traffic: read weight, gradient, master, m and v,
  // write weight, master, m and v (ModelStates.cpp).
  int repeats = quick ? 3 : 5;
  int64_t each = quick ? (1 << 16) : (1 << 18);
  std::vector<std::vector<float>> storage(4 * 4, std::vector<float>(size_t(each), 0.01f));
  std::vector<rt::OptimizerTensor> tensors(4);
  for (int i = 0; i < 4; ++i)
    tensors[size_t(i)] = {storage[size_t(4 * i)].data(),     storage[size_t(4 * i + 1)].data(),
                          storage[size_t(4 * i + 2)].data(), storage[size_t(4 * i + 3)].data(),
                          storage[size_t(4 * i + 1)].data(), each};
  std::vector<float> squares(8);
  rt::AdamSettings settings;
  auto step = [&] {
    rt::cpu::tensorSquares(rt::Stream{}, tensors.data(), 4, 1.0f, squares.data());
    rt::cpu::lambStage1(rt::Stream{}, tensors.data(), 4, settings, 1.0f, squares.data());
    rt::cpu::lambStage2(rt::Stream{}, tensors.data(), 4, 1e-3f, squares.data());
  };
  double seconds = perCall(world, repeats, step);
  // The host optimizer spreads its elements over the cores: alone, a rank
  // has them all.
  if (aloneSpeedup)
    *aloneSpeedup = world.size() > 1 ? seconds / perCall(world, repeats, step, true) : 1;
  return 4.0 * double(each) * 36 / seconds;
}

HostKernelMeasurements measureHostKernels(rt::Communicator &world, bool quick) {
  HostKernelMeasurements out;
  int repeats = quick ? 3 : 5;

  // GEMM on a grid of shapes, as matmul allocates its result.
  std::vector<int64_t> dims = quick ? std::vector<int64_t>{64, 256, 1024} : std::vector<int64_t>{32, 128, 512, 2048};
  for (int64_t m : dims)
    for (int64_t n : dims)
      for (int64_t k : dims) {
        Tensor a = filled({m, k}), b = filled({k, n});
        double seconds = perCall(world, repeats, [&] { rt::host::matmul(a, b, {m, n}); });
        out.gemm.push_back({double(m), double(n), double(k), 2.0 * double(m * n * k) / seconds});
      }

  // Fused attention, 8 heads of 64, without a mask and causal.
  for (bool causal : {false, true})
    for (int64_t s : quick ? std::vector<int64_t>{64, 256} : std::vector<int64_t>{64, 128, 256, 512}) {
      Tensor q = filled({1, 8, s, 64}), k = filled({1, 8, s, 64}), v = filled({1, 8, s, 64});
      Tensor dO = filled({1, 8, s, 64});
      float scale = 0.125f;
      double flops = 4.0 * 8 * double(s) * double(s) * 64;
      double forward = perCall(world, repeats, [&] { rt::host::attention(q, k, v, nullptr, scale, causal); });
      double backward = perCall(world, repeats, [&] { rt::host::attentionGrad(q, k, v, nullptr, dO, scale, causal); });
      out.attention.push_back({causal, false, double(s), flops / forward, 2 * flops / backward});
    }
  // Sequence parallelism's ring kernel, on a ring of one rank (its blocks'
  // arithmetic without the sends).
  for (int64_t s : quick ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{64, 128, 256}) {
    Tensor q = filled({1, 8, s, 64}), k = filled({1, 8, s, 64}), v = filled({1, 8, s, 64});
    Tensor dO = filled({1, 8, s, 64});
    OneRankRing ring;
    double flops = 4.0 * 8 * double(s) * double(s) * 64;
    double forward =
        perCall(world, repeats, [&] { rt::host::ringAttention(q, k, v, nullptr, 0.125f, false, ring, "sp"); });
    double backward =
        perCall(world, repeats, [&] { rt::host::ringAttentionGrad(q, k, v, nullptr, dO, 0.125f, false, ring, "sp"); });
    out.attention.push_back({false, true, double(s), flops / forward, 2 * flops / backward});
  }

  // Memory-bound kinds at three sizes.
  for (KernelKind kind : cost::allKernelKinds()) {
    std::vector<double> forwardBytes, forwardSeconds, backwardBytes, backwardSeconds;
    for (int64_t n : {int64_t(1) << 14, int64_t(1) << 17, int64_t(1) << 20}) {
      StreamingCase c = streamingCase(kind, n);
      forwardBytes.push_back(c.forwardBytes);
      forwardSeconds.push_back(perCall(world, repeats, c.forward));
      backwardBytes.push_back(c.backwardBytes);
      backwardSeconds.push_back(perCall(world, repeats, c.backward));
    }
    out.streaming[kind] = {fit(forwardBytes, forwardSeconds), fit(backwardBytes, backwardSeconds)};
  }

  out.optimizerBytesPerSecond = measureHostOptimizer(world, quick, &out.aloneSpeedupOptimizer);

  // The same kernels on rank 0 with the others idle.
  if (world.size() > 1) {
    Tensor a = filled({512, 256}), b = filled({256, 1024}), x = filled({1024, 1024});
    auto gemm = [&] { rt::host::matmul(a, b, {512, 1024}); };
    auto gelu = [&] { rt::host::unary(rt::host::Unary::Gelu, x); };
    out.aloneSpeedupGemm = perCall(world, repeats, gemm) / perCall(world, repeats, gemm, true);
    out.aloneSpeedupStreaming = perCall(world, repeats, gelu) / perCall(world, repeats, gelu, true);
  }
  return out;
}

} // namespace colossal::bench
