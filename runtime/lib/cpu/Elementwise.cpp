//===- Elementwise.cpp - host elementwise kernels and activations ---------===//

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/kernels/Philox.h"

#include <cmath>

namespace colossal::rt::cpu {

void fill(Stream, float *x, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = value;
}

void add(Stream, const float *a, const float *b, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

void mul(Stream, const float *a, const float *b, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] * b[i];
}

void scale(Stream, const float *x, float alpha, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = alpha * x[i];
}

void axpy(Stream, float alpha, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += alpha * x[i];
}

void addRowBias(Stream, const float *x, const float *bias, float *out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = x[r * cols + c] + bias[c];
}

void columnSum(Stream, const float *x, float *out, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c)
    out[c] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c] += x[r * cols + c];
}

void cast(Stream, const void *in, DType from, void *out, DType to, int64_t n) {
  auto isFloat = [](DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; };
  if (!isFloat(from) || !isFloat(to))
    fail("cast", std::string("from ") + nameOf(from) + " to " + nameOf(to) + " is not supported");
  auto read = [&](int64_t i) -> float {
    if (from == DType::F32)
      return static_cast<const float *>(in)[i];
    uint16_t h = static_cast<const uint16_t *>(in)[i];
    return from == DType::BF16 ? bf16ToFloat(h) : f16ToFloat(h);
  };
  for (int64_t i = 0; i < n; ++i) {
    float v = read(i);
    if (to == DType::F32)
      static_cast<float *>(out)[i] = v;
    else
      static_cast<uint16_t *>(out)[i] = to == DType::BF16 ? floatToBf16(v) : floatToF16(v);
  }
}

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
} // namespace

void geluForward(Stream, const float *x, float *y, int64_t n, GeluApproximation approximation) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    // 0.5 (1 + tanh(u)) = sigmoid(2u): one exp instead of tanh, and no
    // cancellation where tanh(u) nears -1.
    if (approximation == GeluApproximation::Tanh)
      y[i] = v / (1.0f + std::exp(-2.0f * kSqrt2OverPi * (v + 0.044715f * v * v * v)));
    else
      y[i] = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
  }
}

void geluBackward(Stream, const float *x, const float *dy, float *dx, int64_t n,
                  GeluApproximation approximation) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i], d;
    if (approximation == GeluApproximation::Tanh) {
      // With s = sigmoid(2u) = 0.5 (1 + tanh u): 0.5 (1 - tanh^2 u) = 2 s (1 - s).
      float s = 1.0f / (1.0f + std::exp(-2.0f * kSqrt2OverPi * (v + 0.044715f * v * v * v)));
      d = s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * v * v);
    } else {
      d = 0.5f * (1.0f + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5f * v * v);
    }
    dx[i] = dy[i] * d;
  }
}

void siluForward(Stream, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void siluBackward(Stream, const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float s = 1.0f / (1.0f + std::exp(-x[i]));
    dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}

void dropoutForward(Stream, const float *x, float *y, int64_t n, float p, uint64_t seed, uint64_t step,
                    int64_t offset) {
  if (!(p >= 0.0f && p < 1.0f))
    fail("dropout", "probability " + std::to_string(p) + " is outside [0, 1)");
  float keepScale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i)
    y[i] = dropoutKeeps(seed, step, uint64_t(offset + i), p) ? x[i] * keepScale : 0.0f;
}

void dropoutBackward(Stream, const float *dy, float *dx, int64_t n, float p, uint64_t seed,
                     uint64_t step, int64_t offset) {
  dropoutForward(Stream{}, dy, dx, n, p, seed, step, offset);
}

} // namespace colossal::rt::cpu
