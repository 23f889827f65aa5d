//===- CrossEntropy.cu - device cross-entropy and embedding ---------------===//
//
// A device kernel cannot raise an error: a label or token id outside the
// table makes that row's result NaN, which the step's finite-loss check then
// reports with the step number. (The host target names the row.)
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "Reduce.cuh"
#include "colossal/runtime/kernels/Kernels.h"

namespace colossal::rt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void crossEntropyForwardKernel(const float *logits, const int64_t *labels, float *loss, float *lse,
                                          int64_t vocab, int64_t ignoreIndex) {
  __shared__ float scratch[32];
  const float *x = logits + int64_t(blockIdx.x) * vocab;
  float max = -INFINITY;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x)
    max = fmaxf(max, x[c]);
  max = blockMax(max, scratch);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x)
    sum += expf(x[c] - max);
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0) {
    float rowLse = max + logf(sum);
    int64_t label = labels[blockIdx.x];
    lse[blockIdx.x] = rowLse;
    if (label == ignoreIndex)
      loss[blockIdx.x] = 0.0f;
    else if (label < 0 || label >= vocab)
      loss[blockIdx.x] = NAN;
    else
      loss[blockIdx.x] = rowLse - x[label];
  }
}

__global__ void crossEntropyBackwardKernel(const float *logits, const int64_t *labels, const float *lse,
                                           const float *dloss, float *dlogits, int64_t vocab, int64_t ignoreIndex) {
  int64_t row = blockIdx.x;
  const float *x = logits + row * vocab;
  float *out = dlogits + row * vocab;
  int64_t label = labels[row];
  bool ignored = label == ignoreIndex, bad = !ignored && (label < 0 || label >= vocab);
  float scale = dloss[row], rowLse = lse[row];
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) {
    float g = ignored ? 0.0f : bad ? NAN : expf(x[c] - rowLse) * scale;
    out[c] = c == label ? g - scale : g;
  }
}

__global__ void embeddingForwardKernel(const float *table, const int64_t *ids, float *out, int64_t tokens,
                                       int64_t vocab, int64_t dim) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < tokens * dim;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t id = ids[e / dim];
    out[e] = id >= 0 && id < vocab ? table[id * dim + e % dim] : NAN;
  }
}

// Repeated ids add into the same row: atomics, so the order of those few
// additions may vary between runs (the only reduction-order freedom).
__global__ void embeddingBackwardKernel(const float *dout, const int64_t *ids, float *dtable, int64_t tokens,
                                        int64_t vocab, int64_t dim) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < tokens * dim;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t id = ids[e / dim];
    if (id >= 0 && id < vocab)
      atomicAdd(dtable + id * dim + e % dim, dout[e]);
  }
}

} // namespace

void crossEntropyForward(Stream s, const float *logits, const int64_t *labels, float *loss, float *lse, int64_t rows,
                         int64_t vocab, int64_t ignoreIndex) {
  requireRows(rows, "crossEntropyForward");
  if (rows == 0)
    return;
  crossEntropyForwardKernel<<<unsigned(rows), kThreads, 0, asStream(s.handle)>>>(logits, labels, loss, lse, vocab,
                                                                                 ignoreIndex);
  checkLaunch("crossEntropyForward");
}

void crossEntropyBackward(Stream s, const float *logits, const int64_t *labels, const float *lse, const float *dloss,
                          float *dlogits, int64_t rows, int64_t vocab, int64_t ignoreIndex) {
  requireRows(rows, "crossEntropyBackward");
  if (rows == 0)
    return;
  crossEntropyBackwardKernel<<<unsigned(rows), kThreads, 0, asStream(s.handle)>>>(logits, labels, lse, dloss,
                                                                                  dlogits, vocab, ignoreIndex);
  checkLaunch("crossEntropyBackward");
}

void embeddingForward(Stream s, const float *table, const int64_t *ids, float *out, int64_t tokens, int64_t vocab,
                      int64_t dim) {
  if (tokens * dim == 0)
    return;
  embeddingForwardKernel<<<gridFor(tokens * dim), 256, 0, asStream(s.handle)>>>(table, ids, out, tokens, vocab, dim);
  checkLaunch("embeddingForward");
}

void embeddingBackward(Stream s, const float *dout, const int64_t *ids, float *dtable, int64_t tokens, int64_t vocab,
                       int64_t dim) {
  if (tokens * dim == 0)
    return;
  embeddingBackwardKernel<<<gridFor(tokens * dim), 256, 0, asStream(s.handle)>>>(dout, ids, dtable, tokens, vocab,
                                                                                 dim);
  checkLaunch("embeddingBackward");
}

} // namespace colossal::rt::cuda
