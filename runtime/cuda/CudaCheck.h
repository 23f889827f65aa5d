//===- CudaCheck.h - every CUDA, cuBLAS and NCCL call checked --------*- C++ -*-===//
//
// Internal to the CUDA runtime library: turn a failing status into an Error
// naming the call (and, through Error, the rank).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_CUDA_CUDACHECK_H
#define COLOSSAL_RUNTIME_CUDA_CUDACHECK_H

#include "colossal/runtime/Error.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

namespace colossal::rt::cuda {

inline void check(cudaError_t status, const char *call) {
  if (status != cudaSuccess)
    fail(call, std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status));
}

inline void check(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(call, std::string("cuBLAS status ") + std::to_string(int(status)));
}

/// Launch errors surface at the next call; check right after a launch.
inline void checkLaunch(const char *kernel) { check(cudaGetLastError(), kernel); }

inline cudaStream_t asStream(void *handle) { return static_cast<cudaStream_t>(handle); }

/// Blocks for a 1-D grid-stride loop over n elements.
inline unsigned gridFor(int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 1 ? 1 : blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

/// Kernels with one block per row need the rows to fit one grid dimension.
inline void requireRows(int64_t rows, const char *kernel) {
  if (rows > INT32_MAX)
    fail(kernel, std::to_string(rows) + " rows exceed one grid");
}

} // namespace colossal::rt::cuda

#endif // COLOSSAL_RUNTIME_CUDA_CUDACHECK_H
