//===- CudaDevice.h - the GPU this rank uses -----------------------*- C++ -*-===//
//
// Only in the CUDA build of the runtime. `initializeCudaDevice` picks the
// GPU by local rank (local rank modulo the visible devices), installs device
// and pinned allocation for Allocation, and fails with the reason when no
// device is usable.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_CUDADEVICE_H
#define COLOSSAL_RUNTIME_CUDADEVICE_H

#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/train/Offload.h"

#include <memory>
#include <string>

namespace colossal::rt::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int computeMajor = 0, computeMinor = 0;
  int64_t memoryBytes = 0;
  int multiprocessors = 0;
};

DeviceInfo initializeCudaDevice(int localRank);

/// A new non-blocking stream / its destruction.
Stream createStream();
void destroyStream(Stream stream);
void synchronize(Stream stream);

/// Copies on a dedicated stream between device and (pinned) host memory.
std::unique_ptr<CopyEngine> makeCopyEngine();

/// Plain copies for tests and tools.
void copyToDevice(void *device, const void *host, int64_t bytes);
void copyToHost(void *host, const void *device, int64_t bytes);

} // namespace colossal::rt::cuda

#endif // COLOSSAL_RUNTIME_CUDADEVICE_H
