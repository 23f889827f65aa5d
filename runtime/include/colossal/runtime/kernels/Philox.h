//===- Philox.h - counter-based random numbers, same on host and device -*- C++ -*-===//
//
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a keyed bijection of a 128-bit counter, so the random number of
// element i at step t under seed s is a pure function of (s, t, i). Dropout
// masks therefore do not depend on how the tensor is split across ranks or on
// which device computes them; this header compiles for both.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_PHILOX_H
#define COLOSSAL_RUNTIME_PHILOX_H

#include <cstdint>

#ifdef __CUDACC__
#define COLOSSAL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define COLOSSAL_HOST_DEVICE inline
#endif

namespace colossal::rt {

struct PhiloxBlock {
  uint32_t x[4];
};

COLOSSAL_HOST_DEVICE PhiloxBlock philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                            uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c0;
    uint64_t p1 = uint64_t(kMul1) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

/// A uniform number in [0, 1) for element `index` at `step` under `seed`
/// (24 random bits, exact in float).
COLOSSAL_HOST_DEVICE float philoxUniform(uint64_t seed, uint64_t step, uint64_t index) {
  uint64_t group = index >> 2;
  PhiloxBlock block = philox4x32(uint32_t(group), uint32_t(group >> 32), uint32_t(step),
                                 uint32_t(step >> 32), uint32_t(seed), uint32_t(seed >> 32));
  return float(block.x[index & 3] >> 8) * (1.0f / 16777216.0f);
}

/// Dropout keeps element `index` with probability 1 - p.
COLOSSAL_HOST_DEVICE bool dropoutKeeps(uint64_t seed, uint64_t step, uint64_t index, float p) {
  return philoxUniform(seed, step, index) >= p;
}

/// Where one dropout mask comes from: element i of the tensor is kept when
/// dropoutKeeps(seed, step, firstIndex + i, p). `seed` names the run and the
/// dropout site; `firstIndex` places the tensor in the step's global batch,
/// so a rank's or a microbatch's part of a mask is that part of the whole
/// batch's mask.
struct DropoutKey {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint64_t firstIndex = 0;
};

/// The key of dropout site `site` (a number the compiler gives each dropout
/// op) for a tensor of `elements` elements that is block `block` of the
/// step's global batch (blocks of equal size, batch-major).
inline DropoutKey dropoutKeyFor(uint64_t runSeed, uint64_t step, int64_t block, int64_t site, int64_t elements) {
  // Distinct sites of one run and one site of distinct runs get unrelated
  // Philox keys (the constant is 2^64 / golden ratio, an odd multiplier).
  DropoutKey key;
  key.seed = runSeed * 0x9E3779B97F4A7C15ull + uint64_t(site);
  key.step = step;
  key.firstIndex = uint64_t(block) * uint64_t(elements);
  return key;
}

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_PHILOX_H
