//===- EstimatorTest.cpp - whole-plan predictions -------------------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/GraphSearch.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace colossal::cost;

namespace {

Graph smallGpt(int layers = 4) {
  TransformerShape shape;
  shape.layers = layers;
  shape.hidden = 1024;
  shape.heads = 16;
  shape.seq = 1024;
  shape.vocab = 32768;
  shape.microbatch = 2;
  return buildTransformer(shape);
}

const CommTotal *find(const StageEstimate &stage, Collective c, const std::string &axis) {
  for (const CommTotal &t : stage.comm)
    if (t.collective == c && t.axis == axis)
      return &t;
  return nullptr;
}

} // namespace

// Every gradient byte once, in one all-reduce per 25 MiB bucket, and the
// loss (one float) for the log.
TEST(Estimator, DataParallelReducesEveryGradientOnceInBuckets) {
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy strategy;
  strategy.dp = 8;
  std::string error;
  auto e = estimate(graph, strategy, cluster, error);
  ASSERT_TRUE(e) << error;
  const CommTotal *ar = find(e->stages[0], Collective::AllReduce, "dp");
  ASSERT_TRUE(ar);
  double bytes = 2.0 * graph.parameterCount();
  EXPECT_EQ(ar->calls, int(std::ceil(bytes / EstimateOptions().bucketBytes)) + 1);
  EXPECT_GT(ar->calls, 2);
  EXPECT_DOUBLE_EQ(ar->bytes, bytes + 4);
  // One bucket as large as the gradients: one call, the same bytes, less
  // latency.
  EstimateOptions one;
  one.bucketBytes = bytes;
  auto single = estimate(graph, strategy, cluster, error, nullptr, one);
  ASSERT_TRUE(single) << error;
  const CommTotal *whole = find(single->stages[0], Collective::AllReduce, "dp");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->calls, 2);
  EXPECT_DOUBLE_EQ(whole->bytes, bytes + 4);
  EXPECT_LT(whole->seconds, ar->seconds);
}

// Buckets reduced while the backward pass runs hide all but the last; a
// trainer that reduces them after the step (the CUDA program's, or the host
// program's beside a tensor axis) exposes every one, and ZeRO-3's gathers
// are hidden only when prefetched.
TEST(Estimator, OverlapOfTheDataAxisIsTheTrainers) {
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy strategy;
  strategy.dp = 8;
  std::string error;
  EstimateOptions after;
  after.overlapGradientBuckets = false;
  auto overlapped = estimate(graph, strategy, cluster, error);
  auto exposed = estimate(graph, strategy, cluster, error, nullptr, after);
  ASSERT_TRUE(overlapped && exposed) << error;
  const StageEstimate &o = overlapped->stages[0], &x = exposed->stages[0];
  EXPECT_DOUBLE_EQ(x.dataParallelSeconds, o.dataParallelSeconds);
  EXPECT_DOUBLE_EQ(x.dataParallelExposed, x.dataParallelSeconds);
  EXPECT_LT(o.dataParallelExposed, 0.5 * o.dataParallelSeconds);
  EXPECT_NEAR(exposed->stepTime - overlapped->stepTime, x.dataParallelExposed - o.dataParallelExposed,
              1e-12 * exposed->stepTime);

  strategy.zero = 3;
  EstimateOptions inline_;
  inline_.prefetchGathers = false;
  auto prefetched = estimate(graph, strategy, cluster, error);
  auto gathered = estimate(graph, strategy, cluster, error, nullptr, inline_);
  ASSERT_TRUE(prefetched && gathered) << error;
  EXPECT_GT(gathered->stages[0].dataParallelExposed, prefetched->stages[0].dataParallelExposed);

  // The emitted programs: the host one overlaps only a step without
  // collectives of its own, the CUDA one never reduces buckets early.
  Strategy dataOnly;
  dataOnly.dp = 2;
  Strategy withTensor = dataOnly;
  withTensor.tp = 2;
  EXPECT_TRUE(evaluationOf(dataOnly, Placement::Partitioner, ProgramTarget::Host).overlapGradientBuckets);
  EXPECT_FALSE(evaluationOf(withTensor, Placement::Partitioner, ProgramTarget::Host).overlapGradientBuckets);
  EXPECT_FALSE(evaluationOf(withTensor, Placement::Partitioner, ProgramTarget::Host).prefetchGathers);
  EXPECT_FALSE(evaluationOf(dataOnly, Placement::Partitioner, ProgramTarget::Cuda).overlapGradientBuckets);
  EXPECT_TRUE(evaluationOf(dataOnly, Placement::Partitioner, ProgramTarget::Cuda).prefetchGathers);
  EXPECT_FALSE(evaluationOf(withTensor, Placement::Solver, ProgramTarget::Host).overlapGradientBuckets);
}

