//===- Reduce.cuh - warp and block reductions -----------------------*- CUDA -*-===//

#ifndef COLOSSAL_RUNTIME_CUDA_REDUCE_CUH
#define COLOSSAL_RUNTIME_CUDA_REDUCE_CUH

#include <cstdint>

namespace colossal::rt::cuda {

__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets the result. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float blockSum(float v, float *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSum(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  return warpSum(v);
}

__device__ __forceinline__ float blockMax(float v, float *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warpMax(v);
}

/// How a long reduction spreads over the device: `blocks` blocks of 32 x 8
/// threads cover the outputs (for columns side by side, 32 columns and 8 row
/// groups each), and the `count` reduced elements are cut into `splits`
/// chunks so the grid fills every multiprocessor; each chunk's partial result
/// lands in scratch and one more kernel adds the chunks in order, so the sum
/// does not depend on scheduling.
struct ColumnSplit {
  static constexpr int kLanes = 32, kRowGroups = 8;
  int64_t blocks, splits, chunk;

  ColumnSplit(int64_t blocks, int64_t count) : blocks(blocks) {
    // About four blocks per multiprocessor of a large GPU, each chunk at
    // least 16 elements per thread.
    int64_t wanted = (4 * 132 + blocks - 1) / blocks;
    int64_t most = (count + 16 * kRowGroups - 1) / (16 * kRowGroups);
    splits = wanted < most ? wanted : most;
    splits = splits < 1 ? 1 : (splits > 65535 ? 65535 : splits);
    chunk = (count + splits - 1) / splits;
  }
};

} // namespace colossal::rt::cuda

#endif // COLOSSAL_RUNTIME_CUDA_REDUCE_CUH
