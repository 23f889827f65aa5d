//===- StepMemory.h - the step's own tensors, accounted ------------*- C++ -*-===//
//
// An emitted step holds each value from the statement that defines it to
// the statement after its last use, where it frees it. StepMemory replays
// that plan as the step runs: it charges each value's bytes as activations
// to the *planned* tracker (MemoryTracker::planned), which the compiler's
// `planned_step_peak_bytes` must equal, and frees the value's storage. What
// the step really allocated (its values, the kernels' scratch) is counted
// apart by the allocator (TrackedAllocator.h), so the step log can set the
// plan beside what happened.
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
      MemoryTracker::planned().freed(space_, MemoryCategory::Activations, held_);
  }
  StepMemory(const StepMemory &) = delete;
  StepMemory &operator=(const StepMemory &) = delete;

  /// Charges a value just defined (`storageBytes` of its target).
  template <typename T> void hold(const T &tensor) {
    int64_t bytes = storageBytes(tensor);
    held_ += bytes;
    MemoryTracker::planned().allocated(space_, MemoryCategory::Activations, bytes);
  }
  /// Discharges and frees a value after its last use.
  template <typename T> void free(T &tensor) {
    int64_t bytes = storageBytes(tensor);
    held_ -= bytes;
    MemoryTracker::planned().freed(space_, MemoryCategory::Activations, bytes);
    release(tensor);
  }

private:
  MemorySpace space_;
  int64_t held_ = 0;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_STEPMEMORY_H
