//===- Attention.cu - device attention without an s x s matrix ------------===//
//
// Forward: a block of four warps takes four consecutive query rows of one
// (batch, head); key and value tiles of 16 rows are staged in shared memory
// and each warp folds them into its row with an online softmax (running max,
// running sum, unnormalised output), so memory stays O(tile x head_dim).
// Backward recomputes probabilities from the saved log-sum-exp: one pass over
// query rows for dq, one over key rows for dk and dv, with no atomics (the
// result does not depend on scheduling). Causal rows skip keys in their
// future, and whole tiles in everyone's future are not loaded. Under
// grouped-query attention a key/value head's block walks the query rows of
// each head of its group in turn.
//
// head_dim is at most 256 (eight values per lane). These kernels favour a
// small, checkable implementation over peak speed; gpu-check reports their
// time against the FLOP floor.
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "Reduce.cuh"
#include "StreamScratch.h"
#include "colossal/runtime/kernels/Kernels.h"

namespace colossal::rt::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kTile = 16;
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;

struct Shape {
  int64_t queries, keys, headDim, groups;
  float scale;
  bool causal;
  int64_t queryOffset, keyOffset;
  AttentionDropout dropout;
};

/// Keys [0, result) are visible to query row i.
__device__ __forceinline__ int64_t visibleKeys(const Shape &s, int64_t i) {
  if (!s.causal)
    return s.keys;
  int64_t last = s.queryOffset + i - s.keyOffset;
  return last < 0 ? 0 : (last + 1 > s.keys ? s.keys : last + 1);
}

__device__ __forceinline__ void loadRow(float (&dst)[kPerLane], const float *row, int64_t D) {
  int lane = threadIdx.x & 31;
  for (int k = 0; k < kPerLane; ++k) {
    int64_t d = lane + 32 * k;
    dst[k] = d < D ? row[d] : 0.0f;
  }
}

__device__ __forceinline__ float dotWithShared(const float (&mine)[kPerLane], const float *shared, int64_t D) {
  int lane = threadIdx.x & 31;
  float partial = 0;
  for (int k = 0; k < kPerLane; ++k) {
    int64_t d = lane + 32 * k;
    if (d < D)
      partial += mine[k] * shared[d];
  }
  return warpSum(partial);
}

/// Stages rows [first, first + kTile) of `src` ([rows, D]) into `dst`.
__device__ __forceinline__ void stageTile(float *dst, const float *src, int64_t first, int64_t rows, int64_t D) {
  for (int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) {
    int64_t r = first + e / D;
    dst[e] = r < rows ? src[r * D + e % D] : 0.0f;
  }
}

__global__ void forwardKernel(Shape s, const float *q, const float *k, const float *v, float *o, float *lse) {
  __shared__ float kTileMem[kTile * kMaxHeadDim], vTileMem[kTile * kMaxHeadDim];
  const int64_t D = s.headDim, bh = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + warp;
  const bool active = row < s.queries;
  const float *kb = k + bh / s.groups * s.keys * D, *vb = v + bh / s.groups * s.keys * D;
  float qr[kPerLane], acc[kPerLane];
  if (active)
    loadRow(qr, q + (bh * s.queries + row) * D, D);
  for (int i = 0; i < kPerLane; ++i)
    acc[i] = 0;
  float runningMax = -INFINITY, runningSum = 0;
  int64_t visible = active ? visibleKeys(s, row) : 0;
  // The block's last row sees the most keys.
  int64_t lastRow = min(int64_t(blockIdx.x) * kWarps + kWarps - 1, s.queries - 1);
  int64_t blockVisible = visibleKeys(s, lastRow);
  for (int64_t j0 = 0; j0 < blockVisible; j0 += kTile) {
    __syncthreads();
    stageTile(kTileMem, kb, j0, s.keys, D);
    stageTile(vTileMem, vb, j0, s.keys, D);
    __syncthreads();
    int64_t end = min(int64_t(kTile), visible - j0);
    for (int64_t j = 0; j < end; ++j) {
      float score = dotWithShared(qr, kTileMem + j * D, D) * s.scale;
      float newMax = fmaxf(runningMax, score);
      float correction = __expf(runningMax - newMax), p = __expf(score - newMax);
      runningSum = runningSum * correction + p;
      // Dropout weighs the value, not the softmax's denominator.
      float weight = p * s.dropout.factor(bh, s.queries, s.keys, row, j0 + j);
      for (int i = 0; i < kPerLane; ++i) {
        int64_t d = lane + 32 * i;
        acc[i] = acc[i] * correction + (d < D ? weight * vTileMem[j * D + d] : 0.0f);
      }
      runningMax = newMax;
    }
  }
  if (!active)
    return;
  float *out = o + (bh * s.queries + row) * D;
  for (int i = 0; i < kPerLane; ++i) {
    int64_t d = lane + 32 * i;
    if (d < D)
      out[d] = runningSum > 0 ? acc[i] / runningSum : 0.0f;
  }
  if (lane == 0)
    lse[bh * s.queries + row] = runningSum > 0 ? runningMax + logf(runningSum) : -INFINITY;
}

