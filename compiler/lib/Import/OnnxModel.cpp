//===- OnnxModel.cpp - reading and checking ONNX protobufs -------*- C++ -*-===//

#include "OnnxModel.h"
#include "RawDataInPlace.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace colossal::import {

bool parseModel(const void *data, size_t size, onnx::ModelProto &model, std::string &error) {
  // Protobuf refuses messages over 2 GiB; larger models keep weights as
  // external data, which is never parsed here.
  if (size > size_t(std::numeric_limits<int>::max())) {
    error = "the protobuf is larger than 2 GiB; save weights as ONNX external data";
    return false;
  }
  if (size == 0) {
    error = "the file is empty";
    return false;
  }
  if (!model.ParseFromArray(data, int(size))) {
    error = "not a valid ONNX model (the protobuf does not parse: truncated, corrupt, or not ONNX)";
    return false;
  }
  if (!model.has_graph()) {
    error = "the model has no graph (is this an ONNX file?)";
    return false;
  }
  return true;
}

bool readModelFile(const std::string &path, onnx::ModelProto &model, std::string &error) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> mapped =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!mapped) {
    error = "cannot open the file (" + mapped.getError().message() + ")";
    return false;
  }
  llvm::StringRef bytes = (*mapped)->getBuffer();
  // The rewrite's location is the file's own name, which the external-data
  // rules must accept.
  std::string fileName = std::filesystem::path(path).filename().string();
  std::optional<std::string> graph;
  if (bytes.size() <= size_t(std::numeric_limits<int>::max()) && fileName.find("..") == std::string::npos)
    graph = withRawDataInPlace(bytes, fileName, kRawDataLeftInPlaceBytes);
  if (graph && parseModel(graph->data(), graph->size(), model, error))
    return true;
  model.Clear();
  return parseModel(bytes.data(), bytes.size(), model, error);
}

/// The bytes at `location`, a file in `baseDir` (its extent already checked).
static std::optional<std::string> readLocated(const TensorDataLocation &location, const std::string &baseDir) {
  std::string bytes(size_t(location.length), '\0');
  std::ifstream in(std::filesystem::path(baseDir) / location.file, std::ios::binary);
  in.seekg(location.offset);
  if (!in.read(bytes.data(), location.length))
    return std::nullopt;
  return bytes;
}

bool inlineRawDataLeftInPlace(onnx::TensorProto &tensor, const std::string &baseDir, std::string &error) {
  // Only the rewrite's own entries: a constant in a real external file is
  // the caller's to refuse, whether or not that file exists.
  if (llvm::none_of(tensor.external_data(), [](const auto &entry) { return entry.key() == kRawDataInModelFileKey; }))
    return true;
  TensorDataLocation location;
  if (!checkTensorData(tensor, baseDir, location, error))
    return false;
  std::optional<std::string> bytes = readLocated(location, baseDir);
  if (!bytes) {
    error = "could not read its data";
    return false;
  }
  tensor.clear_external_data();
  tensor.clear_data_location();
  tensor.set_raw_data(std::move(*bytes));
  return true;
}

int64_t elementByteWidth(int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32: case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::DOUBLE: case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64:
    return 8;
  case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16: case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

bool isSupportedElementType(int32_t onnxType) { return elementByteWidth(onnxType) != 0; }

std::optional<std::vector<int64_t>> tensorShape(const onnx::TensorProto &tensor,
                                                std::string &error) {
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0) {
      error = "has a negative dimension " + std::to_string(d);
      return std::nullopt;
    }
    if (d > kMaxTensorElements ||
        (d != 0 && count > std::numeric_limits<int64_t>::max() / 8 / d)) {
      error = "has more elements than fit in memory";
      return std::nullopt;
    }
    count *= d;
    shape.push_back(d);
  }
  return shape;
}

/// The number of values a tensor holds in the typed (non-raw) field that its
/// element type uses.
static int64_t typedFieldCount(const onnx::TensorProto &t) {
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: return t.float_data_size();
  case onnx::TensorProto::DOUBLE: return t.double_data_size();
  case onnx::TensorProto::INT64: return t.int64_data_size();
  case onnx::TensorProto::UINT32: case onnx::TensorProto::UINT64: return t.uint64_data_size();
  default: return t.int32_data_size();
  }
}

