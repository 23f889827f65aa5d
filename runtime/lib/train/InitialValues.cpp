//===- InitialValues.cpp ----------------------------------------------------===//

#include "colossal/runtime/train/InitialValues.h"

#include "colossal/runtime/kernels/Philox.h"

#include <cmath>

namespace colossal::rt {

uint64_t parameterKey(const std::string &name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name)
    hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

float initialValue(const ParameterInit &init, uint64_t seed, uint64_t key, uint64_t index) {
  switch (init.kind) {
  case ParameterInit::Ones:
    return 1.0f;
  case ParameterInit::Normal: {
    // The run's seed moved off the dropout keys' (Philox.h), so weights and
    // masks are not drawn from the same stream.
    uint64_t k = seed * 0x9E3779B97F4A7C15ull + 0x1217ull;
    PhiloxBlock b = philox4x32(uint32_t(index), uint32_t(index >> 32), uint32_t(key), uint32_t(key >> 32), uint32_t(k),
                               uint32_t(k >> 32));
    double u1 = (double(b.x[0]) + 1.0) / 4294967296.0; // (0, 1]: the logarithm stays finite
    double u2 = double(b.x[1]) / 4294967296.0;
    return float(init.std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  default:
    return 0.0f;
  }
}

void drawSlice(const ProgramParameter &p, const SliceOf &slice, uint64_t seed, float *out) {
  uint64_t key = parameterKey(p.name);
  host::Shape model = modelShape(slice);
  int64_t inner = 1;
  if (slice.padding > 0)
    for (size_t d = size_t(slice.dim) + 1; d < slice.whole.size(); ++d)
      inner *= slice.whole[d];
  forEachSliceRun(slice, p.shape, [&](int64_t at, int64_t to, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t w = at + i, index = w;
      if (slice.padding > 0) {
        // The element's row along the padded dimension, and its place in
        // the model's shape; padding rows are zeros.
        int64_t extent = slice.whole[size_t(slice.dim)], row = (w / inner) % extent;
        if (row >= model[size_t(slice.dim)]) {
          out[to + i] = 0.0f;
          continue;
        }
        index = ((w / (extent * inner)) * model[size_t(slice.dim)] + row) * inner + w % inner;
      }
      out[to + i] = initialValue(p.init, seed, key, uint64_t(index));
    }
  });
}

} // namespace colossal::rt
