//===- Safetensors.h - the safetensors file format ----------------*- C++ -*-===//
//
// An 8-byte little-endian header length, a JSON header mapping each tensor
// name to {dtype, shape, data_offsets} (plus a "__metadata__" map of
// strings), then the bytes. The format is Hugging Face's; any of its readers
// opens what we write. The reader trusts nothing: the header length, the
// JSON, every dtype, every shape against its byte range, and every range
// against the file are checked, and a CRC-32 per tensor (kept in the
// metadata as "crc32.<name>") is verified when present.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_SAFETENSORS_H
#define COLOSSAL_RUNTIME_SAFETENSORS_H

#include "colossal/runtime/DType.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace colossal::rt {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  int64_t bytes = 0;
};

struct WrittenFile {
  int64_t bytes = 0;
  /// CRC-32 of the whole file.
  uint32_t crc = 0;
};

/// Writes `tensors` (names unique) with `metadata` atomically; adds a CRC-32
/// of each tensor to the metadata.
WrittenFile writeSafetensors(const std::string &path, const std::vector<TensorView> &tensors,
                      std::map<std::string, std::string> metadata = {});

class SafetensorsFile {
public:
  SafetensorsFile(SafetensorsFile &&) = default;
  SafetensorsFile &operator=(SafetensorsFile &&) = default;
  // Views point into the owned bytes: no copies.
  SafetensorsFile(const SafetensorsFile &) = delete;

  /// Reads and checks the whole file; an error names the path and what is wrong.
  static SafetensorsFile read(const std::string &path);

  const std::vector<TensorView> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  /// The tensor called `name`, or nullptr.
  const TensorView *find(const std::string &name) const;
  /// The tensor called `name` with exactly this dtype and shape, or an error
  /// saying which differs.
  const TensorView &require(const std::string &name, DType dtype, const std::vector<int64_t> &shape) const;
  const std::string &path() const { return path_; }

  /// CRC-32 of the whole file as read.
  uint32_t fileCrc() const;

private:
  SafetensorsFile() = default;
  std::string path_;
  std::vector<unsigned char> bytes_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

std::string shapeString(const std::vector<int64_t> &shape);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_SAFETENSORS_H
