//===- KernelTest.cpp - host kernels against float64 references -----------===//

#include "Reference.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/HostTensor.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/kernels/Philox.h"

#include <algorithm>
#include <limits>

using namespace colossal::rt;
using namespace colossal::rt::test;

namespace {

const Stream host{};

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

std::vector<double> referenceGemm(const GemmShape &s, const std::vector<double> &a,
                                  const std::vector<double> &b, const std::vector<double> &c, double alpha,
                                  double beta) {
  std::vector<double> out(c);
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < s.k; ++p) {
          double av = s.transA ? a[bi * s.strideA + p * s.m + i] : a[bi * s.strideA + i * s.k + p];
          double bv = s.transB ? b[bi * s.strideB + j * s.k + p] : b[bi * s.strideB + p * s.n + j];
          sum += av * bv;
        }
        double &o = out[bi * s.strideC + i * s.n + j];
        o = alpha * sum + beta * o;
      }
  return out;
}

TEST(GemmTest, Float32AllTransposesBatched) {
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      GemmShape s;
      s.m = 13, s.n = 7, s.k = 29, s.transA = transA, s.transB = transB, s.batch = 3;
      s.strideA = s.m * s.k, s.strideB = s.k * s.n, s.strideC = s.m * s.n;
      auto a = randomVector(size_t(s.batch * s.strideA), 1), b = randomVector(size_t(s.batch * s.strideB), 2);
      auto c = randomVector(size_t(s.batch * s.strideC), 3);
      auto want = referenceGemm(s, widen(a), widen(b), widen(c), 0.5, 2.0);
      cpu::gemm(host, s, DType::F32, a.data(), b.data(), c.data(), 0.5f, 2.0f);
      expectClose(c, want, 1e-5, 1e-5, "sgemm");
    }
}

TEST(GemmTest, SixteenBitOperandsAccumulateInFloat) {
  for (DType dtype : {DType::BF16, DType::F16}) {
    GemmShape s;
    s.m = 8, s.n = 5, s.k = 300, s.strideA = s.m * s.k, s.strideB = s.k * s.n, s.strideC = s.m * s.n;
    auto a = randomVector(size_t(s.m * s.k), 4), b = randomVector(size_t(s.k * s.n), 5);
    std::vector<uint16_t> a16(a.size()), b16(b.size()), c16(static_cast<size_t>(s.m * s.n));
    cpu::cast(host, a.data(), DType::F32, a16.data(), dtype, int64_t(a.size()));
    cpu::cast(host, b.data(), DType::F32, b16.data(), dtype, int64_t(b.size()));
    // The reference multiplies the rounded operands exactly.
    std::vector<float> aRounded(a.size()), bRounded(b.size());
    cpu::cast(host, a16.data(), dtype, aRounded.data(), DType::F32, int64_t(a.size()));
    cpu::cast(host, b16.data(), dtype, bRounded.data(), DType::F32, int64_t(b.size()));
    auto want = referenceGemm(s, widen(aRounded), widen(bRounded), std::vector<double>(c16.size()), 1, 0);
    cpu::gemm(host, s, dtype, a16.data(), b16.data(), c16.data(), 1.0f, 0.0f);
    std::vector<float> got(c16.size());
    cpu::cast(host, c16.data(), dtype, got.data(), DType::F32, int64_t(got.size()));
    // Only the final rounding to 16 bits separates them: half an ulp.
    expectClose(got, want, dtype == DType::BF16 ? 1.0 / 256 : 1.0 / 2048, 1e-6, nameOf(dtype));
  }
}

TEST(GemmTest, RejectsBadShapes) {
  GemmShape s;
  s.m = -1;
  float x = 0;
  EXPECT_THROW(cpu::gemm(host, s, DType::F32, &x, &x, &x, 1, 0), Error);
}

//===----------------------------------------------------------------------===//
// 16-bit conversions
//===----------------------------------------------------------------------===//

