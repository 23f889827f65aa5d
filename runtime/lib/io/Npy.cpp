//===- Npy.cpp ------------------------------------------------------------===//

#include "colossal/runtime/io/Npy.h"

#include "colossal/runtime/io/AtomicFile.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/Safetensors.h"

#include <cstring>

namespace colossal::rt {

namespace {

struct Descr {
  const char *text;
  DType dtype;
  bool widenU32;
};
constexpr Descr kDescrs[] = {{"<f4", DType::F32, false}, {"<f8", DType::F64, false}, {"<f2", DType::F16, false},
                             {"<i8", DType::I64, false}, {"<i4", DType::I32, false}, {"<u2", DType::U16, false},
                             {"|u1", DType::U8, false},  {"<u1", DType::U8, false},  {"<u4", DType::I64, true}};

/// The value of 'key' in the header dict, as raw text up to the next
/// top-level comma or closing brace.
std::string field(const std::string &header, const std::string &key, const std::string &name) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    fail("read " + name, "the .npy header has no '" + key + "'");
  size_t colon = header.find(':', at);
  size_t start = header.find_first_not_of(' ', colon + 1);
  size_t end = start;
  int depth = 0;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  return header.substr(start, end - start);
}

} // namespace

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t NpyLayout::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

NpyLayout parseNpyLayout(const unsigned char *bytes, size_t size, const std::string &name) {
  std::string what = "read " + name;
  if (size < 10 || std::memcmp(bytes, "\x93NUMPY", 6) != 0)
    fail(what, "not a .npy file (no \\x93NUMPY magic)");
  int major = bytes[6];
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      fail(what, "truncated .npy header");
    headerLength = size_t(bytes[8]) | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
    headerStart = 12;
  } else {
    fail(what, ".npy version " + std::to_string(major) + " is not supported");
  }
  if (headerStart + headerLength > size)
    fail(what, "truncated .npy header");
  std::string header(bytes + headerStart, bytes + headerStart + headerLength);

  std::string descr = field(header, "descr", name);
  std::string order = field(header, "fortran_order", name);
  std::string shapeText = field(header, "shape", name);
  if (order != "False")
    fail(what, "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
  const Descr *type = nullptr;
  for (const Descr &d : kDescrs)
    if (descr == "'" + std::string(d.text) + "'")
      type = &d;
  if (!type)
    fail(what, "element type " + descr + " is not supported (f4, f8, f2, i8, i4, u4, u2, u1)");

  NpyLayout layout;
  layout.dtype = type->dtype;
  layout.unsigned32 = type->widenU32;
  if (shapeText.size() < 2 || shapeText.front() != '(' || shapeText.back() != ')')
    fail(what, "shape " + shapeText + " is not a tuple");
  std::string inner = shapeText.substr(1, shapeText.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    std::string item = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t first = item.find_first_not_of(' ');
    if (first != std::string::npos) {
      item = item.substr(first, item.find_last_not_of(' ') - first + 1);
      char *end = nullptr;
      long long d = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || d < 0 || d > (int64_t(1) << 48))
        fail(what, "shape " + shapeText + " has a bad dimension \"" + item + "\"");
      layout.shape.push_back(d);
    }
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  layout.elementBytes = type->widenU32 ? 4 : bytesOf(type->dtype);
  layout.dataOffset = headerStart + headerLength;
  double expected = double(layout.elements()) * double(layout.elementBytes);
  if (double(size - layout.dataOffset) != expected)
    fail(what, "shape " + shapeString(layout.shape) + " of " + descr + " needs " + std::to_string(int64_t(expected)) +
                   " data bytes but the file has " + std::to_string(size - layout.dataOffset));
  return layout;
}

NpyArray parseNpy(const std::vector<unsigned char> &bytes, const std::string &name) {
  NpyLayout layout = parseNpyLayout(bytes.data(), bytes.size(), name);
  NpyArray array;
  array.dtype = layout.dtype;
  array.shape = layout.shape;
  size_t dataStart = layout.dataOffset;
  if (layout.unsigned32) {
    array.data.resize(size_t(array.elements() * 8));
    for (int64_t i = 0; i < array.elements(); ++i) {
      uint32_t v;
      std::memcpy(&v, bytes.data() + dataStart + size_t(i) * 4, 4);
      int64_t w = v;
      std::memcpy(array.data.data() + size_t(i) * 8, &w, 8);
    }
  } else {
    array.data.assign(bytes.begin() + long(dataStart), bytes.end());
  }
  return array;
}

NpyArray readNpy(const std::string &path) { return parseNpy(readWholeFile(path), path); }

void writeNpy(const std::string &path, DType dtype, const std::vector<int64_t> &shape, const void *data) {
  const char *descr = nullptr;
  for (const Descr &d : kDescrs)
    if (d.dtype == dtype && !d.widenU32) {
      descr = d.text;
      break;
    }
  if (!descr)
    fail("write " + path, std::string("cannot store ") + nameOf(dtype) + " in .npy");
  std::string shapeText = "(";
  for (int64_t d : shape)
    shapeText += std::to_string(d) + (shape.size() == 1 ? "," : ", ");
  if (shape.size() > 1)
    shapeText.resize(shapeText.size() - 2);
  shapeText += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shapeText + ", }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(header.size()), uint8_t(header.size() >> 8)};
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  writeFileAtomically(path, {{prefix, 10}, {header.data(), int64_t(header.size())}, {data, elements * bytesOf(dtype)}});
}

} // namespace colossal::rt
