//===- Memory.cpp ---------------------------------------------------------===//

#include "colossal/runtime/Memory.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/TrackedAllocator.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <cstring>

namespace colossal::rt {

const char *nameOf(MemoryCategory category) {
  static const char *names[] = {"parameters",    "gradients", "optimizer_state", "activations",
                                "communication", "workspace", "data"};
  return names[int(category)];
}

const char *nameOf(MemorySpace space) {
  static const char *names[] = {"host", "pinned_host", "device"};
  return names[int(space)];
}

MemoryTracker &MemoryTracker::global() {
  static MemoryTracker tracker;
  return tracker;
}

MemoryTracker &MemoryTracker::planned() {
  static MemoryTracker tracker;
  return tracker;
}

void MemoryTracker::allocated(MemorySpace space, MemoryCategory category, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Counter &c = counters_[size_t(space)][size_t(category)];
  c.current += bytes;
  c.peak = std::max(c.peak, c.current);
  Counter &t = totals_[size_t(space)];
  t.current += bytes;
  t.peak = std::max(t.peak, t.current);
}

void MemoryTracker::freed(MemorySpace space, MemoryCategory category, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_[size_t(space)][size_t(category)].current -= bytes;
  totals_[size_t(space)].current -= bytes;
}

int64_t MemoryTracker::current(MemorySpace space, MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_[size_t(space)][size_t(category)].current;
}

int64_t MemoryTracker::peak(MemorySpace space, MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_[size_t(space)][size_t(category)].peak;
}

int64_t MemoryTracker::current(MemorySpace space) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return totals_[size_t(space)].current;
}

int64_t MemoryTracker::peak(MemorySpace space) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return totals_[size_t(space)].peak;
}

void MemoryTracker::resetPeaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &space : counters_)
    for (Counter &c : space)
      c.peak = c.current;
  for (Counter &t : totals_)
    t.peak = t.current;
}

namespace {

std::string counterJson(int64_t current, int64_t peak) {
  return "{\"current\": " + std::to_string(current) + ", \"peak\": " + std::to_string(peak) + "}";
}

} // namespace

std::string MemoryTracker::json(MemorySpace space) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text = "{";
  for (int c = 0; c < kMemoryCategories; ++c) {
    const Counter &counter = counters_[size_t(space)][size_t(c)];
    text += "\"" + std::string(nameOf(MemoryCategory(c))) + "\": " + counterJson(counter.current, counter.peak) + ", ";
  }
  const Counter &total = totals_[size_t(space)];
  return text + "\"total\": " + counterJson(total.current, total.peak) + "}";
}

std::string MemoryTracker::json() const {
  std::string text = "{";
  for (int s = 0; s < kMemorySpaces; ++s)
    text += std::string(s ? ", " : "") + "\"" + nameOf(MemorySpace(s)) + "\": " + json(MemorySpace(s));
  return text + "}";
}

namespace {
DeviceMemoryFunctions deviceFunctions;
} // namespace

void installDeviceMemoryFunctions(const DeviceMemoryFunctions &functions) {
  deviceFunctions = functions;
}

int64_t deviceBytesInUse() { return deviceFunctions.deviceBytesInUse ? deviceFunctions.deviceBytesInUse() : -1; }

void *allocateDeviceTracked(int64_t bytes, MemoryCategory category) {
  if (!deviceFunctions.allocateDevice)
    fail(std::string("allocate ") + nameOf(category) + " (device)",
         "this runtime was built without a device; use the host target");
  void *data = deviceFunctions.allocateDevice(bytes);
  MemoryTracker::global().allocated(MemorySpace::Device, category, bytes);
  return data;
}

void freeDeviceTracked(void *data, int64_t bytes, MemoryCategory category) noexcept {
  if (!data)
    return;
  deviceFunctions.freeDevice(data);
  MemoryTracker::global().freed(MemorySpace::Device, category, bytes);
}