TEST(DTypeTest, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00); // rounds up to infinity
  EXPECT_EQ(floatToF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToF16(5.9604644775390625e-8f), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToF16(2.98023223876953125e-8f), 0x0000); // half of it: ties to even (0)
  EXPECT_EQ(floatToF16(1.0f + 1.0f / 2048), 0x3c00);      // tie: to even
  EXPECT_EQ(floatToF16(1.0f + 3.0f / 2048), 0x3c02);      // tie: to even (up)
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(std::nanf("")))));
  for (uint32_t h = 0; h < 0x7c00; ++h) // every finite half round-trips
    ASSERT_EQ(floatToF16(f16ToFloat(uint16_t(h))), h) << h;
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(bitsFloat(0x3f808000u)), 0x3f80); // tie: to even
  EXPECT_EQ(floatToBf16(bitsFloat(0x3f818000u)), 0x3f82);
  for (uint32_t h = 0; h < 0x7f80; ++h)
    ASSERT_EQ(floatToBf16(bf16ToFloat(uint16_t(h))), h) << h;
}

TEST(DTypeTest, RoundToKeepsSixteenBitValuesInFloat32) {
  // Mixed precision's storage: each element becomes the nearest 16-bit value.
  host::Tensor x = host::Tensor::ofFloats({5}, {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 65520.0f, -3.0e-8f,
                                                std::nanf("")});
  host::Tensor b = host::roundTo(x, DType::BF16);
  EXPECT_EQ(b.floats[0], 1.0f);                // tie: to even
  EXPECT_EQ(b.floats[1], 1.0f + 4.0f / 256);   // tie: to even (up)
  EXPECT_EQ(b.floats[2], 65536.0f);            // bf16 has float32's range
  EXPECT_EQ(b.floats[3], bf16ToFloat(floatToBf16(-3.0e-8f)));
  EXPECT_TRUE(std::isnan(b.floats[4]));
  host::Tensor h = host::roundTo(x, DType::F16);
  EXPECT_EQ(h.floats[0], 1.0f + 1.0f / 256);   // representable in fp16
  EXPECT_TRUE(std::isinf(h.floats[2]));        // past fp16's largest: overflow
  EXPECT_EQ(h.floats[3], -5.9604644775390625e-8f); // the smallest subnormal
  EXPECT_THROW(host::roundTo(x, DType::F32), Error);
  EXPECT_THROW(host::roundTo(host::Tensor::ofInts({1}, {3}), DType::BF16), Error);
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

double geluRef(double x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

TEST(ActivationTest, GeluAndSiluMatchReferencesAndFiniteDifferences) {
  auto x = randomVector(257, 6, -4, 4);
  auto w = randomVector(257, 7);
  int64_t n = int64_t(x.size());
  for (bool tanhApprox : {false, true}) {
    GeluApproximation approx = tanhApprox ? GeluApproximation::Tanh : GeluApproximation::None;
    auto f = [&](const std::vector<double> &in) {
      std::vector<double> out(in.size());
      for (size_t i = 0; i < in.size(); ++i)
        out[i] = geluRef(in[i], tanhApprox);
      return out;
    };
    std::vector<float> y(x.size()), dx(x.size());
    cpu::geluForward(host, x.data(), y.data(), n, approx);
    expectClose(y, f(widen(x)), 1e-6, 1e-7, "gelu");
    cpu::geluBackward(host, x.data(), w.data(), dx.data(), n, approx);
    expectClose(dx, numericGradient(f, widen(x), widen(w)), 1e-5, 1e-6, "gelu backward");
  }
  auto silu = [](const std::vector<double> &in) {
    std::vector<double> out(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      out[i] = in[i] / (1 + std::exp(-in[i]));
    return out;
  };
  std::vector<float> y(x.size()), dx(x.size());
  cpu::siluForward(host, x.data(), y.data(), n);
  expectClose(y, silu(widen(x)), 1e-6, 1e-7, "silu");
  cpu::siluBackward(host, x.data(), w.data(), dx.data(), n);
  expectClose(dx, numericGradient(silu, widen(x), widen(w)), 1e-5, 1e-6, "silu backward");
}

TEST(ElementwiseTest, BiasAndColumnSum) {
  auto x = randomVector(12, 8), bias = randomVector(4, 9);
  std::vector<float> out(12), sums(4);
  cpu::addRowBias(host, x.data(), bias.data(), out.data(), 3, 4);
  cpu::columnSum(host, x.data(), sums.data(), 3, 4);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_FLOAT_EQ(out[size_t(r * 4 + c)], x[size_t(r * 4 + c)] + bias[size_t(c)]);
  for (int c = 0; c < 4; ++c)
    EXPECT_FLOAT_EQ(sums[size_t(c)], x[size_t(c)] + x[size_t(4 + c)] + x[size_t(8 + c)]);
}

//===----------------------------------------------------------------------===//
// Softmax and normalisation
//===----------------------------------------------------------------------===//

const int64_t kRows = 5, kCols = 33;

std::vector<double> softmaxRef(const std::vector<double> &x) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < kCols; ++c)
      sum += std::exp(x[size_t(r * kCols + c)]);
    for (int64_t c = 0; c < kCols; ++c)
      y[size_t(r * kCols + c)] = std::exp(x[size_t(r * kCols + c)]) / sum;
  }
  return y;
}

