//===- KernelRatesTest.cpp - measured kernel rates in the estimate --------===//
//
// A description with kernel rates prices a contraction by its three GEMM
// shapes, a memory-bound op by a call plus bytes over its kind's rate, and
// the optimizer by its measured traffic rate; the grid reads between its
// points multilinearly in the logs of the sizes. Expected times are worked
// out here from the rates, not read back from the estimator.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Communication.h"
#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace colossal::cost;

namespace {

/// 0.1 at (64, 64, 64), rising by 0.1, 0.2 and 0.3 per factor of 4 in m, n
/// and k: linear in the logs, so multilinear reading is exact between
/// grid points.
double planted(double m, double n, double k) {
  auto steps = [](double x) { return std::log(x / 64) / std::log(4.0); };
  return 0.1 + 0.1 * steps(m) + 0.2 * steps(n) + 0.3 * steps(k);
}

KernelRates plantedGrid() {
  KernelRates rates;
  for (double m : {64, 256})
    for (double n : {64, 256})
      for (double k : {64, 256})
        rates.gemm.push_back({m, n, k, planted(m, n, k)});
  rates.indexGemmGrid();
  return rates;
}

/// One device of 100 GFLOP/s with the planted GEMM grid, memory so fast the
/// roofline's byte term vanishes.
Cluster measuredDevice() {
  Cluster c = *Cluster::preset("dgx-a100");
  c.gpusPerNode = 1;
  c.peakFlops = {{DType::F32, 1e11}};
  c.memoryBandwidth = 1e30;
  c.kernels = plantedGrid();
  return c;
}

/// y[rows, width] = x[rows, in] w[in, width]: x is the step's input, w a
/// weight; both operands' gradients counted (backward = 2 x forward FLOPs).
Graph oneLinear(int64_t rows, int64_t in, int64_t width) {
  Graph g;
  Op op;
  op.name = "linear";
  op.kind = OpKind::MatMul;
  op.factors = {
      {"rows", rows, FactorKind::Parallel}, {"in", in, FactorKind::Reduction}, {"width", width, FactorKind::Parallel}};
  op.inputs = {{g.addValue("x", DType::F32), {{0}, {1}}}, {g.addValue("w", DType::F32, true), {{1}, {2}}}};
  int out = g.addValue("y", DType::F32);
  g.values[size_t(out)].producer = 0;
  op.outputs = {{out, {{0}, {2}}}};
  op.forwardFlops = 2.0 * double(rows * in * width);
  op.backwardFlops = 2 * op.forwardFlops;
  g.ops.push_back(op);
  return g;
}

} // namespace

TEST(KernelRates, GemmEfficiencyIsMultilinearInTheLogsBetweenGridPoints) {
  KernelRates rates = plantedGrid();
  EXPECT_NEAR(rates.gemmEfficiency(64, 64, 64), 0.1, 1e-12);
  EXPECT_NEAR(rates.gemmEfficiency(256, 256, 256), 0.7, 1e-12);
  EXPECT_NEAR(rates.gemmEfficiency(128, 128, 128), planted(128, 128, 128), 1e-12);
  EXPECT_NEAR(rates.gemmEfficiency(100, 200, 80), planted(100, 200, 80), 1e-12);
  // Off the grid: its edge.
  EXPECT_NEAR(rates.gemmEfficiency(4096, 16, 64), planted(256, 64, 64), 1e-12);
}

