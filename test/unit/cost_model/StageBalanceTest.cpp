//===- StageBalanceTest.cpp - the stage split against enumeration ---------===//

#include "colossal/cost/StageBalance.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace colossal::cost;

namespace {

/// The best slowest-stage time over every split (each stage >= 1 layer).
double enumerate(int64_t layers, const std::vector<double> &extra, double t) {
  double best = 1e300;
  std::vector<int64_t> split(extra.size());
  std::function<void(size_t, int64_t)> walk = [&](size_t s, int64_t left) {
    if (s + 1 == extra.size()) {
      split[s] = left;
      best = std::min(best, slowestStage(split, extra, t));
      return;
    }
    for (int64_t n = 1; n <= left - int64_t(extra.size() - s - 1); ++n) {
      split[s] = n;
      walk(s + 1, left - n);
    }
  };
  walk(0, layers);
  return best;
}

} // namespace

TEST(StageBalance, MatchesEnumerationOfEverySplit) {
  std::mt19937 engine(7);
  std::uniform_real_distribution<double> extraDist(0.0, 5.0), layerDist(0.1, 2.0);
  for (int trial = 0; trial < 300; ++trial) {
    int stages = 1 + trial % 4;
    int64_t layers = stages + int64_t(engine() % 12);
    std::vector<double> extra(static_cast<size_t>(stages));
    for (double &e : extra)
      e = trial % 3 == 0 ? 0.0 : extraDist(engine);
    double t = layerDist(engine);
    std::vector<int64_t> split = balanceStages(layers, extra, t);
    ASSERT_EQ(split.size(), size_t(stages));
    int64_t total = 0;
    for (int64_t n : split) {
      EXPECT_GE(n, 1);
      total += n;
    }
    EXPECT_EQ(total, layers);
    EXPECT_NEAR(slowestStage(split, extra, t), enumerate(layers, extra, t), 1e-9) << "trial " << trial;
  }
}

TEST(StageBalance, HeavyHeadTakesLayersOffTheLastStage) {
  // 32 layers of 1 s on 4 stages; the head costs 4 layers' time.
  std::vector<int64_t> split = balanceStages(32, {0.5, 0, 0, 4}, 1.0);
  EXPECT_EQ(split.back(), 5);
  // T = 9.5: the stages hold 9, 9, 9 and 5 layers (9 + 0.5, 9, 9, 5 + 4).
  EXPECT_NEAR(slowestStage(split, {0.5, 0, 0, 4}, 1.0), 9.5, 1e-12);
}

// The search bounds a balanced 1F1B pipeline's memory before the stage
// times are known by this property: with extra work only on the first and
// last stages, every stage between them holds at least layers / stages
// layers, rounded down.
TEST(StageBalance, StagesBetweenTheEndsHoldAtLeastTheirShare) {
  std::mt19937 engine(11);
  std::uniform_real_distribution<double> extraDist(0.0, 50.0), layerDist(0.1, 3.0);
  for (int trial = 0; trial < 20000; ++trial) {
    int stages = 3 + int(engine() % 30);
    int64_t layers = stages + int64_t(engine() % 200);
    std::vector<double> extra(size_t(stages), 0.0);
    extra.front() = trial % 5 == 0 ? 0.0 : extraDist(engine) * (trial % 7 == 0 ? 100 : 1);
    extra.back() = trial % 3 == 0 ? 0.0 : extraDist(engine);
    std::vector<int64_t> split = balanceStages(layers, extra, layerDist(engine));
    for (int s = 1; s + 1 < stages; ++s)
      ASSERT_GE(split[size_t(s)], layers / stages) << "trial " << trial << " stage " << s;
  }
}