TEST(NormalizationTest, SoftmaxForwardAndBackward) {
  auto x = randomVector(size_t(kRows * kCols), 10, -3, 3), w = randomVector(x.size(), 11);
  std::vector<float> y(x.size()), dx(x.size());
  cpu::softmaxForward(host, x.data(), y.data(), kRows, kCols);
  expectClose(y, softmaxRef(widen(x)), 1e-6, 1e-8, "softmax");
  cpu::softmaxBackward(host, y.data(), w.data(), dx.data(), kRows, kCols);
  expectClose(dx, numericGradient(softmaxRef, widen(x), widen(w)), 1e-4, 1e-7, "softmax backward");
}

// x, gamma, beta packed in one vector so one finite-difference pass covers all.
std::vector<double> layerNormRef(const std::vector<double> &packed, bool rms) {
  const double eps = 1e-5;
  size_t n = size_t(kRows * kCols);
  std::vector<double> y(n);
  for (int64_t r = 0; r < kRows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < kCols; ++c)
      mean += packed[size_t(r * kCols + c)] / kCols;
    for (int64_t c = 0; c < kCols; ++c) {
      double centred = packed[size_t(r * kCols + c)] - (rms ? 0 : mean);
      var += centred * centred / kCols;
    }
    for (int64_t c = 0; c < kCols; ++c) {
      double xhat = (packed[size_t(r * kCols + c)] - (rms ? 0 : mean)) / std::sqrt(var + eps);
      y[size_t(r * kCols + c)] = xhat * packed[n + size_t(c)] + (rms ? 0 : packed[n + size_t(kCols + c)]);
    }
  }
  return y;
}

TEST(NormalizationTest, LayerNormAndRmsNormForwardAndBackward) {
  for (bool rms : {false, true}) {
    size_t n = size_t(kRows * kCols);
    auto x = randomVector(n, 12, -2, 3), gamma = randomVector(size_t(kCols), 13, 0.5, 1.5);
    auto beta = randomVector(size_t(kCols), 14), w = randomVector(n, 15);
    std::vector<float> y(n), mean(static_cast<size_t>(kRows)), rstd(static_cast<size_t>(kRows)), dx(n), dgamma(static_cast<size_t>(kCols)),
        dbeta(static_cast<size_t>(kCols));
    std::vector<double> packed = widen(x);
    packed.insert(packed.end(), gamma.begin(), gamma.end());
    if (!rms)
      packed.insert(packed.end(), beta.begin(), beta.end());
    auto f = [&](const std::vector<double> &p) { return layerNormRef(p, rms); };
    if (rms) {
      cpu::rmsNormForward(host, x.data(), gamma.data(), y.data(), rstd.data(), kRows, kCols, 1e-5f);
      cpu::rmsNormBackward(host, w.data(), x.data(), gamma.data(), rstd.data(), dx.data(), dgamma.data(), kRows,
                           kCols);
    } else {
      cpu::layerNormForward(host, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), kRows,
                            kCols, 1e-5f);
      cpu::layerNormBackward(host, w.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                             dgamma.data(), dbeta.data(), kRows, kCols);
    }
    expectClose(y, f(packed), 1e-5, 1e-6, rms ? "rms_norm" : "layer_norm");
    auto numeric = numericGradient(f, packed, widen(w));
    std::vector<double> numericX(numeric.begin(), numeric.begin() + long(n));
    std::vector<double> numericGamma(numeric.begin() + long(n), numeric.begin() + long(n) + kCols);
    expectClose(dx, numericX, 1e-4, 1e-6, "normalisation dx");
    expectClose(dgamma, numericGamma, 1e-4, 1e-6, "normalisation dgamma");
    if (!rms) {
      std::vector<double> numericBeta(numeric.begin() + long(n) + kCols, numeric.end());
      expectClose(dbeta, numericBeta, 1e-4, 1e-6, "layer_norm dbeta");
    }
  }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// q, k, v packed; the reference materialises the whole score matrix.
