//===- StepMemory.h - the step's own tensors, accounted ------------*- C++ -*-===//
//
// An emitted step holds each value from the statement that defines it to
// the statement after its last use, where it frees it. StepMemory charges
// those bytes to the memory tracker as activations (in host memory on the
// host target, device memory on the CUDA target), so the step log's peak is
// the step's real high-water mark, and the compiler can state the same
// number in advance: it frees in the order it emits (the manifest's
// `planned_step_peak_bytes`).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_STEPMEMORY_H
#define COLOSSAL_RUNTIME_STEPMEMORY_H

#include "colossal/runtime/Memory.h"

#include <cstdint>

namespace colossal::rt {

class StepMemory {
public:
  explicit StepMemory(MemorySpace space) : space_(space) {}
  /// What is still held (the step's results, copied out) is discharged.
  ~StepMemory() {
    if (held_ > 0)
      MemoryTracker::global().freed(space_, MemoryCategory::Activations, held_);
  }
  StepMemory(const StepMemory &) = delete;
  StepMemory &operator=(const StepMemory &) = delete;

  /// Charges a value just defined (`storageBytes` of its target).
  template <typename T> void hold(const T &tensor) {
    int64_t bytes = storageBytes(tensor);
    held_ += bytes;
    MemoryTracker::global().allocated(space_, MemoryCategory::Activations, bytes);
  }
  /// Discharges and frees a value after its last use.
  template <typename T> void free(T &tensor) {
    int64_t bytes = storageBytes(tensor);
    held_ -= bytes;
    MemoryTracker::global().freed(space_, MemoryCategory::Activations, bytes);
    release(tensor);
  }

private:
  MemorySpace space_;
  int64_t held_ = 0;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_STEPMEMORY_H
