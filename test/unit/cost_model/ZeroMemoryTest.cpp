//===- ZeroMemoryTest.cpp - ZeRO model states against the paper ----------===//

#include "colossal/cost/Memory.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

// Rajbhandari et al. (SC'20), figure 1: 7.5B parameters, Nd = 64, K = 12.
TEST(ZeroMemory, ReproducesThePapersExample) {
  const double psi = 7.5e9, GB = 1e9;
  EXPECT_NEAR(zeroModelStates(psi, 64, 0).total() / GB, 120.0, 0.05);
  EXPECT_NEAR(zeroModelStates(psi, 64, 1).total() / GB, 31.4, 0.05);
  EXPECT_NEAR(zeroModelStates(psi, 64, 2).total() / GB, 16.6, 0.05);
  EXPECT_NEAR(zeroModelStates(psi, 64, 3).total() / GB, 1.9, 0.05);
}

TEST(ZeroMemory, EachStageShardsOneMoreCategory) {
  ModelStateBytes s1 = zeroModelStates(1000, 10, 1), s2 = zeroModelStates(1000, 10, 2),
                  s3 = zeroModelStates(1000, 10, 3);
  EXPECT_DOUBLE_EQ(s1.optimizer, 1200);
  EXPECT_DOUBLE_EQ(s1.gradients, 2000);
  EXPECT_DOUBLE_EQ(s2.gradients, 200);
  EXPECT_DOUBLE_EQ(s2.parameters, 2000);
  EXPECT_DOUBLE_EQ(s3.parameters, 200);
}
