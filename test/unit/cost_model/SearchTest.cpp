//===- SearchTest.cpp - the plan search -----------------------------------===//

#include "colossal/cost/Search.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

namespace {

TransformerShape smallModel() {
  TransformerShape shape;
  shape.layers = 4;
  shape.hidden = 512;
  shape.heads = 8;
  shape.seq = 512;
  shape.vocab = 8192;
  return shape;
}

} // namespace

TEST(Search, PruningNeverChangesTheAnswer) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  // A tight device so that memory options matter.
  cluster.memoryBytes = 2e9;
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  SearchResult pruned = searchPlans(smallModel(), cluster, options);
  options.exhaustive = true;
  SearchResult exhaustive = searchPlans(smallModel(), cluster, options);
  ASSERT_FALSE(pruned.best.empty()) << pruned.infeasible;
  ASSERT_EQ(pruned.best.size(), exhaustive.best.size());
  for (size_t i = 0; i < pruned.best.size(); ++i) {
    EXPECT_EQ(pruned.best[i].strategy.str(), exhaustive.best[i].strategy.str());
    EXPECT_EQ(pruned.best[i].microbatchSize, exhaustive.best[i].microbatchSize);
    EXPECT_DOUBLE_EQ(pruned.best[i].estimate.stepTime, exhaustive.best[i].estimate.stepTime);
  }
  EXPECT_LT(pruned.evaluated, exhaustive.evaluated);
  EXPECT_EQ(pruned.candidates, exhaustive.candidates);
}

TEST(Search, EveryKeptPlanFitsAndTheWinnerIsFastest) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  cluster.memoryBytes = 2e9;
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  options.exhaustive = true;
  SearchResult result = searchPlans(smallModel(), cluster, options);
  ASSERT_FALSE(result.best.empty());
  for (const SearchCandidate &c : result.best) {
    EXPECT_LE(c.estimate.memory.total(), cluster.memoryBytes);
    EXPECT_GE(c.estimate.stepTime, result.best.front().estimate.stepTime);
    // Re-evaluating the kept plan gives the same prediction.
    TransformerShape shape = smallModel();
    shape.microbatch = c.microbatchSize;
    std::string error;
    auto again = estimate(buildTransformer(shape), c.strategy, cluster, error);
    ASSERT_TRUE(again) << error;
    EXPECT_DOUBLE_EQ(again->stepTime, c.estimate.stepTime);
  }
}

TEST(Search, FixedPartsAreKept) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  options.fixed.tp = 2;
  options.fixed.zero = 3;
  options.fixedKeys = {"tp", "zero"};
  SearchResult result = searchPlans(smallModel(), cluster, options);
  ASSERT_FALSE(result.best.empty()) << result.infeasible;
  for (const SearchCandidate &c : result.best) {
    EXPECT_EQ(c.strategy.tp, 2);
    EXPECT_EQ(c.strategy.zero, 3);
    EXPECT_EQ(c.strategy.devices(), 8);
  }
}

TEST(Search, InfeasibleSaysWhatWouldFit) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  cluster.memoryBytes = 64e6;
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 8;
  SearchResult result = searchPlans(smallModel(), cluster, options);
  EXPECT_TRUE(result.best.empty());
  EXPECT_NE(result.infeasible.find("no plan fits in 0.1 GiB per device"), std::string::npos)
      << result.infeasible;
  EXPECT_NE(result.infeasible.find("devices would hold it"), std::string::npos);
}

// Deep pipelines are pruned by what the plans already evaluated measured per
// layer (time, kept activations) before they are simulated: the answer, and
// the closest miss when nothing fits, stay those of evaluating everything.
TEST(Search, MeasuredLayerBoundsNeverChangeTheAnswer) {
  TransformerShape shape = smallModel();
  shape.layers = 32;
  Cluster cluster = *Cluster::preset("dgx-a100", 4);
  for (double capacity : {1.2e9, 0.25e9, 0.1e9, 0.05e9}) {
    cluster.memoryBytes = capacity;
    SearchOptions options;
    options.devices = 32;
    options.globalBatch = 64;
    SearchResult pruned = searchPlans(shape, cluster, options);
    options.exhaustive = true;
    SearchResult exhaustive = searchPlans(shape, cluster, options);
    ASSERT_EQ(pruned.best.size(), exhaustive.best.size()) << "capacity " << capacity;
    for (size_t i = 0; i < pruned.best.size(); ++i) {
      EXPECT_EQ(pruned.best[i].strategy.str(), exhaustive.best[i].strategy.str());
      EXPECT_DOUBLE_EQ(pruned.best[i].estimate.stepTime, exhaustive.best[i].estimate.stepTime);
    }
    if (pruned.best.empty()) {
      ASSERT_TRUE(pruned.leastMemory && exhaustive.leastMemory) << "capacity " << capacity;
      EXPECT_DOUBLE_EQ(pruned.leastMemory->estimate.memory.total(),
                       exhaustive.leastMemory->estimate.memory.total());
      EXPECT_EQ(pruned.infeasible, exhaustive.infeasible);
    }
    std::printf("capacity %.2g: %s; %lld of %lld evaluated (%lld pruned by memory), exhaustively %lld\n",
                capacity, pruned.best.empty() ? "nothing fits" : "a plan fits", (long long)pruned.evaluated,
                (long long)pruned.candidates, (long long)pruned.prunedByMemory, (long long)exhaustive.evaluated);
  }
}
