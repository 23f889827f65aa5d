//===- Optimizers.cpp - host multi-tensor optimizer steps -----------------===//
//
// The arithmetic mirrors PyTorch's single-tensor AdamW and SGD operation by
// operation (Python scalars are doubles rounded to float at use), so the host
// target's fp32 trajectory agrees with torch.optim to rounding.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/kernels/Optimizers.h"

#include "ParallelElements.h"

#include <cmath>

namespace colossal::rt::cpu {

void tensorSquares(Stream, const OptimizerTensor *tensors, int64_t count, float gradScale, float *squares) {
  forEachTensor(tensors, count, [&](int64_t t) {
    const OptimizerTensor &x = tensors[t];
    double w = 0, g = 0;
    for (int64_t i = 0; i < x.n; ++i) {
      w += double(x.param[i]) * x.param[i];
      double gi = double(x.grad[i] * gradScale);
      g += gi * gi;
    }
    squares[2 * t] = float(w);
    squares[2 * t + 1] = float(g);
  });
}

void adamwStep(Stream, const OptimizerTensor *tensors, int64_t count, const AdamSettings &s, float gradScale) {
  double bias1 = 1.0 - std::pow(double(s.beta1), double(s.step));
  double bias2 = 1.0 - std::pow(double(s.beta2), double(s.step));
  float stepSize = float(double(s.lr) / bias1);
  float bias2Sqrt = float(std::sqrt(bias2));
  float oneMinusBeta1 = float(1.0 - double(s.beta1)), oneMinusBeta2 = float(1.0 - double(s.beta2));
  forEachElementRange(tensors, count, [&](const OptimizerTensor &x, int64_t begin, int64_t end) {
    float decay = x.decay ? float(1.0 - double(s.lr) * double(s.weightDecay)) : 1.0f;
    for (int64_t i = begin; i < end; ++i) {
      float g = gradScale == 1.0f ? x.grad[i] : x.grad[i] * gradScale;
      float w = x.param[i] * decay;
      float m = x.m[i] * s.beta1;
      m = m + oneMinusBeta1 * g;
      float v = x.v[i] * s.beta2;
      v = v + oneMinusBeta2 * g * g;
      float denom = std::sqrt(v) / bias2Sqrt + s.eps;
      x.param[i] = w + -stepSize * m / denom;
      x.m[i] = m;
      x.v[i] = v;
    }
  });
}

void lambStage1(Stream, const OptimizerTensor *tensors, int64_t count, const AdamSettings &s, float gradScale,
                float *squares) {
  float bias1 = float(1.0 - std::pow(double(s.beta1), double(s.step)));
  float bias2 = float(1.0 - std::pow(double(s.beta2), double(s.step)));
  float oneMinusBeta1 = float(1.0 - double(s.beta1)), oneMinusBeta2 = float(1.0 - double(s.beta2));
  forEachTensor(tensors, count, [&](int64_t t) {
    const OptimizerTensor &x = tensors[t];
    double wSquares = 0, uSquares = 0;
    for (int64_t i = 0; i < x.n; ++i) {
      float g = gradScale == 1.0f ? x.grad[i] : x.grad[i] * gradScale;
      float m = x.m[i] * s.beta1 + oneMinusBeta1 * g;
      float v = x.v[i] * s.beta2 + oneMinusBeta2 * g * g;
      x.m[i] = m;
      x.v[i] = v;
      float u = (m / bias1) / (std::sqrt(v / bias2) + s.eps);
      if (x.decay)
        u = u + s.weightDecay * x.param[i];
      x.update[i] = u;
      wSquares += double(x.param[i]) * x.param[i];
      uSquares += double(u) * u;
    }
    squares[2 * t] = float(wSquares);
    squares[2 * t + 1] = float(uSquares);
  });
}

void lambStage2(Stream, const OptimizerTensor *tensors, int64_t count, float lr, const float *squares) {
  forEachElementRange(tensors, count, [&](const OptimizerTensor &x, int64_t begin, int64_t end) {
    int64_t t = &x - tensors;
    float wNorm = std::sqrt(squares[2 * t]), uNorm = std::sqrt(squares[2 * t + 1]);
    float ratio = wNorm > 0 && uNorm > 0 ? wNorm / uNorm : 1.0f;
    float stepScale = lr * ratio;
    for (int64_t i = begin; i < end; ++i)
      x.param[i] -= stepScale * x.update[i];
  });
}

void sgdStep(Stream, const OptimizerTensor *tensors, int64_t count, const SgdSettings &s, float gradScale) {
  float oneMinusDampening = float(1.0 - double(s.dampening));
  forEachElementRange(tensors, count, [&](const OptimizerTensor &x, int64_t begin, int64_t end) {
    float wd = x.decay ? s.weightDecay : 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      float d = gradScale == 1.0f ? x.grad[i] : x.grad[i] * gradScale;
      if (wd != 0)
        d = d + wd * x.param[i];
      if (s.momentum != 0) {
        float buffer = s.step <= 1 ? d : x.m[i] * s.momentum + oneMinusDampening * d;
        x.m[i] = buffer;
        d = s.nesterov ? d + s.momentum * buffer : buffer;
      }
      x.param[i] = x.param[i] + -s.lr * d;
    }
  });
}

void larsStep(Stream, const OptimizerTensor *tensors, int64_t count, const LarsSettings &s, float gradScale,
              const float *squares) {
  forEachElementRange(tensors, count, [&](const OptimizerTensor &x, int64_t begin, int64_t end) {
    int64_t t = &x - tensors;
    float wd = x.decay ? s.weightDecay : 0.0f;
    float localLr = 1.0f;
    if (x.trustRatio) {
      float wNorm = std::sqrt(squares[2 * t]), gNorm = std::sqrt(squares[2 * t + 1]);
      if (wNorm > 0 && gNorm > 0)
        localLr = s.eta * wNorm / (gNorm + wd * wNorm);
    }
    float scale = s.lr * localLr;
    for (int64_t i = begin; i < end; ++i) {
      float g = gradScale == 1.0f ? x.grad[i] : x.grad[i] * gradScale;
      float velocity = x.m[i] * s.momentum + scale * (g + wd * x.param[i]);
      x.m[i] = velocity;
      x.param[i] -= velocity;
    }
  });
}

} // namespace colossal::rt::cpu
