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

namespace {

bool isAxisName(llvm::StringRef name) {
  return !name.empty() && llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

} // namespace

std::optional<Layout> parseLayout(llvm::StringRef text, int64_t rank, std::string &error) {
  Layout layout;
  llvm::StringRef rest = text.trim();
  if (!rest.consume_front("[")) {
    error = "a layout starts with '[' (one entry per dimension: '-' or axes joined by '*')";
    return std::nullopt;
  }
  auto [inside, after] = rest.split(']');
  if (after.data() == nullptr || !rest.contains(']')) {
    error = "a layout's dimensions end with ']'";
    return std::nullopt;
  }
  std::vector<std::string> seen;
  auto use = [&](llvm::StringRef axis) {
    if (!isAxisName(axis)) {
      error = "'" + axis.str() + "' is not a mesh axis name";
      return false;
    }
    if (llvm::is_contained(seen, axis)) {
      error = "mesh axis '" + axis.str() + "' appears twice";
      return false;
    }
    seen.push_back(axis.str());
    return true;
  };
  if (!inside.trim().empty()) {
    llvm::SmallVector<llvm::StringRef> entries;
    inside.split(entries, ',');
    for (llvm::StringRef entry : entries) {
      entry = entry.trim();
      std::vector<std::string> axes;
      if (entry != "-") {
        llvm::SmallVector<llvm::StringRef> names;
        entry.split(names, '*');
        for (llvm::StringRef name : names) {
          if (!use(name.trim()))
            return std::nullopt;
          axes.push_back(name.trim().str());
        }
      }
      layout.dims.push_back(std::move(axes));
    }
  }
  if (int64_t(layout.dims.size()) != rank) {
    error = "the layout has " + std::to_string(layout.dims.size()) + " dimension(s), the value " + std::to_string(rank);
    return std::nullopt;
  }
  rest = after.trim();
  while (!rest.empty()) {
    std::vector<std::string> *list = nullptr;
    if (rest.consume_front("sum("))
      list = &layout.sums;
    else if (rest.consume_front("copies("))
      list = &layout.copies;
    else {
      error = "after the dimensions a layout has only 'sum(axes)' and 'copies(axes)', not '" + rest.str() + "'";
      return std::nullopt;
    }
    auto [names, tail] = rest.split(')');
    if (!rest.contains(')')) {
      error = "unclosed '(' in the layout";
      return std::nullopt;
    }
    llvm::SmallVector<llvm::StringRef> axes;
    names.split(axes, ',');
    for (llvm::StringRef name : axes) {
      if (!use(name.trim()))
        return std::nullopt;
      list->push_back(name.trim().str());
    }
    rest = tail.trim();
  }
  return layout;
}

} // namespace colossal::dist
