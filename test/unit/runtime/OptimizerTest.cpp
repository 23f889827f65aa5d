//===- OptimizerTest.cpp - fused optimizer steps against float64 formulas -===//

#include "Reference.h"

#include "colossal/runtime/kernels/Optimizers.h"

using namespace colossal::rt;
using namespace colossal::rt::test;

namespace {

const Stream host{};

/// Two tensors, the second a "bias" (no decay; no LARS trust ratio).
struct State {
  std::vector<float> w0, w1, g0, g1, m0, m1, v0, v1;
  State() {
    w0 = randomVector(300, 1), w1 = randomVector(17, 2);
    m0.assign(300, 0), m1.assign(17, 0), v0.assign(300, 0), v1.assign(17, 0);
  }
  void gradients(unsigned step) { g0 = randomVector(300, 100 + step), g1 = randomVector(17, 200 + step); }
  std::vector<OptimizerTensor> tensors() {
    OptimizerTensor a{w0.data(), g0.data(), m0.data(), v0.data(), g0.data(), 300, true, true};
    OptimizerTensor b{w1.data(), g1.data(), m1.data(), v1.data(), g1.data(), 17, false, false};
    return {a, b};
  }
};

struct RefTensor {
  std::vector<double> w, m, v;
  bool decay;
};

TEST(OptimizerTest, AdamWMatchesTheDecoupledFormula) {
  State s;
  std::vector<RefTensor> ref = {{widen(s.w0), std::vector<double>(300), std::vector<double>(300), true},
                                {widen(s.w1), std::vector<double>(17), std::vector<double>(17), false}};
  AdamSettings a;
  a.lr = 0.01f, a.weightDecay = 0.1f;
  const float gradScale = 0.5f;
  for (unsigned step = 1; step <= 3; ++step) {
    s.gradients(step);
    a.step = step;
    auto tensors = s.tensors();
    cpu::adamwStep(host, tensors.data(), 2, a, gradScale);
    const std::vector<float> *grads[] = {&s.g0, &s.g1};
    for (size_t t = 0; t < 2; ++t)
      for (size_t i = 0; i < ref[t].w.size(); ++i) {
        double g = double((*grads[t])[i]) * gradScale;
        double &w = ref[t].w[i], &m = ref[t].m[i], &v = ref[t].v[i];
        if (ref[t].decay)
          w *= 1 - double(a.lr) * a.weightDecay;
        m = a.beta1 * m + (1 - double(a.beta1)) * g;
        v = a.beta2 * v + (1 - double(a.beta2)) * g * g;
        double mhat = m / (1 - std::pow(double(a.beta1), step)), vhat = v / (1 - std::pow(double(a.beta2), step));
        w -= a.lr * mhat / (std::sqrt(vhat) + a.eps);
      }
  }
  expectClose(s.w0, ref[0].w, 1e-5, 1e-6, "adamw w0");
  expectClose(s.w1, ref[1].w, 1e-5, 1e-6, "adamw w1");
}

void lambReference(std::vector<RefTensor> &ref, const std::vector<std::vector<float>> &grads, const AdamSettings &a,
                   unsigned step) {
  for (size_t t = 0; t < ref.size(); ++t) {
    std::vector<double> u(ref[t].w.size());
    double wn = 0, un = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      double g = grads[t][i];
      ref[t].m[i] = a.beta1 * ref[t].m[i] + (1 - double(a.beta1)) * g;
      ref[t].v[i] = a.beta2 * ref[t].v[i] + (1 - double(a.beta2)) * g * g;
      double mhat = ref[t].m[i] / (1 - std::pow(double(a.beta1), step));
      double vhat = ref[t].v[i] / (1 - std::pow(double(a.beta2), step));
      u[i] = mhat / (std::sqrt(vhat) + a.eps) + (ref[t].decay ? a.weightDecay * ref[t].w[i] : 0.0);
      wn += ref[t].w[i] * ref[t].w[i];
      un += u[i] * u[i];
    }
    double ratio = wn > 0 && un > 0 ? std::sqrt(wn) / std::sqrt(un) : 1.0;
    for (size_t i = 0; i < u.size(); ++i)
      ref[t].w[i] -= a.lr * ratio * u[i];
  }
}