std::vector<double> attentionRef(const AttentionShape &s, const std::vector<double> &packed) {
  int64_t D = s.headDim, qn = s.batchHeads * s.queries * D, kn = s.batchHeads / s.groups * s.keys * D;
  const double *q = packed.data(), *k = q + qn, *v = k + kn;
  std::vector<double> out(size_t(qn), 0.0);
  for (int64_t bh = 0; bh < s.batchHeads; ++bh)
    for (int64_t i = 0; i < s.queries; ++i) {
      std::vector<double> scores(size_t(s.keys), -std::numeric_limits<double>::infinity());
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s.keys; ++j) {
        if (s.causal && s.keyOffset + j > s.queryOffset + i)
          continue;
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += q[(bh * s.queries + i) * D + d] * k[(bh / s.groups * s.keys + j) * D + d];
        scores[size_t(j)] = dot * s.scale;
        max = std::max(max, scores[size_t(j)]);
      }
      if (max == -std::numeric_limits<double>::infinity())
        continue;
      double sum = 0;
      for (double &x : scores)
        sum += (x = std::exp(x - max));
      for (int64_t j = 0; j < s.keys; ++j)
        for (int64_t d = 0; d < D; ++d)
          out[size_t((bh * s.queries + i) * D + d)] += scores[size_t(j)] / sum *
                                                       s.dropout.factor(bh, s.queries, s.keys, i, j) *
                                                       v[(bh / s.groups * s.keys + j) * D + d];
    }
  return out;
}

void checkAttention(const AttentionShape &s, unsigned seed) {
  int64_t D = s.headDim;
  size_t qn = size_t(s.batchHeads * s.queries * D), kn = size_t(s.batchHeads / s.groups * s.keys * D);
  auto q = randomVector(qn, seed), k = randomVector(kn, seed + 1), v = randomVector(kn, seed + 2);
  auto w = randomVector(qn, seed + 3);
  std::vector<float> o(qn), lse(static_cast<size_t>(s.batchHeads * s.queries)), dq(qn), dk(kn), dv(kn);
  cpu::attentionForward(host, s, q.data(), k.data(), v.data(), o.data(), lse.data());
  std::vector<double> packed = widen(q);
  packed.insert(packed.end(), k.begin(), k.end());
  packed.insert(packed.end(), v.begin(), v.end());
  auto f = [&](const std::vector<double> &p) { return attentionRef(s, p); };
  expectClose(o, f(packed), 1e-5, 1e-6, "attention");
  cpu::attentionBackward(host, s, q.data(), k.data(), v.data(), o.data(), w.data(), lse.data(), dq.data(),
                         dk.data(), dv.data());
  auto numeric = numericGradient(f, packed, widen(w));
  expectClose(dq, std::vector<double>(numeric.begin(), numeric.begin() + long(qn)), 1e-4, 1e-6, "attention dq");
  expectClose(dk, std::vector<double>(numeric.begin() + long(qn), numeric.begin() + long(qn + kn)), 1e-4, 1e-6,
              "attention dk");
  expectClose(dv, std::vector<double>(numeric.begin() + long(qn + kn), numeric.end()), 1e-4, 1e-6,
              "attention dv");
}

TEST(AttentionTest, FullAndCausalAcrossKeyBlocks) {
  AttentionShape s;
  s.batchHeads = 2, s.queries = 70, s.keys = 70, s.headDim = 4, s.scale = 0.5f;
  checkAttention(s, 20);
  s.causal = true;
  checkAttention(s, 30);
}

