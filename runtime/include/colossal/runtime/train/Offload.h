//===- Offload.h - copies between device and host memory, off the critical path -*- C++ -*-===//
//
// ZeRO-Offload keeps optimizer state in pinned host memory: gradients go
// down to the host, the host runs the optimizer step, and updated parameters
// come back (ShardedOptimizer.h does this for its shard). A CopyEngine queues
// copies in order on its own stream (CUDA: a copy stream; host target: a
// worker thread) and `synchronize` waits for everything queued.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_OFFLOAD_H
#define COLOSSAL_RUNTIME_OFFLOAD_H

#include <cstdint>
#include <memory>

namespace colossal::rt {

class CopyEngine {
public:
  virtual ~CopyEngine();
  virtual void toHost(void *host, const void *device, int64_t bytes) = 0;
  virtual void toDevice(void *device, const void *host, int64_t bytes) = 0;
  /// Blocks until every queued copy is done; rethrows a copy's failure.
  virtual void synchronize() = 0;
  /// Bytes moved each way since creation (for the offload cost check).
  int64_t bytesToHost() const { return toHost_; }
  int64_t bytesToDevice() const { return toDevice_; }

protected:
  int64_t toHost_ = 0, toDevice_ = 0;
};

/// The host target's engine: "device" memory is host memory; copies run on a
/// worker thread in order.
std::unique_ptr<CopyEngine> makeHostCopyEngine();

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_OFFLOAD_H
