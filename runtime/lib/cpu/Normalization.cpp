//===- Normalization.cpp - host softmax, layer norm and RMS norm ----------===//
//
// Row statistics accumulate in double: the host target is the reference the
// distributed programs are compared with, so it should be the accurate one.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/kernels/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace colossal::rt::cpu {

void softmaxForward(Stream, const float *x, float *y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x + r * cols;
    float *out = y + r * cols;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c)
      max = std::max(max, in[c]);
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - max);
      sum += out[c];
    }
    float inverse = float(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c)
      out[c] *= inverse;
  }
}

void softmaxBackward(Stream, const float *y, const float *dy, float *dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y + r * cols, *dyr = dy + r * cols;
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c)
      dot += double(yr[c]) * dyr[c];
    for (int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = yr[c] * (dyr[c] - float(dot));
  }
}

void layerNormForward(Stream, const float *x, const float *gamma, const float *beta, float *y, float *mean,
                      float *rstd, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x + r * cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c)
      sum += in[c];
    double mu = sum / double(cols);
    double squares = 0;
    for (int64_t c = 0; c < cols; ++c)
      squares += (in[c] - mu) * (in[c] - mu);
    double inverse = 1.0 / std::sqrt(squares / double(cols) + eps);
    mean[r] = float(mu);
    rstd[r] = float(inverse);
    for (int64_t c = 0; c < cols; ++c) {
      float normalised = float((in[c] - mu) * inverse);
      y[r * cols + c] = normalised * (gamma ? gamma[c] : 1.0f) + (beta ? beta[c] : 0.0f);
    }
  }
}

void layerNormBackward(Stream, const float *dy, const float *x, const float *gamma, const float *mean,
                       const float *rstd, float *dx, float *dgamma, float *dbeta, int64_t rows, int64_t cols) {
  if (gamma && dgamma)
    std::fill(dgamma, dgamma + cols, 0.0f);
  if (dbeta)
    std::fill(dbeta, dbeta + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x + r * cols, *d = dy + r * cols;
    double sumG = 0, sumGX = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (in[c] - mean[r]) * double(rstd[r]);
      double g = d[c] * double(gamma ? gamma[c] : 1.0f);
      sumG += g;
      sumGX += g * xhat;
    }
    double meanG = sumG / double(cols), meanGX = sumGX / double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (in[c] - mean[r]) * double(rstd[r]);
      double g = d[c] * double(gamma ? gamma[c] : 1.0f);
      dx[r * cols + c] = float(rstd[r] * (g - meanG - xhat * meanGX));
      if (gamma && dgamma)
        dgamma[c] += float(d[c] * xhat);
      if (dbeta)
        dbeta[c] += d[c];
    }
  }
}

void rmsNormForward(Stream, const float *x, const float *gamma, float *y, float *rstd, int64_t rows,
                    int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x + r * cols;
    double squares = 0;
    for (int64_t c = 0; c < cols; ++c)
      squares += double(in[c]) * in[c];
    double inverse = 1.0 / std::sqrt(squares / double(cols) + eps);
    rstd[r] = float(inverse);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = float(in[c] * inverse) * (gamma ? gamma[c] : 1.0f);
  }
}

void rmsNormBackward(Stream, const float *dy, const float *x, const float *gamma, const float *rstd, float *dx,
                     float *dgamma, int64_t rows, int64_t cols) {
  if (gamma && dgamma)
    std::fill(dgamma, dgamma + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x + r * cols, *d = dy + r * cols;
    double sumGX = 0;
    for (int64_t c = 0; c < cols; ++c)
      sumGX += d[c] * double(gamma ? gamma[c] : 1.0f) * in[c] * double(rstd[r]);
    double meanGX = sumGX / double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = in[c] * double(rstd[r]);
      double g = d[c] * double(gamma ? gamma[c] : 1.0f);
      dx[r * cols + c] = float(rstd[r] * (g - xhat * meanGX));
      if (gamma && dgamma)
        dgamma[c] += float(d[c] * xhat);
    }
  }
}

} // namespace colossal::rt::cpu