TEST(AttentionTest, GroupedQueryHeadsShareKeysAndSumTheirGradients) {
  // Six query heads over two key/value heads: the finite differences see
  // each key feed three heads' outputs.
  AttentionShape s;
  s.batchHeads = 6, s.groups = 3, s.queries = 9, s.keys = 70, s.headDim = 3, s.scale = 0.6f;
  checkAttention(s, 50);
  s.causal = true, s.queries = 70;
  checkAttention(s, 60);
}

TEST(AttentionTest, DropoutWeighsValuesAndTheirGradients) {
  // A third of the probabilities dropped (a tensor rank's 2 of 6 heads):
  // the forward against the reference with the same masks, the gradients
  // against finite differences with the masks fixed.
  AttentionShape s;
  s.batchHeads = 4, s.groups = 2, s.queries = 9, s.keys = 70, s.headDim = 3, s.scale = 0.6f, s.causal = true;
  s.dropout = attentionDropout(0.3f, dropoutKeyFor(7, 3, 1, 2, 6 * 9 * 70), 2, 1, 3);
  checkAttention(s, 70);
  int dropped = 0;
  for (int64_t j = 0; j < s.keys; ++j)
    dropped += s.dropout.factor(0, s.queries, s.keys, 0, j) == 0.0f;
  EXPECT_GT(dropped, 10);
  EXPECT_LT(dropped, 35);
}

TEST(AttentionTest, CausalWithOffsetsAsInARingStep) {
  // Queries at positions 8..15 against keys at 4..19: some rows see a few
  // keys, and with keys entirely in the future a row sees none.
  AttentionShape s;
  s.batchHeads = 1, s.queries = 8, s.keys = 16, s.headDim = 3, s.scale = 0.7f, s.causal = true;
  s.queryOffset = 8, s.keyOffset = 4;
  checkAttention(s, 40);
  s.keyOffset = 100; // every key is in the future
  std::vector<float> q(24, 1), k(48, 1), v(48, 1), o(24, 5), lse(8, 0);
  cpu::attentionForward(host, s, q.data(), k.data(), v.data(), o.data(), lse.data());
  for (float x : o)
    EXPECT_EQ(x, 0.0f);
  for (float x : lse)
    EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
}

//===----------------------------------------------------------------------===//
// Cross-entropy and embedding
//===----------------------------------------------------------------------===//

TEST(CrossEntropyTest, ForwardBackwardAndIgnoredRows) {
  const int64_t rows = 6, vocab = 1000;
  auto logits = randomVector(size_t(rows * vocab), 50, -5, 5);
  std::vector<int64_t> labels = {3, 999, -100, 0, 512, 7};
  std::vector<float> loss(rows), lse(rows), dlogits(logits.size());
  auto w = randomVector(size_t(rows), 51);
  auto f = [&](const std::vector<double> &x) {
    std::vector<double> out(size_t(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[size_t(r)] == -100)
        continue;
      double sum = 0;
      for (int64_t c = 0; c < vocab; ++c)
        sum += std::exp(x[size_t(r * vocab + c)]);
      out[size_t(r)] = std::log(sum) - x[size_t(r * vocab + labels[size_t(r)])];
    }
    return out;
  };
  cpu::crossEntropyForward(host, logits.data(), labels.data(), loss.data(), lse.data(), rows, vocab, -100);
  expectClose(loss, f(widen(logits)), 1e-5, 1e-6, "cross_entropy");
  cpu::crossEntropyBackward(host, logits.data(), labels.data(), lse.data(), w.data(), dlogits.data(), rows, vocab,
                            -100);
  expectClose(dlogits, numericGradient(f, widen(logits), widen(w), 1e-5), 1e-4, 1e-7, "cross_entropy backward");
  labels[1] = vocab;
  try {
    cpu::crossEntropyForward(host, logits.data(), labels.data(), loss.data(), lse.data(), rows, vocab, -100);
    FAIL() << "a label outside the vocabulary was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("row 1 has label 1000"), std::string::npos) << e.what();
  }
}

