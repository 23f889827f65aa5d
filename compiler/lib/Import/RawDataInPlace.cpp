//===- RawDataInPlace.cpp - a model's graph without its weights' bytes ----===//
//
// Protobuf's wire format, for the three messages on the path to a weight's
// bytes (field numbers from onnx.proto): ModelProto.graph (7),
// GraphProto.initializer (5), TensorProto.raw_data (9), external_data (13)
// and data_location (14). Every other field is copied byte for byte.
//
//===----------------------------------------------------------------------===//

#include "RawDataInPlace.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>

namespace colossal::import {
namespace {

enum WireType : uint32_t { Varint = 0, Fixed64 = 1, LengthDelimited = 2, Fixed32 = 5 };

constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9, kTensorExternalData = 13,
                   kTensorDataLocation = 14, kEntryKey = 1, kEntryValue = 2;
constexpr uint64_t kExternalLocation = 1;

/// One field of a message: its number, wire type, the whole field's bytes
/// (tag included) and, when length-delimited, its payload.
struct Field {
  uint32_t number = 0;
  uint32_t wireType = 0;
  llvm::StringRef bytes, payload;
};

/// Reads the fields of one message; fails on anything malformed.
class FieldReader {
public:
  explicit FieldReader(llvm::StringRef message) : rest(message) {}

  /// The next field, or nullopt at the end or on an error (see `failed`).
  std::optional<Field> next() {
    if (rest.empty() || failed)
      return std::nullopt;
    const char *start = rest.data();
    std::optional<uint64_t> tag = varint();
    if (!tag || (*tag >> 3) == 0 || (*tag >> 3) > UINT32_MAX)
      return fail();
    Field field;
    field.number = uint32_t(*tag >> 3);
    field.wireType = uint32_t(*tag & 7);
    switch (field.wireType) {
    case Varint:
      if (!varint())
        return fail();
      break;
    case Fixed64:
    case Fixed32: {
      size_t width = field.wireType == Fixed64 ? 8 : 4;
      if (rest.size() < width)
        return fail();
      rest = rest.drop_front(width);
      break;
    }
    case LengthDelimited: {
      std::optional<uint64_t> length = varint();
      if (!length || *length > rest.size())
        return fail();
      field.payload = rest.take_front(*length);
      rest = rest.drop_front(*length);
      break;
    }
    default: // groups, long deprecated, and invalid types
      return fail();
    }
    field.bytes = llvm::StringRef(start, size_t(rest.data() - start));
    return field;
  }

  bool failed = false;

private:
  std::optional<Field> fail() {
    failed = true;
    return std::nullopt;
  }

  std::optional<uint64_t> varint() {
    uint64_t value = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (rest.empty())
        return std::nullopt;
      uint8_t byte = uint8_t(rest.front());
      rest = rest.drop_front();
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return value;
    }
    return std::nullopt;
  }

  llvm::StringRef rest;
};

void appendVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(char(value | 0x80));
    value >>= 7;
  }
  out.push_back(char(value));
}

void appendLengthDelimited(std::string &out, uint32_t number, llvm::StringRef payload) {
  appendVarint(out, (uint64_t(number) << 3) | LengthDelimited);
  appendVarint(out, payload.size());
  out.append(payload.data(), payload.size());
}

void appendEntry(std::string &out, llvm::StringRef key, llvm::StringRef value) {
  std::string entry;
  appendLengthDelimited(entry, kEntryKey, key);
  appendLengthDelimited(entry, kEntryValue, value);
  appendLengthDelimited(out, kTensorExternalData, entry);
}

/// The tensor with its raw data left at its offset in the file whose bytes
/// start at `fileStart`; the tensor unchanged when its data is small or
/// already external.
std::optional<std::string> tensorInPlace(llvm::StringRef tensor, const char *fileStart, llvm::StringRef fileName,
                                         size_t minBytes) {
  FieldReader reader(tensor);
  std::string kept;
  std::optional<llvm::StringRef> raw;
  bool external = false;
  while (std::optional<Field> field = reader.next()) {
    if (field->number == kTensorRawData) {
      // A repeated bytes field keeps its last value; leave that to protobuf.
      if (field->wireType != LengthDelimited || raw)
        return std::nullopt;
      raw = field->payload;
      continue;
    }
    external |= field->number == kTensorExternalData || field->number == kTensorDataLocation;
    kept.append(field->bytes.data(), field->bytes.size());
  }
  if (reader.failed)
    return std::nullopt;
  if (!raw || external || raw->size() < minBytes)
    return tensor.str();
  appendEntry(kept, "location", fileName);
  appendEntry(kept, "offset", std::to_string(raw->data() - fileStart));
  appendEntry(kept, "length", std::to_string(raw->size()));
  appendEntry(kept, kRawDataInModelFileKey, "1");
  appendVarint(kept, (uint64_t(kTensorDataLocation) << 3) | Varint);
  appendVarint(kept, kExternalLocation);
  return kept;
}

/// `message` with the payload of each field `number` replaced by what
/// `rewrite` makes of it, every other field copied; nullopt when the framing
/// is malformed, the field is not length-delimited, it repeats where
/// protobuf would merge it (`once`), or `rewrite` declines.
std::optional<std::string> withFieldRewritten(llvm::StringRef message, uint32_t number, bool once,
                                              llvm::function_ref<std::optional<std::string>(llvm::StringRef)> rewrite) {
  FieldReader reader(message);
  std::string out;
  bool seen = false;
  while (std::optional<Field> field = reader.next()) {
    if (field->number != number) {
      out.append(field->bytes.data(), field->bytes.size());
      continue;
    }
    if (field->wireType != LengthDelimited || (once && seen))
      return std::nullopt;
    seen = true;
    std::optional<std::string> payload = rewrite(field->payload);
    if (!payload)
      return std::nullopt;
    appendLengthDelimited(out, number, *payload);
  }
  if (reader.failed)
    return std::nullopt;
  return out;
}

} // namespace

std::optional<std::string> withRawDataInPlace(llvm::StringRef model, llvm::StringRef fileName, size_t minBytes) {
  // Two graph fields merge into one message; leave that to protobuf.
  return withFieldRewritten(model, kModelGraph, /*once=*/true, [&](llvm::StringRef graph) {
    return withFieldRewritten(graph, kGraphInitializer, /*once=*/false, [&](llvm::StringRef tensor) {
      return tensorInPlace(tensor, model.data(), fileName, minBytes);
    });
  });
}

} // namespace colossal::import
