//===- PipelineTest.cpp - schedule simulation vs the bubble formula ------===//

#include "colossal/cost/Pipeline.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

namespace {

double bubbleFraction(Schedule schedule, int p, int m, int v) {
  // Uniform stages: forward 1, backward 2 per microbatch per stage, split
  // evenly over the chunks.
  std::vector<ChunkTimes> times(p * v, ChunkTimes{1.0 / v, 2.0 / v});
  PipelineResult result;
  std::string error;
  EXPECT_TRUE(simulatePipeline(schedule, p, v, m, times, 0, result, error)) << error;
  double ideal = m * 3.0;
  return (result.makespan - ideal) / ideal;
}

} // namespace

// Narayanan et al. (SC'21): bubble (p - 1) / m for GPipe and 1F1B, and
// (p - 1) / (v m) with v interleaved chunks.
TEST(Pipeline, UniformStagesReproduceTheBubbleFormula) {
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 4 * p}) {
      EXPECT_NEAR(bubbleFraction(Schedule::OneFOneB, p, m, 1), double(p - 1) / m, 1e-9);
      EXPECT_NEAR(bubbleFraction(Schedule::GPipe, p, m, 1), double(p - 1) / m, 1e-9);
      EXPECT_NEAR(bubbleFraction(Schedule::Interleaved, p, m, 2), double(p - 1) / (2 * m), 1e-9)
          << "p=" << p << " m=" << m;
    }
}

TEST(Pipeline, OneFOneBHoldsAtMostPMicrobatches) {
  int p = 4, m = 16;
  std::vector<ChunkTimes> times(p, ChunkTimes{1, 2});
  PipelineResult oneF, gpipe;
  std::string error;
  ASSERT_TRUE(simulatePipeline(Schedule::OneFOneB, p, 1, m, times, 0, oneF, error));
  ASSERT_TRUE(simulatePipeline(Schedule::GPipe, p, 1, m, times, 0, gpipe, error));
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(oneF.peakInFlight[r], p - r);
    EXPECT_EQ(gpipe.peakInFlight[r], m);
  }
}

TEST(Pipeline, TheSlowestStageSetsTheSteadyState) {
  // A slow last stage (the head and the loss): the makespan is at least m
  // times its work.
  std::vector<ChunkTimes> times{{1, 2}, {1, 2}, {1, 2}, {2, 4}};
  PipelineResult result;
  std::string error;
  ASSERT_TRUE(simulatePipeline(Schedule::OneFOneB, 4, 1, 8, times, 0, result, error));
  EXPECT_GE(result.makespan, 8 * 6.0);
}

TEST(Pipeline, InvalidSchedulesAreRefused) {
  std::vector<ChunkTimes> times(8, ChunkTimes{1, 2});
  PipelineResult result;
  std::string error;
  EXPECT_FALSE(simulatePipeline(Schedule::Interleaved, 4, 2, 6, times, 0, result, error));
  EXPECT_NE(error.find("divisible"), std::string::npos);
}

// The search bounds activation memory before simulating with peakInFlight,
// which must equal what the simulation counts, whatever the stage times.
TEST(Pipeline, PeakInFlightFollowsTheOrderAlone) {
  for (Schedule schedule : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 3, 4, 8, 16, 24}) {
        int v = schedule == Schedule::Interleaved ? 2 : 1;
        if (schedule == Schedule::Interleaved && m % p != 0)
          continue;
        std::vector<ChunkTimes> times;
        for (int s = 0; s < p * v; ++s)
          times.push_back({1.0 + 0.3 * (s % 3), 2.0 + 0.7 * (s % 2)});
        PipelineResult result;
        std::string error;
        ASSERT_TRUE(simulatePipeline(schedule, p, v, m, times, 0.1, result, error)) << error;
        for (int r = 0; r < p; ++r)
          EXPECT_EQ(peakInFlight(schedule, r, p, v, m), result.peakInFlight[size_t(r)])
              << "schedule " << int(schedule) << " p=" << p << " m=" << m << " rank " << r;
      }
}

// What a rank holds in bytes: its in-flight count times the bytes when the
// chunks keep the same; under the interleaved schedule the order's own mix.
// Rank 1 of p=2, v=2, m=2 runs F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0
// (microbatch.chunk): at most both microbatches of chunk 0 and one of
// chunk 1, not three of the larger chunk.
TEST(Pipeline, PeakHeldBytesFollowsTheChunksInFlight) {
  EXPECT_DOUBLE_EQ(peakHeldBytes(Schedule::Interleaved, 1, 2, 2, 2, {1.0, 10.0}), 12.0);
  EXPECT_DOUBLE_EQ(peakHeldBytes(Schedule::Interleaved, 0, 2, 2, 2, {1.0, 10.0}), 22.0);
  for (Schedule schedule : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved})
    for (int p : {1, 2, 4})
      for (int m : {2, 4, 8}) {
        int v = schedule == Schedule::Interleaved ? 2 : 1;
        for (int r = 0; r < p; ++r)
          EXPECT_DOUBLE_EQ(peakHeldBytes(schedule, r, p, v, m, std::vector<double>(size_t(v), 3.0)),
                           3.0 * peakInFlight(schedule, r, p, v, m));
      }
}