/// delta[i] = dO_i . O_i, the softmax backward's row term.
__global__ void rowDotKernel(const float *dO, const float *o, float *delta, int64_t rows, int64_t D) {
  int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  float partial = 0;
  for (int64_t d = threadIdx.x & 31; d < D; d += 32)
    partial += dO[row * D + d] * o[row * D + d];
  partial = warpSum(partial);
  if ((threadIdx.x & 31) == 0)
    delta[row] = partial;
}

__global__ void queryGradKernel(Shape s, const float *q, const float *k, const float *v, const float *dO,
                                const float *lse, const float *delta, float *dq) {
  __shared__ float kTileMem[kTile * kMaxHeadDim], vTileMem[kTile * kMaxHeadDim];
  const int64_t D = s.headDim, bh = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + warp;
  const bool active = row < s.queries;
  const float *kb = k + bh / s.groups * s.keys * D, *vb = v + bh / s.groups * s.keys * D;
  float qr[kPerLane], dor[kPerLane], acc[kPerLane];
  float rowLse = 0, rowDelta = 0;
  if (active) {
    loadRow(qr, q + (bh * s.queries + row) * D, D);
    loadRow(dor, dO + (bh * s.queries + row) * D, D);
    rowLse = lse[bh * s.queries + row];
    rowDelta = delta[bh * s.queries + row];
  }
  for (int i = 0; i < kPerLane; ++i)
    acc[i] = 0;
  int64_t visible = active ? visibleKeys(s, row) : 0;
  int64_t lastRow = min(int64_t(blockIdx.x) * kWarps + kWarps - 1, s.queries - 1);
  int64_t blockVisible = visibleKeys(s, lastRow);
  for (int64_t j0 = 0; j0 < blockVisible; j0 += kTile) {
    __syncthreads();
    stageTile(kTileMem, kb, j0, s.keys, D);
    stageTile(vTileMem, vb, j0, s.keys, D);
    __syncthreads();
    int64_t end = min(int64_t(kTile), visible - j0);
    for (int64_t j = 0; j < end; ++j) {
      float p = __expf(dotWithShared(qr, kTileMem + j * D, D) * s.scale - rowLse);
      float dp = dotWithShared(dor, vTileMem + j * D, D) * s.dropout.factor(bh, s.queries, s.keys, row, j0 + j);
      float ds = p * (dp - rowDelta) * s.scale;
      for (int i = 0; i < kPerLane; ++i) {
        int64_t d = lane + 32 * i;
        if (d < D)
          acc[i] += ds * kTileMem[j * D + d];
      }
    }
  }
  if (!active)
    return;
  for (int i = 0; i < kPerLane; ++i) {
    int64_t d = lane + 32 * i;
    if (d < D)
      dq[(bh * s.queries + row) * D + d] = acc[i];
  }
}

