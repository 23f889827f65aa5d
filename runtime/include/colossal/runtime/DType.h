//===- DType.h - element types and 16-bit float conversions ------*- C++ -*-===//
//
// The element types buffers, collectives, checkpoints and feeds carry. The
// 16-bit conversions round to nearest even, as the hardware does, so a value
// converted on the host equals the same value converted on the device.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_DTYPE_H
#define COLOSSAL_RUNTIME_DTYPE_H

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace colossal::rt {

enum class DType { F32, F64, BF16, F16, I64, I32, U16, U8 };

int64_t bytesOf(DType dtype);
/// "f32", "bf16", ... (the names the runtime prints).
const char *nameOf(DType dtype);
std::optional<DType> parseDType(const std::string &name);
/// The safetensors spelling: "F32", "BF16", ...
const char *safetensorsName(DType dtype);
std::optional<DType> parseSafetensorsName(const std::string &name);
bool isFloating(DType dtype);

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float -> bfloat16, round to nearest even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float bf16ToFloat(uint16_t h) { return bitsFloat(uint32_t(h) << 16); }

/// float -> IEEE half, round to nearest even, overflow to infinity.
uint16_t floatToF16(float f);
float f16ToFloat(uint16_t h);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_DTYPE_H
