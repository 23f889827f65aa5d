//===- Crc32.cpp ----------------------------------------------------------===//
//
// CRC-32 (IEEE, reflected), eight bytes a step with eight tables (Intel's
// slicing-by-8): a byte at a time checked 500 MB of GPT-2 124M weights at
// about 0.5 GB/s, a third of writing them.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/io/Crc32.h"

#include <array>
#include <cstring>

namespace colossal::rt {

namespace {
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables makeTables() {
  Tables tables{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    tables[0][i] = c;
  }
  // tables[k][b]: the CRC of byte b followed by k zero bytes.
  for (uint32_t i = 0; i < 256; ++i)
    for (size_t k = 1; k < 8; ++k)
      tables[k][i] = (tables[k - 1][i] >> 8) ^ tables[0][tables[k - 1][i] & 0xffu];
  return tables;
}
} // namespace

uint32_t crc32(const void *data, int64_t bytes, uint32_t crc) {
  static const Tables t = makeTables();
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    // Little-endian words: the first four bytes fold into the running CRC.
    uint32_t low, high;
    std::memcpy(&low, p, 4);
    std::memcpy(&high, p + 4, 4);
    if constexpr (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__) {
      low = __builtin_bswap32(low);
      high = __builtin_bswap32(high);
    }
    low ^= crc;
    crc = t[7][low & 0xff] ^ t[6][(low >> 8) & 0xff] ^ t[5][(low >> 16) & 0xff] ^ t[4][low >> 24] ^ t[3][high & 0xff] ^
          t[2][(high >> 8) & 0xff] ^ t[1][(high >> 16) & 0xff] ^ t[0][high >> 24];
  }
  for (; bytes > 0; --bytes, ++p)
    crc = t[0][(crc ^ *p) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

} // namespace colossal::rt
