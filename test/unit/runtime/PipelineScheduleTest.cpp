//===- PipelineScheduleTest.cpp - pipeline orders, run and simulated -----===//

#include "colossal/runtime/train/PipelineSchedule.h"
#include "colossal/cost/Pipeline.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

using namespace colossal::rt;

namespace {

std::string str(const std::vector<PipelineTask> &order) {
  std::string text;
  for (const PipelineTask &t : order)
    text += std::string(text.empty() ? "" : " ") + (t.forward ? "F" : "B") + std::to_string(t.microbatch) +
            (t.chunk ? "." + std::to_string(t.chunk) : "");
  return text;
}

colossal::cost::Schedule costSchedule(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::GPipe:
    return colossal::cost::Schedule::GPipe;
  case PipelineScheduleKind::OneFOneB:
    return colossal::cost::Schedule::OneFOneB;
  case PipelineScheduleKind::Interleaved:
    break;
  }
  return colossal::cost::Schedule::Interleaved;
}

/// Every valid shape of a small grid.
std::vector<PipelineShape> shapes() {
  std::vector<PipelineShape> all;
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB, PipelineScheduleKind::Interleaved})
    for (int ranks : {1, 2, 3, 4, 8})
      for (int chunks : {1, 2, 3})
        for (int m = 1; m <= 17; ++m) {
          PipelineShape shape{kind, ranks, chunks, m};
          if (pipelineShapeError(shape).empty())
            all.push_back(shape);
        }
  return all;
}

} // namespace

// Orders written out by hand from the schedules' definitions.
TEST(PipelineSchedule, HandWrittenOrders) {
  PipelineShape oneF{PipelineScheduleKind::OneFOneB, 3, 1, 4};
  EXPECT_EQ(str(pipelineOrder(oneF, 0)), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(str(pipelineOrder(oneF, 1)), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(str(pipelineOrder(oneF, 2)), "F0 B0 F1 B1 F2 B2 F3 B3");
  PipelineShape gpipe{PipelineScheduleKind::GPipe, 2, 1, 3};
  EXPECT_EQ(str(pipelineOrder(gpipe, 1)), "F0 F1 F2 B0 B1 B2");
  // Two chunks on two ranks: microbatches in pairs through chunk 0, then
  // chunk 1; backwards from chunk 1.
  PipelineShape interleaved{PipelineScheduleKind::Interleaved, 2, 2, 4};
  EXPECT_EQ(str(pipelineOrder(interleaved, 0)), "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  EXPECT_EQ(str(pipelineOrder(interleaved, 1)), "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
}

// Each rank runs exactly the order the cost model simulates, so its
// predicted bubble and held activations are those of the program.
TEST(PipelineSchedule, OrderIsTheCostModelsSimulatedOrder) {
  for (const PipelineShape &shape : shapes()) {
    std::vector<colossal::cost::ChunkTimes> times(shape.stages(), {1.0, 2.0});
    colossal::cost::PipelineResult simulated;
    std::string error;
    ASSERT_TRUE(colossal::cost::simulatePipeline(costSchedule(shape.kind), shape.ranks, shape.chunks,
                                                 shape.microbatches, times, 0.1, simulated, error))
        << error;
    for (int rank = 0; rank < shape.ranks; ++rank) {
      std::vector<PipelineTask> expected;
      for (const colossal::cost::PipelineTask &t : simulated.tasks)
        if (t.rank == rank)
          expected.push_back({t.forward, t.chunk, t.microbatch});
      EXPECT_EQ(str(pipelineOrder(shape, rank)), str(expected))
          << nameOf(shape.kind) << " p=" << shape.ranks << " v=" << shape.chunks << " m=" << shape.microbatches
          << " rank " << rank;
      EXPECT_EQ(pipelineActivationsHeld(shape, rank), simulated.peakInFlight[rank]);
    }
  }
}

// Run with blocking receives and sends that never wait: every rank finishes
// its order, each task exactly once, a backward after its forward.
TEST(PipelineSchedule, OrdersRunToTheEndWithoutDeadlock) {
  for (const PipelineShape &shape : shapes()) {
    std::vector<std::vector<PipelineTask>> orders;
    for (int rank = 0; rank < shape.ranks; ++rank)
      orders.push_back(pipelineOrder(shape, rank));
    std::set<std::tuple<bool, int, int>> done; // (forward, stage, microbatch)
    std::vector<size_t> next(shape.ranks, 0);
    size_t remaining = size_t(2) * shape.stages() * shape.microbatches;
    while (remaining > 0) {
      bool progressed = false;
      for (int rank = 0; rank < shape.ranks; ++rank)
        while (next[rank] < orders[rank].size()) {
          const PipelineTask &t = orders[rank][next[rank]];
          int stage = shape.stageOf(rank, t.chunk);
          bool ready = t.forward ? stage == 0 || done.count({true, stage - 1, t.microbatch})
                                 : done.count({true, stage, t.microbatch}) &&
                                       (stage == shape.stages() - 1 || done.count({false, stage + 1, t.microbatch}));
          if (!ready)
            break;
          ASSERT_TRUE(done.insert({t.forward, stage, t.microbatch}).second) << "task run twice";
          ++next[rank], --remaining, progressed = true;
        }
      ASSERT_TRUE(progressed) << nameOf(shape.kind) << " p=" << shape.ranks << " v=" << shape.chunks
                              << " m=" << shape.microbatches << " deadlocks";
    }
  }
}

TEST(PipelineSchedule, OneFOneBHoldsAtMostRanksMinusRankMicrobatches) {
  for (int m : {1, 3, 8, 16}) {
    PipelineShape oneF{PipelineScheduleKind::OneFOneB, 4, 1, m};
    PipelineShape gpipe{PipelineScheduleKind::GPipe, 4, 1, m};
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(pipelineActivationsHeld(oneF, rank), std::min(4 - rank, m));
      EXPECT_EQ(pipelineActivationsHeld(gpipe, rank), m);
    }
  }
}

TEST(PipelineSchedule, ShapesThatCannotRunSayWhy) {
  EXPECT_NE(pipelineShapeError({PipelineScheduleKind::OneFOneB, 2, 2, 4}).find("only the interleaved"),
            std::string::npos);
  EXPECT_NE(pipelineShapeError({PipelineScheduleKind::Interleaved, 4, 2, 6}).find("multiple of the pipeline ranks"),
            std::string::npos);
  EXPECT_NE(pipelineShapeError({PipelineScheduleKind::GPipe, 0, 1, 4}).find("at least one"), std::string::npos);
  EXPECT_EQ(pipelineScheduleNamed("1f1b"), PipelineScheduleKind::OneFOneB);
  EXPECT_FALSE(pipelineScheduleNamed("zigzag"));
}