TEST(KernelRates, JsonRoundTripsAndBadRatesNameTheField) {
  Cluster c = measuredDevice();
  c.kernels.attentionForward = {{64, 0.05}, {512, 0.06}};
  c.kernels.attentionBackward = {{64, 0.03}, {512, 0.04}};
  c.kernels.streaming[KernelKind::Norm] = {{1e-6, 5e9}, {2e-6, 2e9}};
  c.kernels.optimizerBytesPerSecond = 8e9;
  c.kernels.aloneSpeedupOptimizer = 1.5;
  std::string text = c.toJson().dump(), error;
  auto parsed = Json::parse(text, error);
  ASSERT_TRUE(parsed) << error;
  auto back = Cluster::fromJson(*parsed, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->toJson().dump(), text);
  EXPECT_NEAR(back->kernels.gemmEfficiency(128, 128, 128), planted(128, 128, 128), 1e-12);

  auto withKernels = [&](const std::string &kernels) {
    std::string error;
    auto json = Json::parse(R"({"name": "x", "nodes": 1, "devices_per_node": 1, "peak_flops": {"fp32": 1e11},
        "memory_bytes": 8e9, "memory_bandwidth_bytes_per_s": 2e10,
        "intra_node": {"bandwidth_bytes_per_s": 1e9}, "inter_node": {"bandwidth_bytes_per_s": 1e9},
        "kernels": )" + kernels +
                                "}",
                            error);
    EXPECT_TRUE(json) << error;
    EXPECT_FALSE(Cluster::fromJson(*json, error));
    return error;
  };
  EXPECT_EQ(withKernels(R"({"streaming": {"gemv": {}}})"),
            "kernels.streaming.gemv: not a kernel kind (elementwise, transcendental, norm, softmax, loss, embedding)");
  EXPECT_EQ(withKernels(R"({"gemm_by_shape": [{"m": 1, "n": 1, "k": 1, "efficiency": 1.5}]})"),
            "kernels.gemm_by_shape[0].efficiency: above 1 (1.500000)");
  EXPECT_EQ(withKernels(R"({"streaming": {"norm": {"forward": {"call_s": 0, "bytes_per_s": 1e9}}}})"),
            "kernels.streaming.norm.backward: missing");
}

// The forward is [m, k] x [k, n]; the backward makes the input's gradient
// ([m, n] x [n, k]) and the weight's ([k, m] x [m, n]), each at its own
// shape's efficiency.
TEST(KernelRates, AContractionCostsItsThreeProducts) {
  const double m = 256, k = 64, n = 128, peak = 1e11;
  Graph g = oneLinear(int64_t(m), int64_t(k), int64_t(n));
  std::string error;
  auto e = estimate(g, Strategy{}, measuredDevice(), error);
  ASSERT_TRUE(e) << error;
  auto seconds = [&](double a, double b, double c) { return 2 * a * b * c / (peak * planted(a, b, c)); };
  EXPECT_NEAR(e->stages[0].computeForward, seconds(m, n, k), 1e-12);
  EXPECT_NEAR(e->stages[0].computeBackward, seconds(m, k, n) + seconds(k, n, m), 1e-12);
  // Without kernel rates: the roofline at the peak (efficiency 1 by FLOPs).
  Cluster roofline = measuredDevice();
  roofline.kernels = KernelRates{};
  roofline.gemmEfficiency.clear();
  auto r = estimate(g, Strategy{}, roofline, error);
  ASSERT_TRUE(r) << error;
  EXPECT_NEAR(r->stages[0].computeForward, 2 * m * n * k / peak, 1e-12);
}

// A memory-bound op: a call plus its forward bytes over its kind's rate,
// forward and backward; a transcendental op is priced apart from a plain
// elementwise one.
TEST(KernelRates, AMemoryBoundOpCostsACallPlusItsBytes) {
  Graph g;
  Op op;
  op.name = "gelu";
  op.transcendental = true;
  op.factors = {{"rows", 64, FactorKind::Parallel}, {"width", 1000, FactorKind::Parallel}};
  op.inputs = {{g.addValue("x", DType::F32, true), {{0}, {1}}}};
  int out = g.addValue("y", DType::F32);
  g.values[size_t(out)].producer = 0;
  op.outputs = {{out, {{0}, {1}}}};
  op.forwardFlops = 8 * 64000.0;
  op.backwardFlops = 2 * op.forwardFlops;
  g.ops.push_back(op);
  Cluster c = measuredDevice();
  c.kernels.streaming[KernelKind::Transcendental] = {{2e-6, 1e9}, {3e-6, 5e8}};
  c.kernels.streaming[KernelKind::Elementwise] = {{0, 1e12}, {0, 1e12}};
  std::string error;
  auto e = estimate(g, Strategy{}, c, error);
  ASSERT_TRUE(e) << error;
  double bytes = 2 * 64000.0 * 4;
  EXPECT_NEAR(e->stages[0].computeForward, 2e-6 + bytes / 1e9, 1e-15);
  EXPECT_NEAR(e->stages[0].computeBackward, 3e-6 + bytes / 5e8, 1e-15);
}

// With one device of a node busy, kernels run at the measured alone
// speedup; with all busy, at the rates (measured that way); linear between.
TEST(KernelRates, IdleNeighboursSpeedKernelsUpLinearly) {
  KernelRates rates;
  EXPECT_DOUBLE_EQ(rates.speedupWhenBusy(1.6, 1, 4), 1.6);
  EXPECT_DOUBLE_EQ(rates.speedupWhenBusy(1.6, 4, 4), 1.0);
  EXPECT_NEAR(rates.speedupWhenBusy(1.6, 2, 4), 1.4, 1e-12);
  EXPECT_DOUBLE_EQ(rates.speedupWhenBusy(1.6, 1, 1), 1.0);
}