bool checkTensorData(const onnx::TensorProto &tensor, const std::string &baseDir,
                     TensorDataLocation &location, std::string &error) {
  int64_t width = elementByteWidth(tensor.data_type());
  if (!width) {
    error = "has unsupported element type " + std::to_string(tensor.data_type());
    return false;
  }
  auto shape = tensorShape(tensor, error);
  if (!shape)
    return false;
  int64_t expected = numElementsOf(*shape) * width;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    location.external = true;
    location.length = -1;
    for (const auto &entry : tensor.external_data()) {
      try {
        if (entry.key() == "location")
          location.file = entry.value();
        else if (entry.key() == "offset")
          location.offset = std::stoll(entry.value());
        else if (entry.key() == "length")
          location.length = std::stoll(entry.value());
        else if (entry.key() == kRawDataInModelFileKey)
          location.inModelFile = true;
      } catch (const std::exception &) {
        error = "has a malformed external-data " + entry.key() + " \"" + entry.value() + "\"";
        return false;
      }
    }
    if (location.file.empty() || location.file.find("..") != std::string::npos ||
        std::filesystem::path(location.file).is_absolute()) {
      error = "has an external-data location \"" + location.file +
              "\" that is not a file name inside the model's folder";
      return false;
    }
    if (location.length < 0)
      location.length = expected;
    if (location.inModelFile && location.length != expected) {
      error = "holds " + std::to_string(location.length) + " bytes of data, but its shape needs " +
              std::to_string(expected);
      return false;
    }
    if (location.length != expected || location.offset < 0) {
      error = "declares " + std::to_string(location.length) + " external bytes at offset " +
              std::to_string(location.offset) + ", but its shape needs " + std::to_string(expected);
      return false;
    }
    std::filesystem::path path = std::filesystem::path(baseDir) / location.file;
    std::error_code ec;
    auto fileSize = std::filesystem::file_size(path, ec);
    if (ec) {
      error = "refers to external-data file '" + path.string() + "', which cannot be read (" +
              ec.message() + ")";
      return false;
    }
    if (int64_t(fileSize) < location.offset + location.length) {
      error = "needs bytes " + std::to_string(location.offset) + " to " +
              std::to_string(location.offset + location.length) + " of '" + path.string() +
              "', which holds only " + std::to_string(fileSize);
      return false;
    }
    return true;
  }
  if (tensor.has_raw_data()) {
    if (int64_t(tensor.raw_data().size()) != expected) {
      error = "holds " + std::to_string(tensor.raw_data().size()) +
              " bytes of data, but its shape needs " + std::to_string(expected);
      return false;
    }
    return true;
  }
  int64_t count = typedFieldCount(tensor), elements = numElementsOf(*shape);
  if (count != elements) {
    error = "holds " + std::to_string(count) + " values, but its shape needs " +
            std::to_string(elements);
    return false;
  }
  return true;
}

static uint16_t load16(const char *p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

static double halfToDouble(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double value;
  if (exponent == 0)
    value = std::ldexp(double(mantissa), -24);
  else if (exponent == 31)
    value = mantissa ? std::numeric_limits<double>::quiet_NaN()
                     : std::numeric_limits<double>::infinity();
  else
    value = std::ldexp(double(mantissa | 0x400), exponent - 25);
  return sign ? -value : value;
}

static double bfloat16ToDouble(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::optional<HostTensor> readTensor(const onnx::TensorProto &tensor, const std::string &baseDir,
                                     std::string &error, int64_t maxElements) {
  TensorDataLocation location;
  if (!checkTensorData(tensor, baseDir, location, error))
    return std::nullopt;
  auto shape = tensorShape(tensor, error);
  int64_t n = numElementsOf(*shape);
  if (n > maxElements) {
    error = "has " + std::to_string(n) + " elements, more than the " + std::to_string(maxElements) + " read here";
    return std::nullopt;
  }
  int32_t type = tensor.data_type();
  int64_t width = elementByteWidth(type);
  std::string bytes;
  const std::string *raw = nullptr;
  if (location.external) {
    std::optional<std::string> located = readLocated(location, baseDir);
    if (!located) {
      error = "could not read its external data";
      return std::nullopt;
    }
    bytes = std::move(*located);
    raw = &bytes;
  } else if (tensor.has_raw_data()) {
    raw = &tensor.raw_data();
  }

  HostTensor out;
  out.shape = *shape;
  out.kind = ElementKind(type);
  bool floating = isFloatKind(out.kind);
  if (floating)
    out.floats.resize(n);
  else
    out.ints.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    if (raw) {
      const char *p = raw->data() + i * width;
      switch (type) {
      case onnx::TensorProto::FLOAT: { float v; std::memcpy(&v, p, 4); out.floats[i] = v; break; }
      case onnx::TensorProto::DOUBLE: { double v; std::memcpy(&v, p, 8); out.floats[i] = v; break; }
      case onnx::TensorProto::FLOAT16: out.floats[i] = halfToDouble(load16(p)); break;
      case onnx::TensorProto::BFLOAT16: out.floats[i] = bfloat16ToDouble(load16(p)); break;
      case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64: {
        int64_t v; std::memcpy(&v, p, 8); out.ints[i] = v; break; }
      case onnx::TensorProto::INT32: { int32_t v; std::memcpy(&v, p, 4); out.ints[i] = v; break; }
      case onnx::TensorProto::UINT32: { uint32_t v; std::memcpy(&v, p, 4); out.ints[i] = v; break; }
      case onnx::TensorProto::INT16: { int16_t v; std::memcpy(&v, p, 2); out.ints[i] = v; break; }
      case onnx::TensorProto::UINT16: out.ints[i] = load16(p); break;
      case onnx::TensorProto::INT8: out.ints[i] = int8_t(*p); break;
      case onnx::TensorProto::UINT8: out.ints[i] = uint8_t(*p); break;
      case onnx::TensorProto::BOOL: out.ints[i] = *p != 0; break;
      }
      continue;
    }
    switch (type) {
    case onnx::TensorProto::FLOAT: out.floats[i] = tensor.float_data(i); break;
    case onnx::TensorProto::DOUBLE: out.floats[i] = tensor.double_data(i); break;
    case onnx::TensorProto::FLOAT16: out.floats[i] = halfToDouble(uint16_t(tensor.int32_data(i))); break;
    case onnx::TensorProto::BFLOAT16: out.floats[i] = bfloat16ToDouble(uint16_t(tensor.int32_data(i))); break;
    case onnx::TensorProto::INT64: out.ints[i] = tensor.int64_data(i); break;
    case onnx::TensorProto::UINT32: case onnx::TensorProto::UINT64:
      out.ints[i] = int64_t(tensor.uint64_data(i)); break;
    case onnx::TensorProto::BOOL: out.ints[i] = tensor.int32_data(i) != 0; break;
    default: out.ints[i] = tensor.int32_data(i); break;
    }
  }
  return out;
}

} // namespace colossal::import