TEST(Estimator, TensorParallelAllReducesTwicePerLayerEachWay) {
  // Megatron 1D: one all-reduce after attention and one after the MLP in the
  // forward pass, the same two in the backward pass.
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy strategy;
  strategy.tp = 4;
  std::string error;
  auto e = estimate(graph, strategy, cluster, error);
  ASSERT_TRUE(e) << error;
  const CommTotal *ar = find(e->stages[0], Collective::AllReduce, "tp");
  ASSERT_TRUE(ar);
  double activation = 2.0 * 1024 * 1024 * 2; // b s h in bf16
  int layers = 4;
  // 4 per layer, plus the vocabulary-parallel embedding's partial output
  // (forward), the head's input gradient (backward); the cross-entropy's
  // row statistics (the maxima, then the sums with the label logits
  // forward; the maxima and sums again backward: 5 floats per row in 4
  // calls); and the split weights' norms completed twice (LAMB), 2 floats
  // per split tensor: 6 per layer (QKV and first MLP weight and bias, the
  // two output weights) and the embedding.
  int big = 4 * layers + 2;
  double rows = 2.0 * 1024, splitTensors = 6 * layers + 1;
  EXPECT_EQ(ar->calls, big + 4 + 2);
  EXPECT_NEAR(ar->bytes, big * activation + 5 * rows * 4 + 2 * 8 * splitTensors, 1);
}

TEST(Estimator, SequenceParallelTradesAllReduceForGatherAndScatter) {
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy tp, tpsp;
  tp.tp = tpsp.tp = 4;
  tpsp.spMode = SequenceMode::Megatron;
  std::string error;
  auto a = estimate(graph, tp, cluster, error), b = estimate(graph, tpsp, cluster, error);
  ASSERT_TRUE(a && b) << error;
  EXPECT_TRUE(find(b->stages[0], Collective::AllGather, "tp"));
  EXPECT_TRUE(find(b->stages[0], Collective::ReduceScatter, "tp"));
  EXPECT_LT(b->memory.activations, a->memory.activations);
}

TEST(Estimator, ZeroLowersMemoryAndOffloadMovesOptimizerState) {
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  std::string error;
  double previous = 1e300;
  for (int zero = 0; zero <= 3; ++zero) {
    Strategy s;
    s.dp = 8;
    s.zero = zero;
    auto e = estimate(graph, s, cluster, error);
    ASSERT_TRUE(e) << error;
    double states = e->memory.parameters + e->memory.gradients + e->memory.optimizer;
    EXPECT_LT(states, previous);
    previous = states;
  }
  Strategy offload;
  offload.dp = 8;
  offload.zero = 2;
  offload.offloadOptimizer = true;
  auto e = estimate(graph, offload, cluster, error);
  ASSERT_TRUE(e) << error;
  EXPECT_EQ(e->memory.optimizer, 0);
  EXPECT_GT(e->memory.hostOptimizer, 0);
  EXPECT_GT(e->offload, 0);
  // 16-bit weights: the host holds the fp32 master, m and v (12 bytes per
  // shard element) and fp32 gradients (4), no second copy of the weights;
  // each step moves the shard's 16-bit gradients down and weights up.
  const StageEstimate &rank = e->stages.front();
  EXPECT_GT(rank.offloadToHost, 0);
  EXPECT_EQ(rank.offloadToHost, rank.offloadToDevice);
  EXPECT_EQ(e->memory.hostGradients, 2 * rank.offloadToHost);
  EXPECT_EQ(e->memory.hostOptimizer, 3 * e->memory.hostGradients);
  EXPECT_EQ(e->memory.hostParameters, 0);
  EXPECT_EQ(e->hostPeak, e->memory.host());
  EXPECT_EQ(e->hostCapacity, cluster.hostMemoryBytes / cluster.gpusPerNode);
  EXPECT_TRUE(e->fits());
  // A node whose host memory cannot hold its ranks' shards does not fit.
  cluster.hostMemoryBytes = e->memory.host() * cluster.gpusPerNode / 2;
  auto tight = estimate(graph, offload, cluster, error);
  ASSERT_TRUE(tight) << error;
  EXPECT_FALSE(tight->hostFits());
  EXPECT_FALSE(tight->fits());
  EXPECT_NE(tight->summary().find("pinned of"), std::string::npos);
}

