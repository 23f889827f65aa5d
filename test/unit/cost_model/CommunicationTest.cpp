//===- CommunicationTest.cpp - collectives and resharding ----------------===//

#include "colossal/cost/Communication.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

namespace {

Cluster linkOnly(double bandwidth) {
  Cluster c;
  c.name = "test";
  c.nodes = 16;
  c.gpusPerNode = 8;
  c.intraNode = {bandwidth, 0.0, {}, 1.0};
  c.interNode = {bandwidth / 8, 0.0, {}, 1.0};
  return c;
}

} // namespace

// nccl-tests (doc/PERFORMANCE.md): busbw = algbw * factor, with algbw = S / t.
// With zero latency, the model must report exactly the link's bus bandwidth.
TEST(Collectives, ReproduceTheNcclTestsBusBandwidthFactors) {
  const double B = 100e9, S = 1 << 30;
  Cluster cluster = linkOnly(B);
  for (int n : {2, 3, 4, 8}) {
    for (auto [c, factor] : {std::pair{Collective::AllReduce, 2.0 * (n - 1) / n},
                             std::pair{Collective::AllGather, double(n - 1) / n},
                             std::pair{Collective::ReduceScatter, double(n - 1) / n},
                             std::pair{Collective::AllToAll, double(n - 1) / n},
                             std::pair{Collective::Broadcast, 1.0}}) {
      double t = collectiveTime(c, S, n, n, cluster);
      double algbw = S / t;
      EXPECT_NEAR(algbw * factor / B, 1.0, 1e-12) << nameOf(c) << " n=" << n;
    }
  }
}

TEST(Collectives, LatencyIsPaidOncePerCall) {
  Cluster cluster = linkOnly(100e9);
  cluster.intraNode.latency = 5e-6;
  EXPECT_NEAR(collectiveTime(Collective::AllReduce, 0, 8, 8, cluster), 5e-6, 1e-15);
  EXPECT_EQ(collectiveTime(Collective::AllReduce, 1e9, 1, 1, cluster), 0);
}

TEST(Collectives, HierarchicalAllReduceAcrossNodes) {
  // 16 ranks, 8 per node: reduce-scatter and all-gather inside the node on
  // the full size, all-reduce across 2 nodes on an eighth of it.
  const double B = 100e9, S = 8e9;
  Cluster cluster = linkOnly(B);
  double intra = S / B * 7.0 / 8;
  double inter = (S / 8) / (B / 8) * 2.0 * 1 / 2;
  EXPECT_NEAR(collectiveTime(Collective::AllReduce, S, 16, 8, cluster), 2 * intra + inter, 1e-12);
  // One rank per node: a flat all-reduce on the network.
  EXPECT_NEAR(collectiveTime(Collective::AllReduce, S, 4, 1, cluster), S / (B / 8) * 1.5, 1e-12);
}

namespace {
Mesh twoAxes() {
  Mesh mesh;
  mesh.axes = {{"tp", 4, 4}, {"dp", 2, 2}};
  return mesh;
}
} // namespace

TEST(Reshard, PartialSumBecomesAllReduceOrReduceScatter) {
  Mesh mesh = twoAxes();
  Cluster cluster = linkOnly(100e9);
  std::vector<CommEvent> events;
  // [s, h] partial over tp -> replicated: all-reduce of the whole tensor.
  reshard({{{}, {}}, {0}}, {{{}, {}}, {}}, 1024, mesh, cluster, events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].collective, Collective::AllReduce);
  EXPECT_DOUBLE_EQ(events[0].bytes, 1024);
  // Partial over tp -> split along the sequence over tp: reduce-scatter.
  events.clear();
  reshard({{{}, {}}, {0}}, {{{0}, {}}, {}}, 1024, mesh, cluster, events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].collective, Collective::ReduceScatter);
}

TEST(Reshard, GatherMoveAndSlice) {
  Mesh mesh = twoAxes();
  Cluster cluster = linkOnly(100e9);
  std::vector<CommEvent> events;
  // Split along the sequence over tp -> replicated: all-gather, full size.
  reshard({{{0}, {}}, {}}, {{{}, {}}, {}}, 1024, mesh, cluster, events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].collective, Collective::AllGather);
  EXPECT_DOUBLE_EQ(events[0].bytes, 1024);
  // Sequence split -> head split: all-to-all of the local shard.
  events.clear();
  reshard({{{0}, {}}, {}}, {{{}, {0}}, {}}, 1024, mesh, cluster, events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].collective, Collective::AllToAll);
  EXPECT_DOUBLE_EQ(events[0].bytes, 256);
  // Replicated -> split: a local slice, no communication.
  events.clear();
  EXPECT_EQ(reshard({{{}, {}}, {}}, {{{0}, {1}}, {}}, 1024, mesh, cluster, events), 0);
  EXPECT_TRUE(events.empty());
}
