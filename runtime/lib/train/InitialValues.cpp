//===- InitialValues.cpp ----------------------------------------------------===//

#include "colossal/runtime/train/InitialValues.h"

#include "colossal/runtime/kernels/Philox.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

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
  // Element `w` of the whole (padded) tensor, written at `to`.
  auto draw = [&](int64_t w, int64_t to) {
    int64_t index = w;
    if (slice.padding > 0) {
      // The element's row along the padded dimension, and its place in the
      // model's shape; padding rows are zeros.
      int64_t extent = slice.whole[size_t(slice.dim)], row = (w / inner) % extent;
      if (row >= model[size_t(slice.dim)]) {
        out[to] = 0.0f;
        return;
      }
      index = ((w / (extent * inner)) * model[size_t(slice.dim)] + row) * inner + w % inner;
    }
    out[to] = initialValue(p.init, seed, key, uint64_t(index));
  };
  struct Run {
    int64_t at, to, n;
  };
  std::vector<Run> runs;
  int64_t total = 0;
  forEachSliceRun(slice, p.shape, [&](int64_t at, int64_t to, int64_t n) {
    runs.push_back({at, to, n});
    total += n;
  });
  // Each element is drawn alone: any number of threads gives the same bits.
  // A large tensor is cut into equal element ranges across the runs.
  int64_t threads = total < (int64_t(1) << 20) ? 1 : std::max<int64_t>(1, std::thread::hardware_concurrency());
  auto drawRange = [&](int64_t begin, int64_t end) {
    int64_t start = 0;
    for (const Run &r : runs) {
      int64_t from = std::max(begin, start), to = std::min(end, start + r.n);
      for (int64_t e = from; e < to; ++e)
        draw(r.at + (e - start), r.to + (e - start));
      start += r.n;
    }
  };
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t)
    workers.emplace_back(drawRange, total * t / threads, total * (t + 1) / threads);
  drawRange(0, total / threads);
  for (std::thread &w : workers)
    w.join();
}

} // namespace colossal::rt
