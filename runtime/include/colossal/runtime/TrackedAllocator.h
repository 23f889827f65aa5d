//===- TrackedAllocator.h - host buffers charged as they are allocated -*- C++ -*-===//
//
// Every buffer of tensor data the runtime or an emitted host program holds
// (tensors, kernel scratch, communication and staging buffers, model
// states) comes from `allocateTracked`, which charges the memory tracker
// when it allocates and uncharges it when it frees: the tracker's numbers
// are what the process really held, not what anybody planned.
//
// What a buffer is for is said where it is made: a `MemoryScope` sets the
// category (and the space: host, or pinned host for offloaded state) of
// every allocation the thread makes while it lives, and an allocator can fix
// its own (kernel scratch is always `Workspace`). The category travels with
// the buffer (a header in front of it), so a buffer freed under another
// scope is uncharged where it was charged.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TRACKEDALLOCATOR_H
#define COLOSSAL_RUNTIME_TRACKEDALLOCATOR_H

#include "colossal/runtime/Memory.h"

#include <cstddef>
#include <new>
#include <type_traits>
#include <vector>

namespace colossal::rt {

/// The category and space of what this thread allocates, for as long as the
/// scope lives (scopes nest; the innermost wins). Without a scope a thread
/// allocates `Workspace` in host memory.
class MemoryScope {
public:
  explicit MemoryScope(MemoryCategory category, MemorySpace space = MemorySpace::Host);
  ~MemoryScope();
  MemoryScope(const MemoryScope &) = delete;
  MemoryScope &operator=(const MemoryScope &) = delete;

  static MemoryCategory category();
  static MemorySpace space();

private:
  MemoryCategory previousCategory_;
  MemorySpace previousSpace_;
};

/// `bytes` of host (or pinned host) memory, 64-byte aligned, charged to
/// `category` in `space` of the global tracker. Never null: failure throws.
void *allocateTracked(size_t bytes, MemoryCategory category, MemorySpace space);
/// Frees what `allocateTracked` returned (null is ignored) and uncharges it.
void freeTracked(void *data) noexcept;

/// A standard allocator over `allocateTracked`: the thread's scope decides
/// the category at each allocation, unless the allocator fixes one.
template <typename T> class TrackedAllocator {
public:
  using value_type = T;
  // Any allocator frees any tracked buffer (the header says how).
  using is_always_equal = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;

  TrackedAllocator() noexcept = default;
  explicit TrackedAllocator(MemoryCategory category, MemorySpace space = MemorySpace::Host) noexcept
      : fixed_(true), category_(category), space_(space) {}
  template <typename U>
  TrackedAllocator(const TrackedAllocator<U> &other) noexcept
      : fixed_(other.fixed()), category_(other.category()), space_(other.space()) {}

  T *allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T))
      throw std::bad_alloc();
    return static_cast<T *>(allocateTracked(n * sizeof(T), fixed_ ? category_ : MemoryScope::category(),
                                            fixed_ ? space_ : MemoryScope::space()));
  }
  void deallocate(T *data, size_t) noexcept { freeTracked(data); }
  /// A copy is charged where it is made, not where its source was.
  TrackedAllocator select_on_container_copy_construction() const { return TrackedAllocator(); }

  bool fixed() const { return fixed_; }
  MemoryCategory category() const { return category_; }
  MemorySpace space() const { return space_; }
  template <typename U> bool operator==(const TrackedAllocator<U> &) const { return true; }
  template <typename U> bool operator!=(const TrackedAllocator<U> &) const { return false; }

private:
  bool fixed_ = false;
  MemoryCategory category_ = MemoryCategory::Workspace;
  MemorySpace space_ = MemorySpace::Host;
};

/// Tensor data, charged to the scope it is allocated in.
template <typename T> using TrackedVector = std::vector<T, TrackedAllocator<T>>;
using Floats = TrackedVector<float>;
using Ints = TrackedVector<int64_t>;

/// `n` elements always charged to `category` in `space`, whatever the
/// scope (also when resized later).
template <typename T>
TrackedVector<T> buffer(size_t n, MemoryCategory category, MemorySpace space = MemorySpace::Host,
                        const T &value = T()) {
  return TrackedVector<T>(n, value, TrackedAllocator<T>(category, space));
}

/// A kernel's scratch: always `Workspace`.
template <typename T> TrackedVector<T> scratch(size_t n, const T &value = T()) {
  return buffer<T>(n, MemoryCategory::Workspace, MemorySpace::Host, value);
}

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_TRACKEDALLOCATOR_H
