//===- TensorGridTest.cpp - 2D, 2.5D and 3D tensor parallelism ------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TensorGrid.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

// Volumes counted from the schedules in TensorGrid.h.
TEST(TensorGrid, SummaMovesEachBlockOncePerStep) {
  double x = 64e6, w = 32e6, y = 64e6;
  for (int q : {2, 4, 8}) {
    GridLinear g = gridLinear(TensorMode::TwoD, q, 1, x, w, y);
    // q steps, each broadcasting one X block and one W block.
    EXPECT_DOUBLE_EQ(gridVolume(g.forward, q), (x + w) / q);
    // dX and dW: twice the forward.
    EXPECT_DOUBLE_EQ(gridVolume(g.backward, q), 2 * (x + w) / q);
  }
}

TEST(TensorGrid, TesseractSplitsActivationsOverDepth) {
  double x = 64e6, w = 32e6, y = 64e6;
  int q = 2, d = 4;
  GridLinear g = gridLinear(TensorMode::TwoPointFiveD, q, d, x, w, y);
  EXPECT_DOUBLE_EQ(gridVolume(g.forward, q), (x / d + w) / q);
  // The weight gradient is all-reduced over the depth.
  ASSERT_EQ(g.backward.back().collective, Collective::AllReduce);
  EXPECT_EQ(g.backward.back().axis, "tp_depth");
  EXPECT_DOUBLE_EQ(g.backward.back().bytes, w / (q * q));
}

TEST(TensorGrid, ThreeDGathersAndScattersOnceEach) {
  double x = 64e6, w = 32e6, y = 48e6;
  int q = 4;
  GridLinear g = gridLinear(TensorMode::ThreeD, q, q, x, w, y);
  EXPECT_DOUBLE_EQ(gridVolume(g.forward, q), (x + w + y) / (q * q) * (q - 1) / q);
  EXPECT_DOUBLE_EQ(gridVolume(g.backward, q), (x + w + y) / (q * q) * (q - 1) / q);
}

TEST(TensorGrid, PlansSplitEverythingOverTheGrid) {
  // Untied: a tied embedding's gradient, held through the layers' backward
  // pass, is split as the weights are (q x q under 2.5D), not over the grid.
  TransformerShape shape;
  shape.family = TransformerFamily::LLaMA;
  shape.layers = 4;
  shape.hidden = 1024;
  shape.heads = 16;
  shape.seq = 1024;
  shape.vocab = 32768;
  Graph graph = buildTransformer(shape);
  Cluster cluster = *Cluster::preset("dgx-a100", 8);
  std::string error;
  auto single = estimate(graph, Strategy(), cluster, error);
  ASSERT_TRUE(single) << error;
  for (auto [mode, tp, depth, weightShare] :
       {std::tuple{TensorMode::TwoD, 16, 1, 16}, std::tuple{TensorMode::TwoPointFiveD, 16, 4, 4},
        std::tuple{TensorMode::ThreeD, 64, 4, 64}}) {
    Strategy s;
    s.tp = tp;
    s.tpMode = mode;
    s.tpDepth = depth;
    auto e = estimate(graph, s, cluster, error);
    ASSERT_TRUE(e) << error;
    EXPECT_NEAR(e->memory.parameters * weightShare / single->memory.parameters, 1.0, 1e-9);
    EXPECT_NEAR(e->memory.activations * tp / single->memory.activations, 1.0, 1e-9);
    EXPECT_GT(e->exposedComm, 0);
  }
  Strategy bad;
  bad.tp = 8;
  bad.tpMode = TensorMode::TwoD;
  EXPECT_FALSE(estimate(graph, bad, cluster, error));
  EXPECT_EQ(error, "tp=8 is not a square q*q grid for tp_mode 2d");
}
