//===- Mesh.h - named axes over the ranks -------------------------*- C++ -*-===//
//
// A mesh names the parallel axes and their sizes, e.g. "dp=2,pp=1,tp=4".
// Ranks are laid out row-major: the last axis varies fastest, so the
// innermost axes (tensor parallelism) land on ranks of the same node, as the
// cost model's placement assumes. A group of an axis is the set of ranks that
// agree on every other coordinate.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_MESH_H
#define COLOSSAL_RUNTIME_MESH_H

#include <string>
#include <vector>

namespace colossal::rt {

struct MeshAxis {
  std::string name;
  int size = 1;
};

class MeshShape {
public:
  MeshShape() = default;
  explicit MeshShape(std::vector<MeshAxis> axes);

  /// Parses "dp=2,tp=4"; an error names the bad entry.
  static MeshShape parse(const std::string &text);

  const std::vector<MeshAxis> &axes() const { return axes_; }
  int ranks() const;
  /// The index of the axis called `name`; an error if there is none.
  int axisIndex(const std::string &name) const;

  std::vector<int> coordinates(int rank) const;
  int rankOf(const std::vector<int> &coordinates) const;
  /// The ranks of `rank`'s group along `axis`, in axis order.
  std::vector<int> group(int rank, int axis) const;
  /// "dp=2,tp=4".
  std::string str() const;

private:
  std::vector<MeshAxis> axes_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_MESH_H