__global__ void keyValueGradKernel(Shape s, const float *q, const float *k, const float *v, const float *dO,
                                   const float *lse, const float *delta, float *dk, float *dv) {
  __shared__ float qTileMem[kTile * kMaxHeadDim], doTileMem[kTile * kMaxHeadDim];
  __shared__ float lseTile[kTile], deltaTile[kTile];
  const int64_t D = s.headDim, kvh = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t key = int64_t(blockIdx.x) * kWarps + warp;
  const bool active = key < s.keys;
  float kr[kPerLane], vr[kPerLane], dkAcc[kPerLane], dvAcc[kPerLane];
  if (active) {
    loadRow(kr, k + (kvh * s.keys + key) * D, D);
    loadRow(vr, v + (kvh * s.keys + key) * D, D);
  }
  for (int i = 0; i < kPerLane; ++i)
    dkAcc[i] = dvAcc[i] = 0;
  // The first query that can see this block's first key.
  int64_t firstQuery = 0;
  if (s.causal) {
    int64_t firstKey = int64_t(blockIdx.x) * kWarps;
    firstQuery = max(int64_t(0), s.keyOffset + firstKey - s.queryOffset);
  }
  for (int64_t bh = kvh * s.groups; bh < (kvh + 1) * s.groups; ++bh) {
    const float *qb = q + bh * s.queries * D, *dob = dO + bh * s.queries * D;
    for (int64_t i0 = firstQuery; i0 < s.queries; i0 += kTile) {
      __syncthreads();
      stageTile(qTileMem, qb, i0, s.queries, D);
      stageTile(doTileMem, dob, i0, s.queries, D);
      if (threadIdx.x < kTile) {
        int64_t r = i0 + threadIdx.x;
        lseTile[threadIdx.x] = r < s.queries ? lse[bh * s.queries + r] : 0.0f;
        deltaTile[threadIdx.x] = r < s.queries ? delta[bh * s.queries + r] : 0.0f;
      }
      __syncthreads();
      if (!active)
        continue;
      for (int64_t i = 0; i < kTile && i0 + i < s.queries; ++i) {
        if (s.causal && s.keyOffset + key > s.queryOffset + i0 + i)
          continue;
        float p = __expf(dotWithShared(kr, qTileMem + i * D, D) * s.scale - lseTile[i]);
        float factor = s.dropout.factor(bh, s.queries, s.keys, i0 + i, key);
        float dp = dotWithShared(vr, doTileMem + i * D, D) * factor;
        float ds = p * (dp - deltaTile[i]) * s.scale;
        for (int c = 0; c < kPerLane; ++c) {
          int64_t d = lane + 32 * c;
          if (d < D) {
            dkAcc[c] += ds * qTileMem[i * D + d];
            dvAcc[c] += p * factor * doTileMem[i * D + d];
          }
        }
      }
    }
  }
  if (!active)
    return;
  for (int c = 0; c < kPerLane; ++c) {
    int64_t d = lane + 32 * c;
    if (d < D) {
      dk[(kvh * s.keys + key) * D + d] = dkAcc[c];
      dv[(kvh * s.keys + key) * D + d] = dvAcc[c];
    }
  }
}

Shape toShape(const AttentionShape &a) {
  if (a.headDim < 1 || a.headDim > kMaxHeadDim)
    fail("attention", "head_dim " + std::to_string(a.headDim) + " is outside 1.." + std::to_string(kMaxHeadDim));
  if (a.batchHeads > 65535)
    fail("attention", "batch x heads " + std::to_string(a.batchHeads) + " exceeds 65535");
  if (a.groups < 1 || a.batchHeads % a.groups != 0)
    fail("attention", std::to_string(a.batchHeads) + " query heads do not share key/value heads in groups of " +
                          std::to_string(a.groups));
  return {a.queries, a.keys, a.headDim, a.groups, a.scale, a.causal, a.queryOffset, a.keyOffset, a.dropout};
}

} // namespace

void attentionForward(Stream stream, const AttentionShape &a, const float *q, const float *k, const float *v,
                      float *o, float *lse) {
  Shape s = toShape(a);
  if (a.queries == 0 || a.batchHeads == 0)
    return;
  dim3 grid(unsigned((a.queries + kWarps - 1) / kWarps), unsigned(a.batchHeads));
  forwardKernel<<<grid, kWarps * 32, 0, asStream(stream.handle)>>>(s, q, k, v, o, lse);
  checkLaunch("attentionForward");
}

void attentionBackward(Stream stream, const AttentionShape &a, const float *q, const float *k, const float *v,
                       const float *o, const float *dO, const float *lse, float *dq, float *dk, float *dv) {
  Shape s = toShape(a);
  cudaStream_t st = asStream(stream.handle);
  int64_t rows = a.batchHeads * a.queries;
  if (rows == 0 && a.keys * a.batchHeads == 0)
    return;
  StreamScratch deltaScratch(rows * int64_t(sizeof(float)), st, "cudaMallocAsync (attention)");
  float *delta = deltaScratch.as<float>();
  if (rows > 0) {
    rowDotKernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, st>>>(dO, o, delta, rows, a.headDim);
    checkLaunch("attentionBackward (row dot)");
    dim3 queryGrid(unsigned((a.queries + kWarps - 1) / kWarps), unsigned(a.batchHeads));
    queryGradKernel<<<queryGrid, kWarps * 32, 0, st>>>(s, q, k, v, dO, lse, delta, dq);
    checkLaunch("attentionBackward (dq)");
  }
  if (a.keys > 0) {
    dim3 keyGrid(unsigned((a.keys + kWarps - 1) / kWarps), unsigned(a.batchHeads / a.groups));
    keyValueGradKernel<<<keyGrid, kWarps * 32, 0, st>>>(s, q, k, v, dO, lse, delta, dk, dv);
    checkLaunch("attentionBackward (dk, dv)");
  }
}

} // namespace colossal::rt::cuda
