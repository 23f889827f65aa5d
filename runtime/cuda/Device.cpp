//===- Device.cpp - device selection, memory and the copy engine ----------===//

#include "colossal/runtime/kernels/CudaDevice.h"

#include "CudaCheck.h"
#include "colossal/runtime/Memory.h"

namespace colossal::rt::cuda {

namespace {

void *allocateDevice(int64_t bytes) {
  void *data = nullptr;
  cudaError_t status = cudaMalloc(&data, size_t(bytes > 0 ? bytes : 1));
  if (status != cudaSuccess) {
    size_t freeBytes = 0, totalBytes = 0;
    cudaGetLastError();
    cudaMemGetInfo(&freeBytes, &totalBytes);
    fail("cudaMalloc", "cannot allocate " + std::to_string(bytes) + " bytes (" + std::to_string(freeBytes) +
                           " of " + std::to_string(totalBytes) + " free): " + cudaGetErrorString(status));
  }
  return data;
}
void freeDevice(void *data) { cudaFree(data); }
void *allocatePinned(int64_t bytes) {
  void *data = nullptr;
  check(cudaHostAlloc(&data, size_t(bytes > 0 ? bytes : 1), cudaHostAllocDefault), "cudaHostAlloc");
  return data;
}
void freePinned(void *data) { cudaFreeHost(data); }
int64_t bytesInUse() {
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
    return -1;
  return int64_t(totalBytes - freeBytes);
}

class CudaCopyEngine : public CopyEngine {
public:
  CudaCopyEngine() { check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~CudaCopyEngine() override { cudaStreamDestroy(stream_); }
  void toHost(void *host, const void *device, int64_t bytes) override {
    toHost_ += bytes;
    check(cudaMemcpyAsync(host, device, size_t(bytes), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync to host");
  }
  void toDevice(void *device, const void *host, int64_t bytes) override {
    toDevice_ += bytes;
    check(cudaMemcpyAsync(device, host, size_t(bytes), cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync to device");
  }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (copy stream)"); }

private:
  cudaStream_t stream_ = nullptr;
};

} // namespace

DeviceInfo initializeCudaDevice(int localRank) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < 1)
    fail("cudaGetDeviceCount", "no CUDA device is visible to this rank");
  DeviceInfo info;
  info.index = localRank % count;
  check(cudaSetDevice(info.index), "cudaSetDevice");
  cudaDeviceProp props;
  check(cudaGetDeviceProperties(&props, info.index), "cudaGetDeviceProperties");
  info.name = props.name;
  info.computeMajor = props.major;
  info.computeMinor = props.minor;
  info.memoryBytes = int64_t(props.totalGlobalMem);
  info.multiprocessors = props.multiProcessorCount;
  DeviceMemoryFunctions functions;
  functions.allocateDevice = &allocateDevice;
  functions.freeDevice = &freeDevice;
  functions.allocatePinned = &allocatePinned;
  functions.freePinned = &freePinned;
  functions.deviceBytesInUse = &bytesInUse;
  installDeviceMemoryFunctions(functions);
  return info;
}

Stream createStream() {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  return Stream{stream};
}

void destroyStream(Stream stream) { cudaStreamDestroy(asStream(stream.handle)); }

void synchronize(Stream stream) { check(cudaStreamSynchronize(asStream(stream.handle)), "cudaStreamSynchronize"); }

std::unique_ptr<CopyEngine> makeCopyEngine() { return std::make_unique<CudaCopyEngine>(); }

void copyToDevice(void *device, const void *host, int64_t bytes) {
  check(cudaMemcpy(device, host, size_t(bytes), cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

void copyToHost(void *host, const void *device, int64_t bytes) {
  check(cudaMemcpy(host, device, size_t(bytes), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

} // namespace colossal::rt::cuda