TEST(OptimizerTest, LambTwoStagesMatchThePaper) {
  State s;
  std::vector<RefTensor> ref = {{widen(s.w0), std::vector<double>(300), std::vector<double>(300), true},
                                {widen(s.w1), std::vector<double>(17), std::vector<double>(17), false}};
  AdamSettings a;
  a.lr = 0.02f, a.weightDecay = 0.01f, a.eps = 1e-6f;
  for (unsigned step = 1; step <= 3; ++step) {
    s.gradients(step);
    a.step = step;
    lambReference(ref, {s.g0, s.g1}, a, step);
    auto tensors = s.tensors();
    float squares[4];
    cpu::lambStage1(host, tensors.data(), 2, a, 1.0f, squares);
    cpu::lambStage2(host, tensors.data(), 2, a.lr, squares);
  }
  expectClose(s.w0, ref[0].w, 1e-5, 1e-6, "lamb w0");
  expectClose(s.w1, ref[1].w, 1e-5, 1e-6, "lamb w1");
}

TEST(OptimizerTest, LambOnShardsWithCompletedNormsEqualsUnsharded) {
  // One tensor split in two shards, as ZeRO or tensor parallelism holds it:
  // partial squares are summed (the all-reduce) before stage 2.
  State whole, shards;
  AdamSettings a;
  a.lr = 0.05f, a.weightDecay = 0.01f, a.eps = 1e-6f;
  for (unsigned step = 1; step <= 3; ++step) {
    whole.gradients(step);
    shards.gradients(step);
    a.step = step;
    auto t = whole.tensors();
    float squares[2];
    cpu::lambStage1(host, t.data(), 1, a, 1.0f, squares);
    cpu::lambStage2(host, t.data(), 1, a.lr, squares);

    OptimizerTensor full = shards.tensors()[0];
    OptimizerTensor lo = full, hi = full;
    lo.n = 123;
    hi.param += 123, hi.grad += 123, hi.m += 123, hi.v += 123, hi.update += 123, hi.n = 300 - 123;
    float partLo[2], partHi[2];
    cpu::lambStage1(host, &lo, 1, a, 1.0f, partLo);
    cpu::lambStage1(host, &hi, 1, a, 1.0f, partHi);
    float completed[2] = {partLo[0] + partHi[0], partLo[1] + partHi[1]};
    cpu::lambStage2(host, &lo, 1, a.lr, completed);
    cpu::lambStage2(host, &hi, 1, a.lr, completed);
  }
  expectClose(shards.w0, widen(whole.w0), 1e-6, 1e-7, "sharded lamb");
}

TEST(OptimizerTest, SgdMomentumNesterovAndLars) {
  for (bool nesterov : {false, true}) {
    State s;
    std::vector<double> w = widen(s.w0), buf(300);
    SgdSettings sgd;
    sgd.lr = 0.1f, sgd.momentum = 0.9f, sgd.weightDecay = 0.01f, sgd.nesterov = nesterov;
    for (unsigned step = 1; step <= 3; ++step) {
      s.gradients(step);
      sgd.step = step;
      auto t = s.tensors();
      cpu::sgdStep(host, t.data(), 1, sgd, 1.0f);
      for (size_t i = 0; i < 300; ++i) {
        double d = s.g0[i] + double(sgd.weightDecay) * w[i];
        buf[i] = step == 1 ? d : sgd.momentum * buf[i] + d;
        w[i] -= sgd.lr * (nesterov ? d + sgd.momentum * buf[i] : buf[i]);
      }
    }
    expectClose(s.w0, w, 1e-5, 1e-6, nesterov ? "sgd nesterov" : "sgd momentum");
  }

  State s;
  std::vector<double> w0 = widen(s.w0), w1 = widen(s.w1), v0(300), v1(17);
  LarsSettings lars;
  lars.lr = 0.5f, lars.momentum = 0.9f, lars.eta = 0.02f, lars.weightDecay = 0.005f;
  for (unsigned step = 1; step <= 3; ++step) {
    s.gradients(step);
    auto t = s.tensors();
    float squares[4];
    cpu::tensorSquares(host, t.data(), 2, 1.0f, squares);
    cpu::larsStep(host, t.data(), 2, lars, 1.0f, squares);
    double wn = 0, gn = 0;
    for (size_t i = 0; i < 300; ++i)
      wn += w0[i] * w0[i], gn += double(s.g0[i]) * s.g0[i];
    double local = lars.eta * std::sqrt(wn) / (std::sqrt(gn) + lars.weightDecay * std::sqrt(wn));
    for (size_t i = 0; i < 300; ++i) {
      v0[i] = lars.momentum * v0[i] + lars.lr * local * (s.g0[i] + double(lars.weightDecay) * w0[i]);
      w0[i] -= v0[i];
    }
    for (size_t i = 0; i < 17; ++i) { // the bias: local lr 1, no decay
      v1[i] = lars.momentum * v1[i] + lars.lr * double(s.g1[i]);
      w1[i] -= v1[i];
    }
  }
  expectClose(s.w0, w0, 1e-5, 1e-6, "lars weights");
  expectClose(s.w1, w1, 1e-5, 1e-6, "lars bias");
}

} // namespace

