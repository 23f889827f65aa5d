//===- TensorGridTest.cpp - 2D, 2.5D and 3D tensor parallelism ------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TensorGrid.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

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

namespace {

/// One GPT layer's share of an estimate: the estimate of two layers less
/// that of one.
struct LayerShare {
  /// Bytes per step by (axis, collective), as the runtime's counters and
  /// the plan's `communication` section count them (the full message sizes).
  std::map<std::pair<std::string, Collective>, double> bytes;
  double parameters = 0, activations = 0;
};

std::optional<Estimate> estimateLayers(TransformerShape shape, int64_t layers, const Strategy &s) {
  shape.layers = layers;
  std::string error;
  std::optional<Estimate> e = estimate(buildTransformer(shape), s, *Cluster::preset("dgx-a100", 8), error);
  EXPECT_TRUE(e) << error;
  return e;
}

/// A GPT whose hidden size, heads and tokens every grid below divides.
TransformerShape gridTestLayer() {
  TransformerShape shape;
  shape.hidden = 512;
  shape.heads = 16;
  shape.seq = 256;
  shape.microbatch = 2;
  shape.vocab = 1024;
  return shape;
}

LayerShare layerShare(const TransformerShape &shape, const Strategy &s) {
  LayerShare share;
  std::optional<Estimate> one = estimateLayers(shape, 1, s), two = estimateLayers(shape, 2, s);
  if (!one || !two)
    return share;
  for (auto [e, sign] : {std::pair{&*two, 1.0}, std::pair{&*one, -1.0}}) {
    for (const StageEstimate &stage : e->stages)
      for (const CommTotal &c : stage.comm)
        share.bytes[{c.axis, c.collective}] += sign * c.bytes;
    share.parameters += sign * e->memory.parameters;
    share.activations += sign * e->memory.activations;
  }
  for (auto it = share.bytes.begin(); it != share.bytes.end();)
    it = it->second == 0 ? share.bytes.erase(it) : std::next(it);
  return share;
}

} // namespace

// Each mode's bytes per layer and grid axis, derived here from the
// algorithms as Colossal-AI's documentation describes them
// (docs/source/en/features/{1D,2D,2p5D,3D}_tensor_parallel.md; Xu et al.
// 2021, Wang et al. 2021, Bian et al. 2021) and from a GPT layer's four
// linear layers, not from the cost graph: Y = X A with X [m, k], A [k, n]
// for (k, n) = (h, 3h) query-key-value, (h, h) output, (h, 4h) and (4h, h)
// MLP, m = batch x sequence tokens.
TEST(TensorGrid, LayerBytesFollowThePapersAlgorithms) {
  TransformerShape shape = gridTestLayer();
  const double h = double(shape.hidden), m = double(shape.microbatch * shape.seq), e = 2; // bf16
  // Sums over the layer's linears of |X|, |A| and |Y| in bytes.
  const double sumX = (h + h + h + 4 * h) * m * e, sumA = (3 * h * h + h * h + 4 * h * h + 4 * h * h) * e,
               sumY = (3 * h + h + 4 * h + h) * m * e;
  // Layer norm: its two statistics per row reduced over the ranks that split
  // the hidden dimension, forward and backward (Optimus, section 3), as
  // fp32; two norms per layer.
  auto normBytes = [&](double rowsPerRank) { return 2 * 4 * rowsPerRank * 4; };
  using Key = std::pair<std::string, Collective>;
  for (int q : {2, 4}) {
    {
      // 2D on q x q: q SUMMA steps, each broadcasting an X block |X|/q^2 in
      // its row and an A block |A|/q^2 in its column; the backward pass
      // makes dX = dY A^T (broadcast A, reduce dX blocks) and dW = X^T dY
      // (broadcast X, reduce dW blocks), q steps each.
      Strategy s;
      s.tp = q * q;
      s.tpMode = TensorMode::TwoD;
      LayerShare share = layerShare(shape, s);
      std::map<Key, double> expected = {
          {{"tp_col", Collective::Broadcast}, 2 * q * sumX / (q * q)},
          {{"tp_row", Collective::Broadcast}, 2 * q * sumA / (q * q)},
          {{"tp_col", Collective::Reduce}, q * sumX / (q * q)},
          {{"tp_row", Collective::Reduce}, q * sumA / (q * q)},
          {{"tp_col", Collective::AllReduce}, normBytes(m / q)},
      };
      EXPECT_EQ(share.bytes, expected) << "2D, q = " << q;
    }
    {
      // 2.5D on q x q x d: X split into d layers of q x q blocks, each layer
      // a SUMMA on its own; A's blocks are on every layer, so their gradient
      // is summed over the depth.
      int d = 2;
      Strategy s;
      s.tp = q * q * d;
      s.tpMode = TensorMode::TwoPointFiveD;
      s.tpDepth = d;
      LayerShare share = layerShare(shape, s);
      std::map<Key, double> expected = {
          {{"tp_col", Collective::Broadcast}, 2 * q * sumX / (d * q * q)},
          {{"tp_row", Collective::Broadcast}, 2 * q * sumA / (q * q)},
          {{"tp_col", Collective::Reduce}, q * sumX / (d * q * q)},
          {{"tp_row", Collective::Reduce}, q * sumA / (q * q)},
          {{"tp_depth", Collective::AllReduce}, sumA / (q * q)},
          {{"tp_col", Collective::AllReduce}, normBytes(m / (d * q))},
      };
      EXPECT_EQ(share.bytes, expected) << "2.5D, q = " << q;
    }
    {
      // 3D on q x q x q: forward all-gathers X (to |X|/q^2) and A (to
      // |A|/q^2) and reduce-scatters the partial Y (|Y|/q^2); backward
      // all-gathers dY and reduce-scatters dX and dA.
      Strategy s;
      s.tp = q * q * q;
      s.tpMode = TensorMode::ThreeD;
      LayerShare share = layerShare(shape, s);
      std::map<Key, double> expected = {
          {{"tp_depth", Collective::AllGather}, sumX / (q * q)},
          {{"tp_row", Collective::AllGather}, sumA / (q * q)},
          {{"tp_col", Collective::ReduceScatter}, sumY / (q * q)},
          {{"tp_col", Collective::AllGather}, sumY / (q * q)},
          {{"tp_depth", Collective::ReduceScatter}, sumX / (q * q)},
          {{"tp_row", Collective::ReduceScatter}, sumA / (q * q)},
          {{"tp_col", Collective::AllReduce}, normBytes(m / (q * q))},
      };
      EXPECT_EQ(share.bytes, expected) << "3D, q = " << q;
    }
  }
  // 1D (Megatron): one all-reduce of [m, h] after each row-parallel layer
  // forward and one before each column-parallel layer backward; and the
  // optimizer's norms completed over the axis, twice (the gradient norm and
  // LAMB's trust ratios), two floats for each of the 6 split tensors (the 4
  // weights and the column layers' 2 biases).
  Strategy s;
  s.tp = 4;
  std::map<Key, double> expected = {{{"tp", Collective::AllReduce}, 4 * m * h * e + 2 * 8 * 6}};
  EXPECT_EQ(layerShare(shape, s).bytes, expected);
}

