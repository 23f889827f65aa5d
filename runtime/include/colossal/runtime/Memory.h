//===- Memory.h - allocations accounted by category ----------------*- C++ -*-===//
//
// Every buffer the runtime or an emitted program allocates says what it is
// for (parameters, gradients, optimizer state, activations, communication
// buffers, workspace) and where it lives (host, pinned host, device). The
// tracker keeps the current and peak bytes of each, and of each space as a
// whole, so tests and the cost model's memory predictions can be checked
// against what a step really used.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_MEMORY_H
#define COLOSSAL_RUNTIME_MEMORY_H

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace colossal::rt {

/// `Data`: the training data the trainer holds (feeds read into memory, a
/// step's global batch, each microbatch's inputs).
enum class MemoryCategory { Parameters, Gradients, OptimizerState, Activations, Communication, Workspace, Data };
enum class MemorySpace { Host, PinnedHost, Device };
constexpr int kMemoryCategories = 7;
constexpr int kMemorySpaces = 3;

const char *nameOf(MemoryCategory category);
const char *nameOf(MemorySpace space);

class MemoryTracker {
public:
  /// The process-wide tracker the allocator reports to: what was really
  /// allocated (TrackedAllocator.h, Allocation).
  static MemoryTracker &global();
  /// What the emitted step's plan says it holds (StepMemory.h), replayed as
  /// the step runs: kept apart from what was allocated, so the two can be
  /// compared.
  static MemoryTracker &planned();

  void allocated(MemorySpace space, MemoryCategory category, int64_t bytes);
  void freed(MemorySpace space, MemoryCategory category, int64_t bytes);

  int64_t current(MemorySpace space, MemoryCategory category) const;
  int64_t peak(MemorySpace space, MemoryCategory category) const;
  /// All categories together (the peak of the sum, not the sum of peaks).
  int64_t current(MemorySpace space) const;
  int64_t peak(MemorySpace space) const;
  /// Peaks restart from the current values (e.g. at the start of a step).
  void resetPeaks();
  /// {"device": {"parameters": {"current": .., "peak": ..}, ..., "total": {..}}, ...}
  std::string json() const;
  /// One space: {"parameters": {"current": .., "peak": ..}, ..., "total": {..}}.
  std::string json(MemorySpace space) const;

private:
  struct Counter {
    int64_t current = 0;
    int64_t peak = 0;
  };
  mutable std::mutex mutex_;
  std::array<std::array<Counter, kMemoryCategories>, kMemorySpaces> counters_{};
  std::array<Counter, kMemorySpaces> totals_{};
};

/// How device and pinned host memory are obtained; the CUDA runtime library
/// installs its functions. Without them a device allocation is an error and
/// pinned memory is ordinary host memory (the host target needs no pinning).
struct DeviceMemoryFunctions {
  void *(*allocateDevice)(int64_t bytes) = nullptr;
  void (*freeDevice)(void *data) = nullptr;
  void *(*allocatePinned)(int64_t bytes) = nullptr;
  void (*freePinned)(void *data) = nullptr;
  /// What the device says is in use (cudaMemGetInfo: total less free),
  /// whoever allocated it (the CUDA runtime's own pools included).
  int64_t (*deviceBytesInUse)() = nullptr;
};
void installDeviceMemoryFunctions(const DeviceMemoryFunctions &functions);
/// The device's bytes in use, or -1 without a device.
int64_t deviceBytesInUse();
/// Device memory charged to the global tracker in `category`: the CUDA
/// target's tensors and buffers (freed through `freeDeviceTracked` with the
/// same size and category).
void *allocateDeviceTracked(int64_t bytes, MemoryCategory category);
void freeDeviceTracked(void *data, int64_t bytes, MemoryCategory category) noexcept;

/// An owned, accounted allocation (64-byte aligned on the host). Move-only;
/// freeing it updates the tracker.
class Allocation {
public:
  Allocation() = default;
  Allocation(int64_t bytes, MemoryCategory category, MemorySpace space = MemorySpace::Host,
             MemoryTracker *tracker = &MemoryTracker::global());
  ~Allocation();
  Allocation(Allocation &&other) noexcept;
  Allocation &operator=(Allocation &&other) noexcept;
  Allocation(const Allocation &) = delete;
  Allocation &operator=(const Allocation &) = delete;

  void *data() const { return data_; }
  template <typename T> T *as() const { return static_cast<T *>(data_); }
  int64_t bytes() const { return bytes_; }
  MemoryCategory category() const { return category_; }
  MemorySpace space() const { return space_; }
  void reset();

private:
  void *data_ = nullptr;
  int64_t bytes_ = 0;
  MemoryCategory category_ = MemoryCategory::Workspace;
  MemorySpace space_ = MemorySpace::Host;
  MemoryTracker *tracker_ = nullptr;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_MEMORY_H
