//===- Layout.cpp - how a value lies on the mesh ---------------------------===//

#include "colossal/Dialect/Dist/Layout.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace colossal::dist {

Layout Layout::dual() const {
  Layout d = *this;
  std::swap(d.sums, d.copies);
  return d;
}

std::string Layout::str() const {
  std::string out = "[";
  for (auto [d, dim] : llvm::enumerate(dims))
    out += (d ? ", " : "") + (dim.empty() ? std::string("-") : llvm::join(dim, "*"));
  out += "]";
  if (!sums.empty())
    out += " sum(" + llvm::join(sums, ",") + ")";
  if (!copies.empty())
    out += " copies(" + llvm::join(copies, ",") + ")";
  return out;
}

Layout wholeLayout(int64_t rank) {
  Layout layout;
  layout.dims.resize(size_t(rank));
  return layout;
}

Layout splitLayout(int64_t rank, int64_t dim, llvm::StringRef axis) {
  Layout layout = wholeLayout(rank);
  layout.dims[size_t(dim)] = {axis.str()};
  return layout;
}

bool isMeshAxisName(llvm::StringRef name) {
  return !name.empty() && llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

} // namespace colossal::dist
