//===- Safetensors.cpp ----------------------------------------------------===//

#include "colossal/runtime/io/Safetensors.h"

#include "colossal/support/Json.h"
#include "colossal/runtime/io/AtomicFile.h"
#include "colossal/runtime/io/Crc32.h"
#include "colossal/runtime/Error.h"

#include <cstdio>
#include <set>

namespace colossal::rt {

using support::Json;

namespace {
constexpr uint64_t kMaxHeaderBytes = 100u << 20; // as the reference implementation limits it

std::string hex(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}
} // namespace

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

WrittenFile writeSafetensors(const std::string &path, const std::vector<TensorView> &tensors,
                      std::map<std::string, std::string> metadata) {
  Json::Object header;
  std::set<std::string> names;
  int64_t offset = 0;
  for (const TensorView &t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second)
      fail("write " + path, "tensor name \"" + t.name + "\" is empty, reserved or repeated");
    int64_t elements = 1;
    for (int64_t d : t.shape)
      elements *= d;
    if (elements * bytesOf(t.dtype) != t.bytes)
      fail("write " + path, "tensor " + t.name + " of shape " + shapeString(t.shape) + " has " +
                                std::to_string(t.bytes) + " bytes");
    Json::Array shape;
    for (int64_t d : t.shape)
      shape.push_back(Json(d));
    header[t.name] = Json(Json::Object{{"dtype", safetensorsName(t.dtype)},
                                       {"shape", Json(shape)},
                                       {"data_offsets", Json(Json::Array{Json(offset), Json(offset + t.bytes)})}});
    offset += t.bytes;
    metadata["crc32." + t.name] = hex(crc32(t.data, t.bytes));
  }
  Json::Object meta;
  for (const auto &[key, value] : metadata)
    meta[key] = Json(value);
  header["__metadata__"] = Json(meta);
  std::string text = Json(header).dump(0);
  // Pad the header with spaces so the data starts 8-byte aligned.
  while ((text.size() + 8) % 8)
    text += ' ';
  uint64_t length = text.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = uint8_t(length >> (8 * i));
  std::vector<std::pair<const void *, int64_t>> pieces = {{prefix, 8}, {text.data(), int64_t(text.size())}};
  for (const TensorView &t : tensors)
    pieces.push_back({t.data, t.bytes});
  writeFileAtomically(path, pieces);
  WrittenFile written;
  for (const auto &[data, bytes] : pieces) {
    written.crc = crc32(data, bytes, written.crc);
    written.bytes += bytes;
  }
  return written;
}

uint32_t SafetensorsFile::fileCrc() const { return crc32(bytes_.data(), int64_t(bytes_.size())); }

SafetensorsFile SafetensorsFile::read(const std::string &path) {
  SafetensorsFile file;
  file.path_ = path;
  file.bytes_ = readWholeFile(path);
  const std::vector<unsigned char> &bytes = file.bytes_;
  std::string what = "read " + path;
  if (bytes.size() < 8)
    fail(what, "only " + std::to_string(bytes.size()) + " bytes: not a safetensors file");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(bytes[size_t(i)]) << (8 * i);
  if (length > kMaxHeaderBytes || length > bytes.size() - 8)
    fail(what, "header length " + std::to_string(length) + " does not fit the file of " +
                   std::to_string(bytes.size()) + " bytes (truncated or not safetensors)");
  std::string error;
  std::optional<Json> header = Json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + long(length)), error);
  if (!header || !header->isObject())
    fail(what, "header is not a JSON object" + (error.empty() ? "" : ": " + error));
  const unsigned char *data = bytes.data() + 8 + length;
  uint64_t dataBytes = bytes.size() - 8 - length;
  for (const auto &[name, entry] : header->asObject()) {
    if (name == "__metadata__") {
      if (!entry.isObject())
        fail(what, "__metadata__ is not an object");
      for (const auto &[key, value] : entry.asObject()) {
        if (!value.isString())
          fail(what, "__metadata__." + key + " is not a string");
        file.metadata_[key] = value.asString();
      }
      continue;
    }
    std::string where = what + ": tensor " + name;
    const Json *dtype = entry.isObject() ? entry.find("dtype") : nullptr;
    const Json *shape = entry.isObject() ? entry.find("shape") : nullptr;
    const Json *offsets = entry.isObject() ? entry.find("data_offsets") : nullptr;
    if (!dtype || !dtype->isString() || !shape || !shape->isArray() || !offsets || !offsets->isArray() ||
        offsets->asArray().size() != 2)
      fail(where, "needs dtype, shape and data_offsets");
    TensorView view;
    view.name = name;
    auto parsed = parseSafetensorsName(dtype->asString());
    if (!parsed)
      fail(where, "unsupported dtype " + dtype->asString());
    view.dtype = *parsed;
    double elements = 1;
    for (const Json &d : shape->asArray()) {
      if (!d.isNumber() || d.asNumber() < 0 || d.asNumber() != double(int64_t(d.asNumber())))
        fail(where, "shape entries must be non-negative integers");
      view.shape.push_back(int64_t(d.asNumber()));
      elements *= d.asNumber();
    }
    double begin = offsets->asArray()[0].isNumber() ? offsets->asArray()[0].asNumber() : -1;
    double end = offsets->asArray()[1].isNumber() ? offsets->asArray()[1].asNumber() : -1;
    if (begin < 0 || end < begin || end > double(dataBytes))
      fail(where, "data_offsets [" + std::to_string(int64_t(begin)) + ", " + std::to_string(int64_t(end)) +
                      "] fall outside the " + std::to_string(dataBytes) + " data bytes (truncated file?)");
    if (elements * double(bytesOf(view.dtype)) != end - begin)
      fail(where, "shape " + shapeString(view.shape) + " of " + nameOf(view.dtype) + " needs " +
                      std::to_string(int64_t(elements) * bytesOf(view.dtype)) + " bytes but data_offsets span " +
                      std::to_string(int64_t(end - begin)));
    view.data = data + int64_t(begin);
    view.bytes = int64_t(end - begin);
    file.tensors_.push_back(view);
  }
  for (const TensorView &t : file.tensors_) {
    auto crc = file.metadata_.find("crc32." + t.name);
    if (crc != file.metadata_.end() && crc->second != hex(crc32(t.data, t.bytes)))
      fail(what + ": tensor " + t.name, "checksum mismatch (stored " + crc->second + ", computed " +
                                            hex(crc32(t.data, t.bytes)) + "): the file is corrupt");
  }
  return file;
}

const TensorView *SafetensorsFile::find(const std::string &name) const {
  for (const TensorView &t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

const TensorView &SafetensorsFile::require(const std::string &name, DType dtype,
                                           const std::vector<int64_t> &shape) const {
  const TensorView *t = find(name);
  if (!t)
    fail("read " + path_, "no tensor " + name);
  if (t->dtype != dtype || t->shape != shape)
    fail("read " + path_, "tensor " + name + " is " + nameOf(t->dtype) + " " + shapeString(t->shape) +
                              ", expected " + nameOf(dtype) + " " + shapeString(shape));
  return *t;
}

} // namespace colossal::rt