Allocation::Allocation(int64_t bytes, MemoryCategory category, MemorySpace space,
                       MemoryTracker *tracker)
    : bytes_(bytes), category_(category), space_(space), tracker_(tracker) {
  if (bytes < 0)
    fail("allocate", "negative size " + std::to_string(bytes));
  std::string what = std::string("allocate ") + nameOf(category) + " (" + nameOf(space) + ")";
  switch (space) {
  case MemorySpace::Device:
    if (!deviceFunctions.allocateDevice)
      fail(what, "this runtime was built without a device; use the host target");
    data_ = deviceFunctions.allocateDevice(bytes);
    break;
  case MemorySpace::PinnedHost:
    if (deviceFunctions.allocatePinned) {
      data_ = deviceFunctions.allocatePinned(bytes);
      break;
    }
    [[fallthrough]];
  case MemorySpace::Host: {
    size_t rounded = size_t((bytes + 63) / 64 * 64);
    data_ = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!data_)
      fail(what, "out of host memory for " + std::to_string(bytes) + " bytes");
    break;
  }
  }
  if (tracker_)
    tracker_->allocated(space_, category_, bytes_);
}

Allocation::~Allocation() { reset(); }

void Allocation::reset() {
  if (!data_)
    return;
  if (space_ == MemorySpace::Device)
    deviceFunctions.freeDevice(data_);
  else if (space_ == MemorySpace::PinnedHost && deviceFunctions.freePinned)
    deviceFunctions.freePinned(data_);
  else
    std::free(data_);
  if (tracker_)
    tracker_->freed(space_, category_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

Allocation::Allocation(Allocation &&other) noexcept { *this = std::move(other); }

Allocation &Allocation::operator=(Allocation &&other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    bytes_ = other.bytes_;
    category_ = other.category_;
    space_ = other.space_;
    tracker_ = other.tracker_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

//===----------------------------------------------------------------------===//
// Tracked host buffers
//===----------------------------------------------------------------------===//

namespace {

thread_local MemoryCategory scopeCategory = MemoryCategory::Workspace;
thread_local MemorySpace scopeSpace = MemorySpace::Host;

/// In front of every tracked buffer: what it was charged as. 64 bytes keep
/// the data 64-byte aligned.
struct alignas(64) TrackedHeader {
  int64_t bytes;
  uint32_t magic;
  uint8_t category, space, pinned;
};
static_assert(sizeof(TrackedHeader) == 64, "the header keeps the data aligned");
constexpr uint32_t kTrackedMagic = 0xC0105A1u;

} // namespace

MemoryScope::MemoryScope(MemoryCategory category, MemorySpace space)
    : previousCategory_(scopeCategory), previousSpace_(scopeSpace) {
  if (space == MemorySpace::Device)
    fail("memory scope", "host buffers cannot be charged to device memory");
  scopeCategory = category, scopeSpace = space;
}

MemoryScope::~MemoryScope() { scopeCategory = previousCategory_, scopeSpace = previousSpace_; }

MemoryCategory MemoryScope::category() { return scopeCategory; }
MemorySpace MemoryScope::space() { return scopeSpace; }

void *allocateTracked(size_t bytes, MemoryCategory category, MemorySpace space) {
  if (space == MemorySpace::Device)
    fail("allocate", "host buffers cannot be charged to device memory");
  if (bytes > size_t(INT64_MAX) - sizeof(TrackedHeader))
    throw std::bad_alloc();
  size_t total = (bytes + sizeof(TrackedHeader) + 63) / 64 * 64;
  bool pinned = space == MemorySpace::PinnedHost && deviceFunctions.allocatePinned;
  void *block = pinned ? deviceFunctions.allocatePinned(int64_t(total)) : std::aligned_alloc(64, total);
  if (!block)
    throw std::bad_alloc();
  auto *header = static_cast<TrackedHeader *>(block);
  header->bytes = int64_t(bytes);
  header->magic = kTrackedMagic;
  header->category = uint8_t(category), header->space = uint8_t(space), header->pinned = pinned;
  MemoryTracker::global().allocated(space, category, int64_t(bytes));
  return header + 1;
}

void freeTracked(void *data) noexcept {
  if (!data)
    return;
  TrackedHeader *header = static_cast<TrackedHeader *>(data) - 1;
  if (header->magic != kTrackedMagic) {
    std::fprintf(stderr, "colossal runtime: freeing a buffer the tracked allocator did not make\n");
    std::abort();
  }
  header->magic = 0;
  MemoryTracker::global().freed(MemorySpace(header->space), MemoryCategory(header->category), header->bytes);
  if (header->pinned)
    deviceFunctions.freePinned(header);
  else
    std::free(header);
}

} // namespace colossal::rt