TEST(Estimator, ReusedPartsGiveEachZeroStageItsOwnEstimate) {
  // One holder across ZeRO stages and offload (as the search passes it):
  // every plan's JSON equals the one estimated afresh, and a plan that
  // differs elsewhere (microbatches) is estimated afresh through it.
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  EstimateOptions options;
  options.recordPipelineTasks = false;
  EstimateReuse reuse;
  std::string error;
  for (int microbatches : {4, 8})
    for (int zero = 0; zero <= 3; ++zero)
      for (bool offload : {false, true}) {
        Strategy s;
        s.dp = 4, s.pp = 2, s.microbatches = microbatches, s.zero = zero, s.offloadOptimizer = offload;
        auto fresh = estimate(graph, s, cluster, error, nullptr, options);
        ASSERT_TRUE(fresh) << error;
        auto reused = estimate(graph, s, cluster, error, nullptr, options, &reuse);
        ASSERT_TRUE(reused) << error;
        EXPECT_EQ(reused->toJson().dump(), fresh->toJson().dump()) << s.str();
        EXPECT_EQ(reused->stepTime, fresh->stepTime) << s.str();
      }
}

TEST(Estimator, PipelineBubbleAndPlanErrors) {
  Graph graph = smallGpt(8);
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy s;
  s.pp = 4;
  s.microbatches = 8;
  std::string error;
  auto e = estimate(graph, s, cluster, error);
  ASSERT_TRUE(e) << error;
  EXPECT_GT(e->bubble, 0);
  EXPECT_EQ(e->stages.size(), 4u);
  // The first stage keeps p microbatches of activations, the last one.
  EXPECT_GT(e->stages[0].memory.activations, e->stages[3].memory.activations);

  s.pp = 3;
  EXPECT_FALSE(estimate(graph, s, cluster, error));
  EXPECT_EQ(error, "8 layers do not divide into 3 pipeline stages (give stage_layers=... for an uneven split)");
  Strategy tooBig;
  tooBig.dp = 16;
  EXPECT_FALSE(estimate(graph, tooBig, cluster, error));
  EXPECT_EQ(error, "the plan needs 16 devices; the cluster has 8");
  Strategy badTp;
  badTp.tp = 3;
  EXPECT_FALSE(estimate(graph, badTp, Cluster::preset("dgx-a100", 2).value(), error));
  EXPECT_NE(error.find("does not divide 3 ways"), std::string::npos) << error;
}

TEST(Estimator, JsonHasThePlanSections) {
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-h100");
  Strategy s;
  s.dp = 2;
  s.tp = 4;
  std::string error;
  auto e = estimate(graph, s, cluster, error);
  ASSERT_TRUE(e) << error;
  Json json = e->toJson();
  for (const char *key : {"step_time_s", "compute_s", "exposed_comm_s", "bubble_s",
                          "tflops_per_gpu", "mfu"})
    EXPECT_TRUE(json.find("predicted")->find(key)) << key;
  for (const char *key : {"capacity_bytes", "per_rank_peak_bytes", "by_category"})
    EXPECT_TRUE(json.find("memory")->find(key)) << key;
  EXPECT_GT(e->mfu, 0);
  EXPECT_LT(e->mfu, 1);
  Json trace = e->chromeTrace();
  EXPECT_FALSE(trace.find("traceEvents")->asArray().empty());
}

TEST(Estimator, TraceDrawsEveryPredictedCallOnACommunicationStream) {
  // The trace's communication events (tids 1 and 2) count, per collective
  // and axis, the calls of the plan's communication section: none dropped,
  // none drawn twice, whichever axes the plan has. Off the data axis the
  // trace draws each call's collectives (kept per stage and microbatch) and
  // those after the calls, accumulated apart from the section's totals;
  // the data axis it takes from the section itself.
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  for (const char *text :
       {"dp=2,tp=4,zero=1", "dp=2,pp=2,microbatches=4", "sp=4,sp_mode=ring,recompute=full",
        "dp=2,zero=3,microbatches=2", "tp=2,pp=2,microbatches=4,schedule=interleaved,virtual_stages=2"}) {
    std::string error;
    std::optional<Strategy> strategy = Strategy::parse(text, error);
    ASSERT_TRUE(strategy) << error;
    auto e = estimate(graph, *strategy, cluster, error);
    ASSERT_TRUE(e) << text << ": " << error;
    std::map<std::pair<int, std::string>, int64_t> planned, drawn;
    for (size_t r = 0; r < e->stages.size(); ++r)
      for (const CommTotal &t : e->stages[r].comm)
        planned[{int(r), std::string(nameOf(t.collective)) + " " + t.axis}] += t.calls;
    Json trace = e->chromeTrace();
    for (const Json &event : trace.find("traceEvents")->asArray()) {
      const Json *tid = event.find("tid");
      if (event.find("ph")->asString() != "X" || tid->asNumber() == 0)
        continue;
      drawn[{int(event.find("pid")->asNumber()), event.find("name")->asString()}] +=
          int64_t(event.find("args")->find("calls")->asNumber());
    }
    EXPECT_EQ(drawn, planned) << text;
  }
}

