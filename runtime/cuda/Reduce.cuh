//===- Reduce.cuh - warp and block reductions -----------------------*- CUDA -*-===//

#ifndef COLOSSAL_RUNTIME_CUDA_REDUCE_CUH
#define COLOSSAL_RUNTIME_CUDA_REDUCE_CUH

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

} // namespace colossal::rt::cuda

#endif // COLOSSAL_RUNTIME_CUDA_REDUCE_CUH
