//===- TensorChecks.h - random tensors and tolerant comparisons -*- C++ -*-===//

#ifndef COLOSSAL_TEST_UNIT_RUNTIME_TENSORCHECKS_H
#define COLOSSAL_TEST_UNIT_RUNTIME_TENSORCHECKS_H

#include "colossal/runtime/kernels/HostTensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace colossal::rt::testing {

inline host::Tensor randomFloats(host::Shape shape, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  host::Tensor t = host::Tensor::zeros(std::move(shape));
  for (float &v : t.floats)
    v = normal(rng);
  return t;
}

inline void expectNear(const Floats &got, const Floats &want, double relative, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], relative * std::max(1.0, std::fabs(double(want[i])))) << what << " at " << i;
}

} // namespace colossal::rt::testing

#endif // COLOSSAL_TEST_UNIT_RUNTIME_TENSORCHECKS_H
