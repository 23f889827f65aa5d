//===- Crc32.cpp ----------------------------------------------------------===//

#include "colossal/runtime/io/Crc32.h"

#include <array>

namespace colossal::rt {

namespace {
std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
} // namespace

uint32_t crc32(const void *data, int64_t bytes, uint32_t crc) {
  static const std::array<uint32_t, 256> table = makeTable();
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (int64_t i = 0; i < bytes; ++i)
    crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

} // namespace colossal::rt
