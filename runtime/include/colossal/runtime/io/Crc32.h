//===- Crc32.h - CRC-32 (IEEE 802.3, as zlib computes it) -----------*- C++ -*-===//

#ifndef COLOSSAL_RUNTIME_CRC32_H
#define COLOSSAL_RUNTIME_CRC32_H

#include <cstdint>

namespace colossal::rt {

/// Continues `crc` (0 to start) over `bytes` bytes.
uint32_t crc32(const void *data, int64_t bytes, uint32_t crc = 0);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_CRC32_H
