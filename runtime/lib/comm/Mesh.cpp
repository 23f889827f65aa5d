//===- Mesh.cpp -----------------------------------------------------------===//

#include "colossal/runtime/comm/Mesh.h"

#include "colossal/runtime/Error.h"

#include <cstdlib>
#include <set>
#include <sstream>

namespace colossal::rt {

MeshShape::MeshShape(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  std::set<std::string> seen;
  for (const MeshAxis &axis : axes_) {
    if (axis.name.empty() || axis.size < 1)
      fail("mesh", "axis \"" + axis.name + "\" needs a name and a size of at least 1");
    if (!seen.insert(axis.name).second)
      fail("mesh", "axis \"" + axis.name + "\" appears twice");
  }
}

MeshShape MeshShape::parse(const std::string &text) {
  std::vector<MeshAxis> axes;
  std::stringstream stream(text);
  std::string entry;
  while (std::getline(stream, entry, ',')) {
    size_t eq = entry.find('=');
    char *end = nullptr;
    long size = eq == std::string::npos ? 0 : std::strtol(entry.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || !end || *end != '\0' || size < 1 || size > (1 << 20))
      fail("mesh", "\"" + entry + "\" in \"" + text + "\" is not NAME=SIZE");
    axes.push_back({entry.substr(0, eq), int(size)});
  }
  if (axes.empty())
    fail("mesh", "\"" + text + "\" names no axis");
  return MeshShape(std::move(axes));
}

int MeshShape::ranks() const {
  int n = 1;
  for (const MeshAxis &axis : axes_)
    n *= axis.size;
  return n;
}

int MeshShape::axisIndex(const std::string &name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name)
      return int(i);
  fail("mesh", "no axis \"" + name + "\" in " + str());
}

std::vector<int> MeshShape::coordinates(int rank) const {
  std::vector<int> coords(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    coords[i] = rank % axes_[i].size;
    rank /= axes_[i].size;
  }
  return coords;
}

int MeshShape::rankOf(const std::vector<int> &coordinates) const {
  int rank = 0;
  for (size_t i = 0; i < axes_.size(); ++i)
    rank = rank * axes_[i].size + coordinates[i];
  return rank;
}

std::vector<int> MeshShape::group(int rank, int axis) const {
  std::vector<int> coords = coordinates(rank);
  std::vector<int> ranks;
  for (int i = 0; i < axes_[axis].size; ++i) {
    coords[axis] = i;
    ranks.push_back(rankOf(coords));
  }
  return ranks;
}

std::string MeshShape::str() const {
  std::string text;
  for (const MeshAxis &axis : axes_)
    text += (text.empty() ? "" : ",") + axis.name + "=" + std::to_string(axis.size);
  return text;
}

} // namespace colossal::rt