// Memory per rank of one layer against one rank's, as the documentation's
// efficiency tables give it: parameters 1/q^2 (2D, 2.5D) and 1/q^3 (3D),
// activations 1/q^2, 1/(d q^2) and 1/q^3 (1D keeps the activations between
// its blocks whole, and parameters 1/P only for the split matrices).
TEST(TensorGrid, LayerMemoryFollowsThePapersTables) {
  TransformerShape shape = gridTestLayer();
  LayerShare one = layerShare(shape, Strategy());
  ASSERT_GT(one.parameters, 0);
  for (auto [mode, q, d, parameterShare, activationShare] :
       {std::tuple{TensorMode::TwoD, 2, 1, 4, 4}, std::tuple{TensorMode::TwoD, 4, 1, 16, 16},
        std::tuple{TensorMode::TwoPointFiveD, 2, 2, 4, 8}, std::tuple{TensorMode::TwoPointFiveD, 4, 2, 16, 32},
        std::tuple{TensorMode::ThreeD, 2, 2, 8, 8}, std::tuple{TensorMode::ThreeD, 4, 4, 64, 64}}) {
    Strategy s;
    s.tpMode = mode;
    s.tp = mode == TensorMode::ThreeD ? q * q * q : q * q * d;
    s.tpDepth = mode == TensorMode::TwoPointFiveD ? d : 1;
    LayerShare share = layerShare(shape, s);
    EXPECT_DOUBLE_EQ(share.parameters * parameterShare, one.parameters) << nameOf(mode) << " q=" << q;
    EXPECT_DOUBLE_EQ(share.activations * activationShare, one.activations) << nameOf(mode) << " q=" << q;
  }
}

// A grid whose blocks do not divide the model is refused, naming the op and
// the dimension (1D's factor check does the same for its axis).
TEST(TensorGrid, GridsThatDoNotDivideAreRefusedByName) {
  TransformerShape shape;
  shape.layers = 2;
  shape.hidden = 768;
  shape.heads = 6;
  shape.seq = 1024;
  shape.vocab = 50304;
  Graph graph = buildTransformer(shape);
  Cluster cluster = *Cluster::preset("dgx-a100", 8);
  std::string error;
  Strategy s;
  s.tp = 16;
  s.tpMode = TensorMode::TwoD;
  // 6 heads on the 4 columns of a 4 x 4 grid.
  EXPECT_FALSE(estimate(graph, s, cluster, error));
  EXPECT_EQ(error, "op layers.0.attn.qkv: factor heads of size 6 does not divide 4 ways over the 4 x 4 grid of "
                   "tp_mode 2d");
  // 3D splits each layer's output features q^2 = 16 ways: 50257 does not.
  shape.heads = 12;
  shape.vocab = 50257;
  graph = buildTransformer(shape);
  s.tp = 8;
  s.tpMode = TensorMode::ThreeD;
  EXPECT_FALSE(estimate(graph, s, cluster, error));
  EXPECT_EQ(error, "op embed: factor vocab of size 50257 does not divide 4 ways over the 2 x 2 x 2 grid of tp_mode 3d");
  // 2.5D splits a microbatch's tokens q d ways.
  shape.vocab = 50304;
  shape.seq = 2;
  graph = buildTransformer(shape);
  s.tp = 8;
  s.tpMode = TensorMode::TwoPointFiveD;
  s.tpDepth = 2;
  EXPECT_FALSE(estimate(graph, s, cluster, error));
  EXPECT_EQ(error, "op embed: its batch x sequence tokens of size 2 does not divide 4 ways over the 2 x 2 x 2 grid of "
                   "tp_mode 2.5d");
  shape.seq = 1024;
  EXPECT_TRUE(estimate(buildTransformer(shape), s, cluster, error)) << error;
}
