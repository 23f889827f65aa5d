//===- StreamScratch.h - a kernel's stream-ordered scratch ---------*- C++ -*-===//
//
// Scratch a kernel sequence needs between its launches: allocated and freed
// in the stream's order (no device synchronisation) and charged to the
// memory tracker as workspace while it is held.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_CUDA_STREAMSCRATCH_H
#define COLOSSAL_RUNTIME_CUDA_STREAMSCRATCH_H

#include "CudaCheck.h"
#include "colossal/runtime/Memory.h"

namespace colossal::rt::cuda {

class StreamScratch {
public:
  StreamScratch(int64_t bytes, cudaStream_t stream, const char *op) : bytes_(bytes > 0 ? bytes : 1), stream_(stream) {
    check(cudaMallocAsync(&data_, size_t(bytes_), stream_), op);
    MemoryTracker::global().allocated(MemorySpace::Device, MemoryCategory::Workspace, bytes_);
  }
  ~StreamScratch() {
    cudaFreeAsync(data_, stream_);
    MemoryTracker::global().freed(MemorySpace::Device, MemoryCategory::Workspace, bytes_);
  }
  StreamScratch(const StreamScratch &) = delete;
  StreamScratch &operator=(const StreamScratch &) = delete;

  template <typename T> T *as() const { return static_cast<T *>(data_); }

private:
  void *data_ = nullptr;
  int64_t bytes_;
  cudaStream_t stream_;
};

} // namespace colossal::rt::cuda

#endif // COLOSSAL_RUNTIME_CUDA_STREAMSCRATCH_H
