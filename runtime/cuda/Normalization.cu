//===- Normalization.cu - device softmax, layer norm and RMS norm ---------===//
//
// One block per row for the row statistics (two passes over the row, fp32
// block reductions); the gamma/beta gradients are column reductions
// (ColumnSplit: blocks of 32 columns x 8 row groups over chunks of rows, the
// chunks added in order), so their summation order is fixed (deterministic).
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "Reduce.cuh"
#include "StreamScratch.h"
#include "colossal/runtime/kernels/Kernels.h"

namespace colossal::rt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void softmaxForwardKernel(const float *x, float *y, int64_t cols) {
  __shared__ float scratch[32];
  const float *in = x + int64_t(blockIdx.x) * cols;
  float *out = y + int64_t(blockIdx.x) * cols;
  float max = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    max = fmaxf(max, in[c]);
  max = blockMax(max, scratch);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    sum += expf(in[c] - max);
  sum = blockSum(sum, scratch);
  float inverse = 1.0f / sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[c] = expf(in[c] - max) * inverse;
}

__global__ void softmaxBackwardKernel(const float *y, const float *dy, float *dx, int64_t cols) {
  __shared__ float scratch[32];
  int64_t base = int64_t(blockIdx.x) * cols;
  float dot = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dot += y[base + c] * dy[base + c];
  dot = blockSum(dot, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dx[base + c] = y[base + c] * (dy[base + c] - dot);
}

__global__ void layerNormForwardKernel(const float *x, const float *gamma, const float *beta, float *y, float *mean,
                                       float *rstd, int64_t cols, float eps, bool centre) {
  __shared__ float scratch[32];
  int64_t base = int64_t(blockIdx.x) * cols;
  float mu = 0;
  if (centre) {
    float sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      sum += x[base + c];
    mu = blockSum(sum, scratch) / float(cols);
  }
  float squares = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = x[base + c] - mu;
    squares += d * d;
  }
  float inverse = rsqrtf(blockSum(squares, scratch) / float(cols) + eps);
  if (threadIdx.x == 0) {
    if (mean)
      mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = inverse;
  }
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = (x[base + c] - mu) * inverse * (gamma ? gamma[c] : 1.0f);
    y[base + c] = v + (beta ? beta[c] : 0.0f);
  }
}

__global__ void layerNormBackwardKernel(const float *dy, const float *x, const float *gamma, const float *mean,
                                        const float *rstd, float *dx, int64_t cols) {
  __shared__ float scratch[32];
  int64_t base = int64_t(blockIdx.x) * cols;
  float mu = mean ? mean[blockIdx.x] : 0.0f, inverse = rstd[blockIdx.x];
  float sumG = 0, sumGX = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float g = dy[base + c] * (gamma ? gamma[c] : 1.0f);
    sumG += g;
    sumGX += g * (x[base + c] - mu) * inverse;
  }
  float meanG = mean ? blockSum(sumG, scratch) / float(cols) : 0.0f;
  float meanGX = blockSum(sumGX, scratch) / float(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float g = dy[base + c] * (gamma ? gamma[c] : 1.0f);
    float xhat = (x[base + c] - mu) * inverse;
    dx[base + c] = inverse * (g - meanG - xhat * meanGX);
  }
}

/// One row chunk's dgamma and dbeta for 32 columns: `partial` is
/// [splits, 2, cols].
__global__ void normParameterPartialKernel(const float *dy, const float *x, const float *mean, const float *rstd,
                                           float *partial, int64_t rows, int64_t cols, int64_t chunk) {
  __shared__ float gammaSums[ColumnSplit::kRowGroups][ColumnSplit::kLanes];
  __shared__ float betaSums[ColumnSplit::kRowGroups][ColumnSplit::kLanes];
  int64_t c = int64_t(blockIdx.x) * ColumnSplit::kLanes + threadIdx.x;
  int64_t begin = int64_t(blockIdx.y) * chunk, end = min(rows, begin + chunk);
  float g = 0, b = 0;
  if (c < cols)
    for (int64_t r = begin + threadIdx.y; r < end; r += ColumnSplit::kRowGroups) {
      float d = dy[r * cols + c];
      g += d * (x[r * cols + c] - (mean ? mean[r] : 0.0f)) * rstd[r];
      b += d;
    }
  gammaSums[threadIdx.y][threadIdx.x] = g;
  betaSums[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols)
    return;
  for (int k = 1; k < ColumnSplit::kRowGroups; ++k) {
    g += gammaSums[k][threadIdx.x];
    b += betaSums[k][threadIdx.x];
  }
  partial[2 * int64_t(blockIdx.y) * cols + c] = g;
  partial[(2 * int64_t(blockIdx.y) + 1) * cols + c] = b;
}