// Millions of parameters update on several threads (ParallelElements.h):
// the same bits as the same elements updated 100,000 at a time, each call
// too small for a second thread.
TEST(OptimizerTest, ThreadedElementwiseStepsEqualSmallSequentialOnes) {
  const int64_t n = int64_t(3) << 20, piece = 100000;
  std::vector<float> grad = randomVector(size_t(n), 7), start = randomVector(size_t(n), 8);
  for (const char *name : {"adamw", "sgd", "lars", "lamb stage 2"}) {
    std::vector<float> w[2] = {start, start}, m[2] = {grad, grad}, v[2] = {grad, grad};
    for (float &x : v[0])
      x = x * x;
    v[1] = v[0];
    std::vector<float> squares = {12.0f, 3.0f};
    AdamSettings a;
    a.lr = 0.01f, a.weightDecay = 0.1f, a.step = 3;
    SgdSettings sgd;
    sgd.lr = 0.1f, sgd.momentum = 0.9f, sgd.weightDecay = 0.01f, sgd.step = 2;
    LarsSettings lars;
    lars.lr = 0.1f, lars.weightDecay = 0.01f;
    auto run = [&](int copy, int64_t begin, int64_t end) {
      OptimizerTensor t{w[copy].data() + begin,
                        const_cast<float *>(grad.data()) + begin,
                        m[copy].data() + begin,
                        v[copy].data() + begin,
                        const_cast<float *>(grad.data()) + begin,
                        end - begin,
                        true,
                        true};
      std::string which = name;
      if (which == "adamw")
        cpu::adamwStep(host, &t, 1, a, 0.5f);
      else if (which == "sgd")
        cpu::sgdStep(host, &t, 1, sgd, 0.5f);
      else if (which == "lars")
        cpu::larsStep(host, &t, 1, lars, 0.5f, squares.data());
      else
        cpu::lambStage2(host, &t, 1, 0.01f, squares.data());
    };
    run(0, 0, n);
    for (int64_t begin = 0; begin < n; begin += piece)
      run(1, begin, std::min(n, begin + piece));
    EXPECT_EQ(w[0], w[1]) << name;
    EXPECT_EQ(m[0], m[1]) << name;
  }
}

// Per-tensor sums (norms, LAMB's first stage) take a whole tensor to a
// thread: the same bits as each tensor alone.
TEST(OptimizerTest, ThreadedPerTensorSumsEqualOneTensorAtATime) {
  const int tensors = 12;
  const int64_t n = 300000;
  std::vector<std::vector<float>> w, g, m[2], v[2], u[2];
  for (int t = 0; t < tensors; ++t) {
    w.push_back(randomVector(size_t(n - t), 30 + t));
    g.push_back(randomVector(size_t(n - t), 60 + t));
    for (int copy = 0; copy < 2; ++copy) {
      m[copy].push_back(g.back()), v[copy].push_back(std::vector<float>(size_t(n - t), 0.5f));
      u[copy].push_back(std::vector<float>(size_t(n - t)));
    }
  }
  auto tensor = [&](int copy, int t) {
    return OptimizerTensor{w[t].data(),       g[t].data(), m[copy][t].data(), v[copy][t].data(),
                           u[copy][t].data(), n - t,       t % 2 == 0,        true};
  };
  AdamSettings a;
  a.lr = 0.01f, a.weightDecay = 0.1f, a.step = 2;
  std::vector<OptimizerTensor> all;
  for (int t = 0; t < tensors; ++t)
    all.push_back(tensor(0, t));
  std::vector<float> squares(2 * tensors), lamb(2 * tensors), alone(2), lambAlone(2);
  cpu::tensorSquares(host, all.data(), tensors, 0.5f, squares.data());
  cpu::lambStage1(host, all.data(), tensors, a, 0.5f, lamb.data());
  for (int t = 0; t < tensors; ++t) {
    OptimizerTensor one = tensor(1, t);
    cpu::tensorSquares(host, &one, 1, 0.5f, alone.data());
    cpu::lambStage1(host, &one, 1, a, 0.5f, lambAlone.data());
    EXPECT_EQ(alone[0], squares[2 * t]) << t;
    EXPECT_EQ(alone[1], squares[2 * t + 1]) << t;
    EXPECT_EQ(lambAlone[0], lamb[2 * t]) << t;
    EXPECT_EQ(lambAlone[1], lamb[2 * t + 1]) << t;
    EXPECT_EQ(u[0][t], u[1][t]) << t;
  }
}