// The optimizer's traffic over its measured rate; offloaded, over the
// host's measured rate.
TEST(KernelRates, TheOptimizerRunsAtItsMeasuredRate) {
  Graph g = oneLinear(64, 64, 64);
  Cluster c = measuredDevice();
  c.kernels.optimizerBytesPerSecond = 4e9;
  c.kernels.hostOptimizerBytesPerSecond = 1e9;
  std::string error;
  auto e = estimate(g, Strategy{}, c, error);
  ASSERT_TRUE(e) << error;
  // fp32 weights: read weight, gradient, master, m, v; write weight,
  // master, m, v: 36 bytes per element (ModelStates.cpp).
  EXPECT_NEAR(e->optimizer, 64 * 64 * 36 / 4e9, 1e-15);
  // Offloaded (ZeRO-1 over two ranks, one node of two devices, both busy):
  // the shard's traffic at the host's rate, plus its gradients down and
  // weights up.
  c.gpusPerNode = 2;
  Strategy offload;
  offload.dp = 2;
  offload.zero = 1;
  offload.offloadOptimizer = true;
  auto o = estimate(g, offload, c, error);
  ASSERT_TRUE(o) << error;
  double shard = 64 * 64 / 2;
  EXPECT_NEAR(o->stages[0].offloadSeconds, shard * 36 / 1e9 + 2 * shard * 4 / c.hostDeviceBandwidth, 1e-15);
}

// The last gradient bucket fills as the backward pass ends, so a model in
// one bucket has its whole all-reduce on the critical path, however long
// the backward pass it might have hidden behind.
TEST(KernelRates, OneGradientBucketIsNotHidden) {
  // Two layers of y = x w on a slow device: a backward pass far longer
  // than the all-reduce.
  Graph g = oneLinear(512, 256, 256);
  g.ops[0].layer = 0;
  Op second = g.ops[0];
  second.layer = 1;
  second.inputs = {{g.ops[0].outputs[0].value, {{0}, {1}}}, {g.addValue("w2", DType::F32, true), {{1}, {2}}}};
  int out = g.addValue("z", DType::F32);
  g.values[size_t(out)].producer = 1;
  second.outputs = {{out, {{0}, {2}}}};
  g.ops.push_back(second);
  g.numLayers = 2;
  Cluster c = *Cluster::preset("dgx-a100");
  c.peakFlops = {{DType::F32, 1e9}};
  Strategy s;
  s.dp = 2;
  std::string error;
  auto e = estimate(g, s, c, error);
  ASSERT_TRUE(e) << error;
  double gradientBytes = 2 * 256 * 256 * bytesOf(DType::F32);
  const MeshAxis *dp = e->mesh.axis("dp");
  ASSERT_TRUE(dp);
  double allReduce = collectiveTime(Collective::AllReduce, gradientBytes, *dp, c);
  ASSERT_GT(e->stages[0].computeBackward, 10 * allReduce);
  EXPECT_GE(e->exposedComm, allReduce);
}