// Class axis 1 of [N, C, d]: the loss picks -w[label] * logp[n, label, i].
TEST(NllLossTest, WeightedReductionsOverAnInnerAxis) {
  // logp[n][c][i] = -(1 + n + 0.1 c + 0.01 i); labels [[2, 0], [1, -100]].
  host::Tensor logProbs = host::Tensor::zeros({2, 3, 2});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 2; ++i)
        logProbs.floats[size_t((n * 3 + c) * 2 + i)] = -float(1 + n + 0.1 * c + 0.01 * i);
  host::Tensor labels = host::Tensor::ofInts({2, 2}, {2, 0, 1, -100});
  host::Tensor weights = host::Tensor::ofFloats({3}, {0.5f, 2.0f, 1.5f});
  // Terms: 1.5 * 1.2, 0.5 * 1.01, 2.0 * 2.1; weights summed 4.0.
  std::vector<double> terms = {1.8, 0.505, 4.2, 0.0};
  host::Tensor none = host::nllLoss(logProbs, labels, &weights, int64_t(-100), "none");
  for (size_t p = 0; p < 4; ++p)
    EXPECT_NEAR(none.floats[p], terms[p], 1e-6) << p;
  EXPECT_NEAR(host::nllLoss(logProbs, labels, &weights, int64_t(-100), "sum").floats[0], 6.505, 1e-5);
  EXPECT_NEAR(host::nllLoss(logProbs, labels, &weights, int64_t(-100), "mean").floats[0], 6.505 / 4.0, 1e-6);
  EXPECT_NEAR(host::nllLoss(logProbs, labels, nullptr, int64_t(-100), "mean").floats[0], (1.2 + 1.01 + 2.1) / 3, 1e-6);
  host::Tensor grad =
      host::nllLossGrad(logProbs.shape, labels, &weights, host::Tensor::ofFloats({}, {2.0f}), int64_t(-100), "mean");
  std::vector<float> want(12, 0.0f);
  want[(0 * 3 + 2) * 2 + 0] = -1.5f * 2 / 4, want[(0 * 3 + 0) * 2 + 1] = -0.5f * 2 / 4,
                         want[(1 * 3 + 1) * 2 + 0] = -2.0f * 2 / 4;
  for (size_t p = 0; p < 12; ++p)
    EXPECT_FLOAT_EQ(grad.floats[p], want[p]) << p;
  labels.ints[3] = 3;
  try {
    host::nllLoss(logProbs, labels, &weights, int64_t(-100), "mean");
    FAIL() << "a label outside the classes was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("label position 3 has label 3, outside 3 classes"), std::string::npos)
        << e.what();
  }
}

TEST(EmbeddingTest, GatherAndScatterAddWithRepeatedIds) {
  const int64_t vocab = 5, dim = 3;
  auto table = randomVector(size_t(vocab * dim), 60);
  std::vector<int64_t> ids = {4, 1, 4, 0};
  std::vector<float> out(ids.size() * dim), dtable(table.size(), 1.0f);
  cpu::embeddingForward(host, table.data(), ids.data(), out.data(), 4, vocab, dim);
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t d = 0; d < dim; ++d)
      EXPECT_EQ(out[t * dim + size_t(d)], table[size_t(ids[t] * dim + d)]);
  std::vector<float> dout(out.size());
  for (size_t i = 0; i < dout.size(); ++i)
    dout[i] = float(i);
  cpu::embeddingBackward(host, dout.data(), ids.data(), dtable.data(), 4, vocab, dim);
  // Row 4 gets tokens 0 and 2 on top of the 1.0 already there; row 2 nothing.
  for (int64_t d = 0; d < dim; ++d) {
    EXPECT_EQ(dtable[size_t(4 * dim + d)], 1.0f + float(d) + float(6 + d));
    EXPECT_EQ(dtable[size_t(2 * dim + d)], 1.0f);
  }
  ids[3] = -1;
  EXPECT_THROW(cpu::embeddingForward(host, table.data(), ids.data(), out.data(), 4, vocab, dim), Error);
}

//===----------------------------------------------------------------------===//
// Dropout and its generator
//===----------------------------------------------------------------------===//

