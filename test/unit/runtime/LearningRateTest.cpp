//===- LearningRateTest.cpp - schedules against their definition and PyTorch -===//

#include "colossal/runtime/train/LearningRate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

using namespace colossal::rt;

TEST(LearningRateTest, WarmupThenEachDecay) {
  LearningRateSchedule s;
  s.base = 0.01, s.warmupSteps = 10, s.totalSteps = 110, s.minRatio = 0.1;
  // Warm-up is linear from base / W at step 1 to base at step W.
  for (Decay d : {Decay::Constant, Decay::Cosine, Decay::Linear, Decay::Polynomial}) {
    s.decay = d;
    EXPECT_DOUBLE_EQ(s.at(1), 0.001) << nameOf(d);
    EXPECT_DOUBLE_EQ(s.at(10), 0.01) << nameOf(d);
  }
  s.decay = Decay::Constant;
  EXPECT_DOUBLE_EQ(s.at(1000), 0.01);
  // Cosine: halfway through the decay it sits halfway between base and floor.
  s.decay = Decay::Cosine;
  EXPECT_NEAR(s.at(60), 0.001 + 0.009 * 0.5, 1e-15);
  EXPECT_NEAR(s.at(35), 0.001 + 0.009 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 0.001);
  EXPECT_DOUBLE_EQ(s.at(500), 0.001); // clamped after the end
  s.decay = Decay::Linear;
  EXPECT_NEAR(s.at(85), 0.001 + 0.009 * 0.25, 1e-15);
  s.decay = Decay::Polynomial;
  s.power = 2;
  EXPECT_NEAR(s.at(60), 0.001 + 0.009 * 0.25, 1e-15);
  // Decays never go below the floor and never rise after warm-up.
  for (Decay d : {Decay::Cosine, Decay::Linear, Decay::Polynomial}) {
    s.decay = d;
    for (int64_t t = 11; t <= 200; ++t) {
      EXPECT_LE(s.at(t), s.at(t - 1) + 1e-18) << nameOf(d) << " " << t;
      EXPECT_GE(s.at(t), 0.001 - 1e-18) << nameOf(d) << " " << t;
    }
  }
  EXPECT_EQ(parseDecay("cosine"), Decay::Cosine);
  EXPECT_FALSE(parseDecay("exponential"));
}

TEST(LearningRateTest, NoWarmup) {
  LearningRateSchedule s;
  s.base = 2.0, s.totalSteps = 4, s.decay = Decay::Linear;
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  EXPECT_DOUBLE_EQ(s.at(2), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 0.0);
}

TEST(LearningRateTest, EqualsPyTorchSchedulers) {
  // test/fixtures/schedules/generate.py: PyTorch's LinearLR warm-up, then
  // CosineAnnealingLR, LinearLR, PolynomialLR or ConstantLR, at every step.
  std::ifstream file(COLOSSAL_FIXTURES_DIR "/schedules/schedules.txt");
  ASSERT_TRUE(file) << "cannot read schedules.txt";
  std::string line;
  int cases = 0;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream in(line);
    std::string decay;
    LearningRateSchedule s;
    in >> decay >> s.warmupSteps >> s.totalSteps >> s.minRatio >> s.power >> s.base;
    ASSERT_TRUE(parseDecay(decay)) << decay;
    s.decay = *parseDecay(decay);
    double rate;
    int64_t step = 0;
    while (in >> rate) {
      ++step;
      // PyTorch's schedulers update the rate multiplicatively, step by step:
      // they drift from the closed form by a few ulps.
      EXPECT_NEAR(s.at(step), rate, 1e-12 * s.base) << decay << " W=" << s.warmupSteps << " step " << step;
    }
    EXPECT_EQ(step, s.totalSteps) << decay;
    ++cases;
  }
  EXPECT_EQ(cases, 7);
}