// A fused attention kernel's time is the whole score matrix's FLOPs at the
// kernel's rate for its key length (a decoder's under the causal curve);
// the softmax and dropout it fuses cost nothing apart. Without attention
// rates they are the separate kernels a materialized score matrix needs.
TEST(KernelRates, AFusedAttentionKernelCoversItsSoftmaxAndDropout) {
  TransformerShape shape;
  shape.layers = 1;
  shape.hidden = 256;
  shape.heads = 4;
  shape.seq = 512;
  shape.vocab = 1000;
  shape.microbatch = 2;
  Graph g = buildTransformer(shape);
  auto withAttention = [](double efficiency) {
    Cluster c = *Cluster::preset("dgx-a100");
    c.kernels.causalAttentionForward = {{512, efficiency}};
    c.kernels.causalAttentionBackward = {{512, efficiency / 2}};
    return c;
  };
  std::string error;
  auto fast = estimate(g, Strategy{}, withAttention(0.5), error);
  auto slow = estimate(g, Strategy{}, withAttention(0.25), error);
  ASSERT_TRUE(fast && slow) << error;
  double flops = 4.0 * 2 * 512 * 512 * 256, peak = 312e12; // 4 b s^2 h forward, BF16
  EXPECT_NEAR(slow->stages[0].computeForward - fast->stages[0].computeForward, flops * (4 - 2) / peak, 1e-12);
  EXPECT_NEAR(slow->stages[0].computeBackward - fast->stages[0].computeBackward, 2 * flops * (8 - 4) / peak, 1e-12);

  // A softmax kernel a million times slower changes nothing while fused...
  Cluster crawling = withAttention(0.5);
  crawling.kernels.streaming[KernelKind::Softmax] = {{1, 1}, {1, 1}};
  auto fused = estimate(g, Strategy{}, crawling, error);
  ASSERT_TRUE(fused) << error;
  EXPECT_DOUBLE_EQ(fused->stages[0].computeForward, fast->stages[0].computeForward);
  // ...and costs its call when the score matrix is materialized.
  crawling.kernels.causalAttentionForward.clear();
  crawling.kernels.causalAttentionBackward.clear();
  crawling.kernels.attentionForward.clear();
  crawling.kernels.attentionBackward.clear();
  auto materialized = estimate(g, Strategy{}, crawling, error);
  ASSERT_TRUE(materialized) << error;
  EXPECT_GT(materialized->stages[0].computeForward, 1.0);
}

// Ring attention on P ranks: each rank's queries meet every rank's block of
// keys, so its kernel time is the attention of S/P queries against all S
// keys whether the graph splits the keys' factor over the ring (as a model
// file's graph does: each rank holds its block) or keeps it whole; a causal
// ring waits for its last rank, which sees P - 1/2 of the P blocks. Worked
// out from the flat curve, not read back from the estimator.
TEST(KernelRates, ARingRanksAttentionMeetsEveryBlockOfKeys) {
  const int64_t batch = 2, seq = 256, width = 64, ranks = 4;
  const double peak = 1e11, forwardEfficiency = 0.04, backwardEfficiency = 0.02;
  for (bool causal : {false, true}) {
    Graph g;
    Op op;
    op.name = "attention";
    op.kind = OpKind::MatMul;
    op.attentionCore = true;
    op.causal = causal;
    op.factors = {{"batch", batch, FactorKind::Parallel},
                  {"seq", seq, FactorKind::Parallel},
                  {"kv_seq", seq, FactorKind::Reduction},
                  {"width", width, FactorKind::Parallel}};
    op.inputs = {{g.addValue("q", DType::F32), {{0}, {1}, {3}}},
                 {g.addValue("k", DType::F32), {{0}, {2}, {3}}},
                 {g.addValue("v", DType::F32), {{0}, {2}, {3}}}};
    int out = g.addValue("out", DType::F32);
    g.values[size_t(out)].producer = 0;
    op.outputs = {{out, {{0}, {1}, {3}}}};
    op.forwardFlops = 4.0 * double(batch * seq * seq * width);
    op.backwardFlops = 2 * op.forwardFlops;
    g.ops.push_back(op);

    Cluster c = measuredDevice();
    c.gpusPerNode = int(ranks);
    c.kernels.ringAttentionForward = {{16, forwardEfficiency}, {1024, forwardEfficiency}};
    c.kernels.ringAttentionBackward = {{16, backwardEfficiency}, {1024, backwardEfficiency}};
    Strategy ring;
    ring.sp = int(ranks);
    ring.spMode = SequenceMode::Ring;
    int sp = buildMesh(ring, c).axisIndex("sp");
    ASSERT_GE(sp, 0);
    double busiest = causal ? (double(ranks) - 0.5) / double(ranks) : 1.0;
    double forward = busiest * op.forwardFlops / double(ranks) / (peak * forwardEfficiency);
    double backward = busiest * op.backwardFlops / double(ranks) / (peak * backwardEfficiency);
    for (bool keysSplit : {true, false}) {
      GraphSharding sharding = {{{}, {sp}, keysSplit ? std::vector<int>{sp} : std::vector<int>{}, {}}};
      std::string error;
      auto e = estimate(g, ring, c, error, &sharding);
      ASSERT_TRUE(e) << error;
      SCOPED_TRACE(std::string(causal ? "causal" : "full") + (keysSplit ? ", keys split" : ", keys whole"));
      EXPECT_NEAR(e->stages[0].computeForward, forward, 1e-9 * forward);
      EXPECT_NEAR(e->stages[0].computeBackward, backward, 1e-9 * backward);
    }
  }
}
