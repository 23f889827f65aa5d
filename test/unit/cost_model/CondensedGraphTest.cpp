//===- CondensedGraphTest.cpp - a condensed graph estimates like the full one -===//
//
// Identical layers cost the same, so the search evaluates a graph holding,
// per pipeline stage, its first layer and one layer standing for the rest.
// These tests check that this changes nothing: every figure of the estimate
// (time breakdown, memory by category on every pipeline rank, bytes per
// collective and axis) equals the full graph's, for every family and for
// plans that exercise each part of the estimator.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace colossal::cost;

namespace {

void expectSame(double full, double condensed, const std::string &what) {
  EXPECT_NEAR(condensed, full, 1e-9 * std::max(1.0, std::fabs(full))) << what;
}

void compare(TransformerFamily family, const std::string &plan, int64_t layers) {
  TransformerShape shape;
  shape.family = family;
  shape.layers = layers;
  shape.hidden = 512;
  shape.heads = 8;
  shape.seq = 256;
  shape.vocab = 8192;
  shape.microbatch = 2;
  std::string error;
  std::optional<Strategy> strategy = Strategy::parse(plan, error);
  ASSERT_TRUE(strategy) << error;
  Cluster cluster = *Cluster::preset("dgx-a100", 4);
  Graph full = buildTransformer(shape);
  int stages = strategy->pp * strategy->virtualStages;
  std::vector<int64_t> split = strategy->stageLayers;
  if (split.empty())
    split.assign(size_t(stages), layers / stages);
  Graph condensed = buildCondensedTransformer(shape, split);
  ASSERT_LT(condensed.ops.size(), full.ops.size());
  EXPECT_EQ(condensed.realLayers(), layers);
  EXPECT_EQ(condensed.parameterCount(), full.parameterCount());
  expectSame(full.modelFlops(), condensed.modelFlops(), "model flops");

  std::optional<Estimate> a = estimate(full, *strategy, cluster, error);
  ASSERT_TRUE(a) << plan << ": " << error;
  std::optional<Estimate> b = estimate(condensed, *strategy, cluster, error);
  ASSERT_TRUE(b) << plan << ": " << error;
  std::string where = plan + " ";
  expectSame(a->stepTime, b->stepTime, where + "step time");
  expectSame(a->compute, b->compute, where + "compute");
  expectSame(a->exposedComm, b->exposedComm, where + "exposed communication");
  expectSame(a->bubble, b->bubble, where + "bubble");
  expectSame(a->optimizer + a->offload, b->optimizer + b->offload, where + "optimizer");
  ASSERT_EQ(a->stages.size(), b->stages.size());
  for (size_t r = 0; r < a->stages.size(); ++r) {
    const MemoryBreakdown &x = a->stages[r].memory, &y = b->stages[r].memory;
    std::string rank = where + "rank " + std::to_string(r) + " ";
    expectSame(x.parameters, y.parameters, rank + "parameters");
    expectSame(x.gradients, y.gradients, rank + "gradients");
    expectSame(x.optimizer + x.hostOptimizer, y.optimizer + y.hostOptimizer, rank + "optimizer state");
    expectSame(x.activations, y.activations, rank + "activations");
    expectSame(x.communication, y.communication, rank + "communication buffers");
    expectSame(x.workspace, y.workspace, rank + "workspace");
    ASSERT_EQ(a->stages[r].comm.size(), b->stages[r].comm.size()) << rank;
    for (size_t c = 0; c < a->stages[r].comm.size(); ++c) {
      const CommTotal &p = a->stages[r].comm[c], &q = b->stages[r].comm[c];
      EXPECT_EQ(p.axis, q.axis);
      expectSame(p.bytes, q.bytes, rank + nameOf(p.collective) + " bytes on " + p.axis);
      expectSame(p.seconds, q.seconds, rank + nameOf(p.collective) + " seconds on " + p.axis);
    }
  }
}

} // namespace

TEST(CondensedGraph, EstimatesEqualTheFullGraph) {
  for (TransformerFamily family : {TransformerFamily::GPT, TransformerFamily::BERT, TransformerFamily::LLaMA}) {
    compare(family, "dp=4,tp=2,microbatches=2,zero=1", 12);
    compare(family, "dp=2,tp=2,pp=4,microbatches=8,schedule=1f1b,recompute=selective", 12);
    compare(family, "dp=1,tp=4,pp=2,microbatches=4,schedule=interleaved,virtual_stages=2,sp_mode=megatron", 12);
    compare(family, "dp=2,tp=2,pp=4,microbatches=8,recompute=full,zero=3", 16);
    compare(family, "dp=2,sp=2,sp_mode=ring,tp=2,pp=2,microbatches=4,zero=2,offload=optimizer", 12);
    compare(family, "dp=2,tp=2,pp=4,microbatches=8,stage_layers=2/5/5/2", 14);
  }
}

TEST(CondensedGraph, UnevenSplitsAreCheckedAgainstTheModel) {
  TransformerShape shape;
  shape.layers = 10;
  Graph full = buildTransformer(shape);
  std::string error;
  Cluster cluster = *Cluster::preset("dgx-a100", 1);
  Strategy s = *Strategy::parse("dp=2,pp=4,microbatches=4,stage_layers=2/3/3/3", error);
  EXPECT_FALSE(estimate(full, s, cluster, error));
  EXPECT_NE(error.find("holding 11 layers"), std::string::npos) << error;
  s = *Strategy::parse("dp=2,pp=4,microbatches=4", error);
  EXPECT_FALSE(estimate(full, s, cluster, error));
  EXPECT_NE(error.find("stage_layers"), std::string::npos) << error;
  s = *Strategy::parse("dp=2,pp=4,microbatches=4,stage_layers=1/3/3/3", error);
  EXPECT_TRUE(estimate(full, s, cluster, error)) << error;
  EXPECT_EQ(s.str().find("stage_layers=1/3/3/3") != std::string::npos, true);
  std::optional<Strategy> back = Strategy::fromJson(s.toJson(), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->stageLayers, s.stageLayers);
}