__global__ void normParameterFinishKernel(const float *partial, float *dgamma, float *dbeta, int64_t splits,
                                          int64_t cols) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
    float g = 0, b = 0;
    for (int64_t k = 0; k < splits; ++k) {
      g += partial[2 * k * cols + c];
      b += partial[(2 * k + 1) * cols + c];
    }
    if (dgamma)
      dgamma[c] = g;
    if (dbeta)
      dbeta[c] = b;
  }
}

void normParameterGrad(cudaStream_t st, const float *dy, const float *x, const float *mean, const float *rstd,
                       float *dgamma, float *dbeta, int64_t rows, int64_t cols, const char *op) {
  if (cols == 0)
    return;
  ColumnSplit split((cols + ColumnSplit::kLanes - 1) / ColumnSplit::kLanes, rows);
  StreamScratch partial(split.splits * 2 * cols * int64_t(sizeof(float)), st, op);
  dim3 grid(unsigned(split.blocks), unsigned(split.splits));
  dim3 block(ColumnSplit::kLanes, ColumnSplit::kRowGroups);
  normParameterPartialKernel<<<grid, block, 0, st>>>(dy, x, mean, rstd, partial.as<float>(), rows, cols, split.chunk);
  checkLaunch(op);
  normParameterFinishKernel<<<gridFor(cols), 256, 0, st>>>(partial.as<float>(), dgamma, dbeta, split.splits, cols);
  checkLaunch(op);
}

cudaStream_t on(Stream s) { return asStream(s.handle); }

} // namespace

void softmaxForward(Stream s, const float *x, float *y, int64_t rows, int64_t cols) {
  requireRows(rows, "softmaxForward");
  if (rows == 0)
    return;
  softmaxForwardKernel<<<unsigned(rows), kThreads, 0, on(s)>>>(x, y, cols);
  checkLaunch("softmaxForward");
}

void softmaxBackward(Stream s, const float *y, const float *dy, float *dx, int64_t rows, int64_t cols) {
  requireRows(rows, "softmaxBackward");
  if (rows == 0)
    return;
  softmaxBackwardKernel<<<unsigned(rows), kThreads, 0, on(s)>>>(y, dy, dx, cols);
  checkLaunch("softmaxBackward");
}

void layerNormForward(Stream s, const float *x, const float *gamma, const float *beta, float *y, float *mean,
                      float *rstd, int64_t rows, int64_t cols, float eps) {
  requireRows(rows, "layerNormForward");
  if (rows == 0)
    return;
  layerNormForwardKernel<<<unsigned(rows), kThreads, 0, on(s)>>>(x, gamma, beta, y, mean, rstd, cols, eps, true);
  checkLaunch("layerNormForward");
}

void layerNormBackward(Stream s, const float *dy, const float *x, const float *gamma, const float *mean,
                       const float *rstd, float *dx, float *dgamma, float *dbeta, int64_t rows, int64_t cols) {
  requireRows(rows, "layerNormBackward");
  if (rows == 0)
    return;
  layerNormBackwardKernel<<<unsigned(rows), kThreads, 0, on(s)>>>(dy, x, gamma, mean, rstd, dx, cols);
  checkLaunch("layerNormBackward");
  if ((gamma && dgamma) || dbeta) {
    normParameterGrad(on(s), dy, x, mean, rstd, gamma ? dgamma : nullptr, dbeta, rows, cols,
                      "layerNormBackward (parameters)");
  }
}

void rmsNormForward(Stream s, const float *x, const float *gamma, float *y, float *rstd, int64_t rows, int64_t cols,
                    float eps) {
  requireRows(rows, "rmsNormForward");
  if (rows == 0)
    return;
  layerNormForwardKernel<<<unsigned(rows), kThreads, 0, on(s)>>>(x, gamma, nullptr, y, nullptr, rstd, cols, eps,
                                                                  false);
  checkLaunch("rmsNormForward");
}

void rmsNormBackward(Stream s, const float *dy, const float *x, const float *gamma, const float *rstd, float *dx,
                     float *dgamma, int64_t rows, int64_t cols) {
  requireRows(rows, "rmsNormBackward");
  if (rows == 0)
    return;
  layerNormBackwardKernel<<<unsigned(rows), kThreads, 0, on(s)>>>(dy, x, gamma, nullptr, rstd, dx, cols);
  checkLaunch("rmsNormBackward");
  if (gamma && dgamma) {
    normParameterGrad(on(s), dy, x, nullptr, rstd, dgamma, nullptr, rows, cols, "rmsNormBackward (parameters)");
  }
}

} // namespace colossal::rt::cuda
