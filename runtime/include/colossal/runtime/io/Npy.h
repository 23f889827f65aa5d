//===- Npy.h - NumPy .npy arrays -----------------------------------*- C++ -*-===//
//
// Feeds (one .npy per graph input) and token files come as NumPy arrays.
// Versions 1.0-3.0, C order, little-endian: f4, f8, f2, i8, i4, u2, u1 and
// u4 (read as i64, for token ids). Every header field is checked and an error
// names the file and the field; the data size must match the shape exactly.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_NPY_H
#define COLOSSAL_RUNTIME_NPY_H

#include "colossal/runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace colossal::rt {

struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;

  int64_t elements() const;
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(data.data()); }
};

/// Where a .npy file's elements are, from its header: what a reader that
/// maps the file instead of copying it needs. `elementBytes` is the stored
/// width (4 for u4, which `dtype` reports as I64, its widened type).
struct NpyLayout {
  DType dtype = DType::F32;
  bool unsigned32 = false;
  std::vector<int64_t> shape;
  size_t dataOffset = 0;
  int64_t elementBytes = 4;

  int64_t elements() const;
};

/// Parses and checks the header of a .npy file of `size` bytes starting at
/// `bytes` (at least the header must be there): the data must fill the rest
/// of the file exactly.
NpyLayout parseNpyLayout(const unsigned char *bytes, size_t size, const std::string &name);

/// Reads `path`; uint32 arrays are widened to i64.
NpyArray readNpy(const std::string &path);
/// Parses the bytes of a .npy file (`name` is used in errors).
NpyArray parseNpy(const std::vector<unsigned char> &bytes, const std::string &name);
/// Writes a version 1.0 file atomically.
void writeNpy(const std::string &path, DType dtype, const std::vector<int64_t> &shape, const void *data);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_NPY_H
