//===- DType.cpp ----------------------------------------------------------===//

#include "colossal/runtime/DType.h"

namespace colossal::rt {

namespace {
struct DTypeInfo {
  DType dtype;
  int64_t bytes;
  const char *name;
  const char *safetensors;
  bool floating;
};
constexpr DTypeInfo kTypes[] = {
    {DType::F32, 4, "f32", "F32", true},  {DType::F64, 8, "f64", "F64", true},
    {DType::BF16, 2, "bf16", "BF16", true}, {DType::F16, 2, "f16", "F16", true},
    {DType::I64, 8, "i64", "I64", false}, {DType::I32, 4, "i32", "I32", false},
    {DType::U16, 2, "u16", "U16", false}, {DType::U8, 1, "u8", "U8", false},
};
const DTypeInfo &info(DType dtype) {
  for (const DTypeInfo &i : kTypes)
    if (i.dtype == dtype)
      return i;
  return kTypes[0];
}
} // namespace

int64_t bytesOf(DType dtype) { return info(dtype).bytes; }
const char *nameOf(DType dtype) { return info(dtype).name; }
const char *safetensorsName(DType dtype) { return info(dtype).safetensors; }
bool isFloating(DType dtype) { return info(dtype).floating; }

std::optional<DType> parseDType(const std::string &name) {
  for (const DTypeInfo &i : kTypes)
    if (name == i.name)
      return i.dtype;
  return std::nullopt;
}

std::optional<DType> parseSafetensorsName(const std::string &name) {
  for (const DTypeInfo &i : kTypes)
    if (name == i.safetensors)
      return i.dtype;
  return std::nullopt;
}

uint16_t floatToF16(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) // NaN
    return uint16_t(sign | 0x7e00u);
  if (abs >= 0x477ff000u) // rounds to a value above 65504: infinity
    return uint16_t(sign | 0x7c00u);
  if (abs < 0x38800000u) { // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u)
      return sign;
    uint32_t mantissa = (abs & 0x007fffffu) | 0x00800000u;
    int shift = 113 - int(abs >> 23) + 13; // to a 10-bit subnormal mantissa
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u)))
      ++half;
    return uint16_t(sign | half);
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits.
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0)
      return bitsFloat(sign);
    // Subnormal: value = mantissa * 2^-24.
    float value = float(mantissa) * 5.9604644775390625e-8f;
    return sign ? -value : value;
  }
  if (exponent == 31)
    return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

} // namespace colossal::rt
