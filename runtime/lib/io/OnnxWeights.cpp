//===- OnnxWeights.cpp ----------------------------------------------------===//

#include "colossal/runtime/io/OnnxWeights.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/AtomicFile.h"

namespace colossal::rt {

namespace {

// Field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer,
// TensorProto's dims, data_type, name and raw_data; its FLOAT and INT64.
constexpr uint64_t kModelGraph = 7, kGraphInitializer = 5;
constexpr uint64_t kTensorDims = 1, kTensorDataType = 2, kTensorName = 8, kTensorRawData = 9;
constexpr uint64_t kFloat = 1, kInt64 = 7;
constexpr uint64_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void putVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(char((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(char(value));
}

void putKey(std::string &out, uint64_t field, uint64_t wireType) { putVarint(out, field << 3 | wireType); }

void putBytes(std::string &out, uint64_t field, const void *data, size_t size) {
  putKey(out, field, kLengthDelimited);
  putVarint(out, size);
  out.append(static_cast<const char *>(data), size);
}

/// Reads a varint at `at`; false past the end or when longer than 10 bytes.
bool readVarint(const std::vector<unsigned char> &in, size_t &at, uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64 && at < in.size(); shift += 7) {
    unsigned char byte = in[at++];
    value |= uint64_t(byte & 0x7f) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

std::string tensorProto(const TensorView &t) {
  std::string out;
  for (int64_t d : t.shape) {
    putKey(out, kTensorDims, kVarint);
    putVarint(out, uint64_t(d));
  }
  putKey(out, kTensorDataType, kVarint);
  putVarint(out, t.dtype == DType::I64 ? kInt64 : kFloat);
  putBytes(out, kTensorName, t.name.data(), t.name.size());
  // Raw data is little-endian, as the host's own layout on every target.
  putBytes(out, kTensorRawData, t.data, size_t(t.bytes));
  return out;
}

} // namespace

void writeOnnxWithWeights(const std::string &graphPath, const std::vector<TensorView> &weights,
                          const std::string &outPath) {
  std::string what = "export " + outPath;
  std::vector<unsigned char> model = readWholeFile(graphPath);
  std::string initializers;
  for (const TensorView &t : weights) {
    if (t.dtype != DType::F32 && t.dtype != DType::I64)
      fail(what, "weight '" + t.name + "' is " + nameOf(t.dtype) + "; ONNX initializers are written as f32 or i64");
    std::string proto = tensorProto(t);
    putBytes(initializers, kGraphInitializer, proto.data(), proto.size());
  }
  // The model's top-level fields, copied; the graph's with the weights
  // appended (protobuf merges repeated fields in any order).
  std::string out;
  size_t at = 0;
  int graphs = 0;
  while (at < model.size()) {
    size_t begin = at;
    uint64_t key = 0, length = 0;
    if (!readVarint(model, at, key))
      fail(what, graphPath + " is not an ONNX model (a field key runs past the end)");
    uint64_t field = key >> 3, wireType = key & 7;
    size_t end = at;
    if (wireType == kVarint) {
      if (!readVarint(model, end, length))
        fail(what, graphPath + " is not an ONNX model (a varint runs past the end)");
    } else if (wireType == kFixed64 || wireType == kFixed32) {
      end += wireType == kFixed64 ? 8 : 4;
    } else if (wireType == kLengthDelimited) {
      if (!readVarint(model, end, length) || length > model.size() - end)
        fail(what, graphPath + " is not an ONNX model (a field runs past the end)");
      if (field == kModelGraph) {
        ++graphs;
        putKey(out, kModelGraph, kLengthDelimited);
        putVarint(out, length + initializers.size());
        out.append(reinterpret_cast<const char *>(model.data() + end), size_t(length));
        out += initializers;
        at = end + size_t(length);
        continue;
      }
      end += size_t(length);
    } else {
      fail(what, graphPath + " is not an ONNX model (wire type " + std::to_string(wireType) + ")");
    }
    if (end > model.size())
      fail(what, graphPath + " is not an ONNX model (a field runs past the end)");
    out.append(reinterpret_cast<const char *>(model.data() + begin), end - begin);
    at = end;
  }
  if (graphs != 1)
    fail(what, graphPath + " holds " + std::to_string(graphs) + " graphs, not one");
  writeFileAtomically(outPath, {{out.data(), int64_t(out.size())}});
}

} // namespace colossal::rt
