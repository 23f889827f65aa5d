//===- Layout.h - how a value lies on the mesh (dist.reshard) ------*- C++ -*-===//
//
// A layout says, for one rank's value, how it relates to the whole value:
// for each dimension the mesh axes splitting it (major first), the axes over
// which the ranks hold pending partial sums, and the axes over which they
// hold copies that their readers use differently (each rank computing its
// own part from them). An axis named nowhere holds the value whole, read the
// same way everywhere.
//
// Written (`#dist.sharding<...>`) as `[-, tp, sp*tp] sum(dp) copies(tp)`: a rank-3 value whose first
// dimension is whole, whose second is split over `tp`, whose third is split
// over `sp` then `tp` within it; `sum(...)` and `copies(...)` are optional.
//
// Copies and sums are each other's gradient: what each rank reads in its own
// way gets back a partial gradient from every rank, and the gradient of a
// partial sum is whole on every rank. So the gradient of a resharding from
// layout A to layout B is the resharding from dual(B) to dual(A), where dual
// swaps `sum` and `copies` and keeps the splits (Megatron's f and g
// operators, and a gather's reduce-scatter, are instances).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_DIALECT_DIST_LAYOUT_H
#define COLOSSAL_DIALECT_DIST_LAYOUT_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace colossal::dist {

struct Layout {
  std::vector<std::vector<std::string>> dims;
  std::vector<std::string> sums, copies;

  bool operator==(const Layout &other) const {
    return dims == other.dims && sums == other.sums && copies == other.copies;
  }
  /// The layout of the gradient (sums and copies swapped).
  Layout dual() const;
  std::string str() const;
};

/// Whether `name` can name a mesh axis (letters, digits, '_').
bool isMeshAxisName(llvm::StringRef name);

/// A whole value's layout (every dimension whole, no sums or copies).
Layout wholeLayout(int64_t rank);
/// A value of rank `rank` split along dimension `dim` over mesh axis `axis`
/// and whole otherwise.
Layout splitLayout(int64_t rank, int64_t dim, llvm::StringRef axis);

} // namespace colossal::dist

#endif // COLOSSAL_DIALECT_DIST_LAYOUT_H