TEST(PhiloxTest, KnownAnswersFromRandom123) {
  // Random123's kat_vectors for philox4x32 with 10 rounds.
  PhiloxBlock zero = philox4x32(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(zero.x[0], 0x6627e8d5u);
  EXPECT_EQ(zero.x[1], 0xe169c58du);
  EXPECT_EQ(zero.x[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.x[3], 0x9b00dbd8u);
  PhiloxBlock ones = philox4x32(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(ones.x[0], 0x408f276du);
  EXPECT_EQ(ones.x[1], 0x41c83b0eu);
  EXPECT_EQ(ones.x[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.x[3], 0x6d5451fdu);
  PhiloxBlock pi = philox4x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.x[0], 0xd16cfe09u);
  EXPECT_EQ(pi.x[1], 0x94fdccebu);
  EXPECT_EQ(pi.x[2], 0x5001e420u);
  EXPECT_EQ(pi.x[3], 0x24126ea1u);
}

TEST(DropoutTest, MaskDependsOnlyOnSeedStepAndGlobalIndex) {
  const int64_t n = 10000;
  const float p = 0.25f;
  std::vector<float> x(n, 1.0f), whole(n), parts(n), dx(n);
  cpu::dropoutForward(host, x.data(), whole.data(), n, p, 1234, 7, 0);
  // The same tensor computed as three shards at their global offsets.
  cpu::dropoutForward(host, x.data(), parts.data(), 3001, p, 1234, 7, 0);
  cpu::dropoutForward(host, x.data() + 3001, parts.data() + 3001, 4000, p, 1234, 7, 3001);
  cpu::dropoutForward(host, x.data() + 7001, parts.data() + 7001, n - 7001, p, 1234, 7, 7001);
  EXPECT_EQ(whole, parts);
  int64_t kept = std::count_if(whole.begin(), whole.end(), [](float v) { return v != 0; });
  EXPECT_NEAR(double(kept) / n, 0.75, 0.02);
  for (float v : whole)
    ASSERT_TRUE(v == 0.0f || v == 1.0f / 0.75f);
  // The backward pass regenerates the mask.
  cpu::dropoutBackward(host, x.data(), dx.data(), n, p, 1234, 7, 0);
  EXPECT_EQ(dx, whole);
  // Another step gives another mask.
  cpu::dropoutForward(host, x.data(), parts.data(), n, p, 1234, 8, 0);
  EXPECT_NE(whole, parts);
  EXPECT_THROW(cpu::dropoutForward(host, x.data(), parts.data(), n, 1.0f, 1, 1, 0), Error);
}

std::vector<int64_t> maskOf(const host::Tensor &x, uint64_t seed, uint64_t step, int64_t block, int64_t site) {
  Ints mask = host::dropout(x, 0.5f, dropoutKeyFor(seed, step, block, site, x.elements()))[1].ints;
  return std::vector<int64_t>(mask.begin(), mask.end());
}

TEST(DropoutTest, EmittedProgramsKeyMasksBySiteStepAndBatchBlock) {
  // A batch of 4 rows of 50 split into two blocks of 2 rows (two ranks, or
  // two microbatches): each block's mask is its rows of the whole batch's.
  host::Tensor whole = host::Tensor::ofFloats({4, 50}, std::vector<float>(200, 1.0f));
  host::Tensor half = host::Tensor::ofFloats({2, 50}, std::vector<float>(100, 1.0f));
  std::vector<int64_t> all = maskOf(whole, 3, 5, 0, 1);
  std::vector<int64_t> first = maskOf(half, 3, 5, 0, 1), second = maskOf(half, 3, 5, 1, 1);
  EXPECT_EQ(std::vector<int64_t>(all.begin(), all.begin() + 100), first);
  EXPECT_EQ(std::vector<int64_t>(all.begin() + 100, all.end()), second);
  // Another site, step or run seed: another mask.
  EXPECT_NE(maskOf(whole, 3, 5, 0, 2), all);
  EXPECT_NE(maskOf(whole, 3, 6, 0, 1), all);
  EXPECT_NE(maskOf(whole, 4, 5, 0, 1), all);
  // The output is the input where kept, scaled by 1 / (1 - p).
  std::vector<host::Tensor> out = host::dropout(whole, 0.5f, dropoutKeyFor(3, 5, 0, 1, 200));
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(out[0].floats[i], all[i] ? 2.0f : 0.0f);
}

} // namespace
