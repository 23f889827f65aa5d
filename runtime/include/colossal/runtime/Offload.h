//===- Offload.h - copies between device and host memory, off the critical path -*- C++ -*-===//
//
// ZeRO-Offload keeps optimizer state (and optionally parameters) in pinned
// host memory: gradients go down to the host as the backward pass produces
// them, the host runs the optimizer step, and updated parameters come back,
// all overlapped with compute. A CopyEngine queues copies in order on its own
// stream (CUDA: a copy stream; host target: a worker thread) and
// `synchronize` waits for everything queued.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_OFFLOAD_H
#define COLOSSAL_RUNTIME_OFFLOAD_H

#include "colossal/runtime/Optimizers.h"

#include <cstdint>
#include <memory>
#include <vector>

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

/// One tensor whose optimizer step runs on the host: the device holds the
/// parameter and its gradient; the host holds fp32 copies of both and the
/// optimizer state (in `host`, whose param/grad/m/v point to host memory).
struct OffloadedTensor {
  float *deviceParam = nullptr;
  const float *deviceGrad = nullptr;
  OptimizerTensor host;
};

/// Gradients down, an AdamW step on the host, parameters back up.
void offloadedAdamwStep(CopyEngine &engine, std::vector<OffloadedTensor> &tensors, const AdamSettings &settings,
                        float gradScale);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_OFFLOAD_H