TEST(Estimator, AllToAllSequenceParallelSwapsSequenceForHeads) {
  // DeepSpeed-Ulysses: q, k, v go from a sequence split to a head split
  // (three all-to-alls) and the context back (one), each way.
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy s;
  s.sp = 4;
  s.spMode = SequenceMode::AllToAll;
  std::string error;
  auto e = estimate(graph, s, cluster, error);
  ASSERT_TRUE(e) << error;
  const CommTotal *a2a = find(e->stages[0], Collective::AllToAll, "sp");
  ASSERT_TRUE(a2a);
  EXPECT_EQ(a2a->calls, 4 * 4 * 2);
  // Each moves the local shard of a [b, s, h] bf16 tensor.
  EXPECT_DOUBLE_EQ(a2a->bytes, 4 * 4 * 2 * (2.0 * 1024 * 1024 * 2 / 4));
}

TEST(Estimator, RingAttentionPassesKeysAndValuesAroundTheRing) {
  Graph graph = smallGpt();
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy s;
  s.sp = 4;
  s.spMode = SequenceMode::Ring;
  std::string error;
  auto e = estimate(graph, s, cluster, error);
  ASSERT_TRUE(e) << error;
  const CommTotal *ring = find(e->stages[0], Collective::SendRecv, "sp");
  ASSERT_TRUE(ring);
  // Keys (scores) and values (context) each travel n - 1 steps forward and
  // their gradients n - 1 steps back: 4 transfers per layer of 3/4 of a
  // [b, s, h] bf16 tensor.
  EXPECT_EQ(ring->calls, 4 * 4);
  EXPECT_DOUBLE_EQ(ring->bytes, 4 * 4 * (2.0 * 1024 * 1024 * 2) * 3 / 4);
  EXPECT_FALSE(find(e->stages[0], Collective::AllGather, "sp"));
}

TEST(Estimator, TraceTasksNeverOverlapOnARank) {
  Graph graph = smallGpt(8);
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy s;
  s.pp = 4;
  s.microbatches = 8;
  s.schedule = Schedule::Interleaved;
  s.virtualStages = 2;
  std::string error;
  auto e = estimate(graph, s, cluster, error);
  ASSERT_TRUE(e) << error;
  // Every forward and backward of every chunk and microbatch, once.
  EXPECT_EQ(e->pipeline.tasks.size(), size_t(4 * 2 * 8 * 2));
  for (int r = 0; r < 4; ++r) {
    std::vector<std::pair<double, double>> spans;
    for (const PipelineTask &t : e->pipeline.tasks)
      if (t.rank == r)
        spans.push_back({t.start, t.end});
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-15);
  }
}

TEST(Estimator, ZeroCountsPaddedShardsAndNormCompletions) {
  Graph graph = smallGpt(2);
  Cluster cluster = *Cluster::preset("dgx-a100");
  double parameters = double(graph.parameterCount()), tensors = 0;
  for (const Value &v : graph.values)
    tensors += v.isParameter && !v.frozen;
  for (int dp : {3, 8}) {
    Strategy strategy;
    strategy.dp = dp;
    strategy.zero = 2;
    strategy.microbatches = 2;
    for (int reductions : {1, 2}) {
      EstimateOptions options;
      options.shardedNormReductions = reductions;
      std::string error;
      auto e = estimate(graph, strategy, cluster, error, nullptr, options);
      ASSERT_TRUE(e) << error;
      // Equal shards of ceil(P / dp) elements (bf16), every microbatch.
      double padded = std::ceil(parameters / dp) * dp * 2;
      const CommTotal *rs = find(e->stages[0], Collective::ReduceScatter, "dp");
      const CommTotal *ag = find(e->stages[0], Collective::AllGather, "dp");
      const CommTotal *ar = find(e->stages[0], Collective::AllReduce, "dp");
      ASSERT_TRUE(rs && ag && ar);
      EXPECT_DOUBLE_EQ(rs->bytes, 2 * padded);
      EXPECT_EQ(rs->calls, 2);
      EXPECT_DOUBLE_EQ(ag->bytes, padded);
      // Two floats per trainable tensor, per completion, and the loss.
      EXPECT_DOUBLE_EQ(ar->bytes, 8 * tensors * reductions + 4);
      EXPECT_EQ(ar->calls, reductions + 1);
    }
  }
}
