//===- Elementwise.cu - device elementwise kernels, activations, dropout --===//

#include "CudaCheck.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/kernels/Philox.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace colossal::rt::cuda {

namespace {

#define GRID_STRIDE(i, n)                                                                            \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void fillKernel(float *x, int64_t n, float value) {
  GRID_STRIDE(i, n) x[i] = value;
}
__global__ void addKernel(const float *a, const float *b, float *out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}
__global__ void mulKernel(const float *a, const float *b, float *out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}
__global__ void scaleKernel(const float *x, float alpha, float *out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = alpha * x[i];
}
__global__ void axpyKernel(float alpha, const float *x, float *y, int64_t n) {
  GRID_STRIDE(i, n) y[i] += alpha * x[i];
}
__global__ void addRowBiasKernel(const float *x, const float *bias, float *out, int64_t rows, int64_t cols) {
  GRID_STRIDE(i, rows * cols) out[i] = x[i] + bias[i % cols];
}
// One thread per column walks the rows: neighbouring threads read
// neighbouring addresses, and the order of the sum is fixed.
__global__ void columnSumKernel(const float *x, float *out, int64_t rows, int64_t cols) {
  GRID_STRIDE(c, cols) {
    float sum = 0;
    for (int64_t r = 0; r < rows; ++r)
      sum += x[r * cols + c];
    out[c] = sum;
  }
}

__device__ float load(const void *in, DType from, int64_t i) {
  if (from == DType::F32)
    return static_cast<const float *>(in)[i];
  if (from == DType::BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(in)[i]);
  return __half2float(static_cast<const __half *>(in)[i]);
}
__device__ void store(void *out, DType to, int64_t i, float v) {
  if (to == DType::F32)
    static_cast<float *>(out)[i] = v;
  else if (to == DType::BF16)
    static_cast<__nv_bfloat16 *>(out)[i] = __float2bfloat16_rn(v);
  else
    static_cast<__half *>(out)[i] = __float2half_rn(v);
}
__global__ void castKernel(const void *in, DType from, void *out, DType to, int64_t n) {
  GRID_STRIDE(i, n) store(out, to, i, load(in, from, i));
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

__global__ void geluForwardKernel(const float *x, float *y, int64_t n, bool tanhApprox) {
  GRID_STRIDE(i, n) {
    float v = x[i];
    y[i] = tanhApprox ? 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)))
                      : 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  }
}
__global__ void geluBackwardKernel(const float *x, const float *dy, float *dx, int64_t n, bool tanhApprox) {
  GRID_STRIDE(i, n) {
    float v = x[i], d;
    if (tanhApprox) {
      float t = tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v));
      d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * v * v);
    } else {
      d = 0.5f * (1.0f + erff(v * kInvSqrt2)) + v * kInvSqrt2Pi * expf(-0.5f * v * v);
    }
    dx[i] = dy[i] * d;
  }
}
__global__ void siluForwardKernel(const float *x, float *y, int64_t n) {
  GRID_STRIDE(i, n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
__global__ void siluBackwardKernel(const float *x, const float *dy, float *dx, int64_t n) {
  GRID_STRIDE(i, n) {
    float s = 1.0f / (1.0f + expf(-x[i]));
    dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}
__global__ void dropoutKernel(const float *x, float *y, int64_t n, float p, uint64_t seed, uint64_t step,
                              int64_t offset) {
  float keepScale = 1.0f / (1.0f - p);
  GRID_STRIDE(i, n) y[i] = dropoutKeeps(seed, step, uint64_t(offset + i), p) ? x[i] * keepScale : 0.0f;
}

cudaStream_t on(Stream s) { return asStream(s.handle); }

} // namespace

void fill(Stream s, float *x, int64_t n, float value) {
  fillKernel<<<gridFor(n), 256, 0, on(s)>>>(x, n, value);
  checkLaunch("fill");
}
void add(Stream s, const float *a, const float *b, float *out, int64_t n) {
  addKernel<<<gridFor(n), 256, 0, on(s)>>>(a, b, out, n);
  checkLaunch("add");
}
void mul(Stream s, const float *a, const float *b, float *out, int64_t n) {
  mulKernel<<<gridFor(n), 256, 0, on(s)>>>(a, b, out, n);
  checkLaunch("mul");
}
void scale(Stream s, const float *x, float alpha, float *out, int64_t n) {
  scaleKernel<<<gridFor(n), 256, 0, on(s)>>>(x, alpha, out, n);
  checkLaunch("scale");
}
void axpy(Stream s, float alpha, const float *x, float *y, int64_t n) {
  axpyKernel<<<gridFor(n), 256, 0, on(s)>>>(alpha, x, y, n);
  checkLaunch("axpy");
}
void addRowBias(Stream s, const float *x, const float *bias, float *out, int64_t rows, int64_t cols) {
  addRowBiasKernel<<<gridFor(rows * cols), 256, 0, on(s)>>>(x, bias, out, rows, cols);
  checkLaunch("addRowBias");
}
void columnSum(Stream s, const float *x, float *out, int64_t rows, int64_t cols) {
  columnSumKernel<<<gridFor(cols), 256, 0, on(s)>>>(x, out, rows, cols);
  checkLaunch("columnSum");
}
void cast(Stream s, const void *in, DType from, void *out, DType to, int64_t n) {
  auto isFloat = [](DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; };
  if (!isFloat(from) || !isFloat(to))
    fail("cast", std::string("from ") + nameOf(from) + " to " + nameOf(to) + " is not supported");
  castKernel<<<gridFor(n), 256, 0, on(s)>>>(in, from, out, to, n);
  checkLaunch("cast");
}
void geluForward(Stream s, const float *x, float *y, int64_t n, GeluApproximation approximation) {
  geluForwardKernel<<<gridFor(n), 256, 0, on(s)>>>(x, y, n, approximation == GeluApproximation::Tanh);
  checkLaunch("geluForward");
}
void geluBackward(Stream s, const float *x, const float *dy, float *dx, int64_t n, GeluApproximation approximation) {
  geluBackwardKernel<<<gridFor(n), 256, 0, on(s)>>>(x, dy, dx, n, approximation == GeluApproximation::Tanh);
  checkLaunch("geluBackward");
}
void siluForward(Stream s, const float *x, float *y, int64_t n) {
  siluForwardKernel<<<gridFor(n), 256, 0, on(s)>>>(x, y, n);
  checkLaunch("siluForward");
}
void siluBackward(Stream s, const float *x, const float *dy, float *dx, int64_t n) {
  siluBackwardKernel<<<gridFor(n), 256, 0, on(s)>>>(x, dy, dx, n);
  checkLaunch("siluBackward");
}
void dropoutForward(Stream s, const float *x, float *y, int64_t n, float p, uint64_t seed, uint64_t step,
                    int64_t offset) {
  if (!(p >= 0.0f && p < 1.0f))
    fail("dropout", "probability " + std::to_string(p) + " is outside [0, 1)");
  dropoutKernel<<<gridFor(n), 256, 0, on(s)>>>(x, y, n, p, seed, step, offset);
  checkLaunch("dropoutForward");
}
void dropoutBackward(Stream s, const float *dy, float *dx, int64_t n, float p, uint64_t seed, uint64_t step,
                     int64_t offset) {
  dropoutForward(s, dy, dx, n, p, seed, step, offset);
}

} // namespace colossal::rt::cuda
