//===- KeptActivationsTest.cpp - what a step holds for its backward pass --===//
//
// The rules the estimator's activation memory follows on hand-built graphs
// whose bytes can be counted by hand: a value two ops keep is held once;
// selective recomputation keeps what its re-run ops start from; the peak is
// what is kept plus the backward pass's transient, where it falls (a
// weight's gradient included, made in the weight's layout); a remade
// tensor lives only between its readers' backward passes; the head's
// backward pass runs after the loss's tensors are freed, the embedding's
// after the layers' (and without layers, each op's after the later ones').
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Estimator.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

namespace {

/// out[rows, width] = x[rows, in] w[in, width], in layer `layer`, keeping
/// its input for the weight's gradient.
Op linear(Graph &g, int x, int64_t rows, int64_t in, int64_t width, int layer, int &out) {
  Op op;
  op.name = "linear";
  op.kind = OpKind::MatMul;
  op.layer = layer;
  op.factors = {{"rows", rows, FactorKind::Parallel}, {"in", in, FactorKind::Reduction},
                {"width", width, FactorKind::Parallel}};
  op.inputs = {{x, {{0}, {1}}}, {g.addValue("w", DType::F32, true), {{1}, {2}}}};
  out = g.addValue("y", DType::F32);
  g.values[size_t(out)].producer = int(g.ops.size());
  op.outputs = {{out, {{0}, {2}}}};
  op.saved = {{{{0}, {1}}, DType::F32, false, 0}};
  return op;
}

/// out = gelu(x) over [rows, width], keeping its input.
Op gelu(Graph &g, int x, int64_t rows, int64_t width, int layer, int &out) {
  Op op;
  op.name = "gelu";
  op.layer = layer;
  op.factors = {{"rows", rows, FactorKind::Parallel}, {"width", width, FactorKind::Parallel}};
  op.inputs = {{x, {{0}, {1}}}};
  out = g.addValue("g", DType::F32);
  g.values[size_t(out)].producer = int(g.ops.size());
  op.outputs = {{out, {{0}, {1}}}};
  op.saved = {{{{0}, {1}}, DType::F32, false, 0}};
  return op;
}

/// A scalar loss over logits [rows, classes] and integer labels, keeping
/// the logits.
Op loss(Graph &g, int logits, int64_t rows, int64_t classes) {
  Op op;
  op.name = "loss";
  op.kind = OpKind::Loss;
  op.factors = {{"rows", rows, FactorKind::Reduction}, {"classes", classes, FactorKind::Reduction}};
  op.inputs = {{logits, {{0}, {1}}}, {g.addValue("labels", DType::I64), {{0}}}};
  int value = g.addValue("loss", DType::F32);
  g.values[size_t(value)].producer = int(g.ops.size());
  op.outputs = {{value, {}}};
  op.saved = {{{{0}, {1}}, DType::F32, false, 0}};
  return op;
}

/// The residual stream entering the layers, [rows, width] floats, made
/// before them by an op keeping nothing (an embedding's lookup): an
/// activation, unlike the step's inputs, which are the trainer's.
int stream(Graph &g, int64_t rows, int64_t width) {
  Op op;
  op.name = "embedding";
  op.factors = {{"rows", rows, FactorKind::Parallel}, {"width", width, FactorKind::Parallel}};
  int out = g.addValue("x", DType::F32);
  g.values[size_t(out)].producer = int(g.ops.size());
  op.outputs = {{out, {{0}, {1}}}};
  g.ops.push_back(op);
  return out;
}

struct OneRank {
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy strategy;
  Mesh mesh = buildMesh(strategy, cluster);
};

/// One layer on x [8, 4]: y = linear(x) [8, width], z = gelu(y), then
/// linear(z) [8, 4].
Graph linearGeluLinear(int64_t width) {
  Graph g;
  g.numLayers = 1;
  int x = stream(g, 8, 4), y = -1, z = -1, out = -1;
  g.ops.push_back(linear(g, x, 8, 4, width, 0, y));
  g.ops.push_back(gelu(g, y, 8, width, 0, z));
  g.ops.push_back(linear(g, z, 8, width, 4, 0, out));
  return g;
}

/// The estimator's activation peak for `g` on one rank (-1 when it fails).
double peakActivations(const Graph &g, Recompute recompute = Recompute::None) {
  OneRank r;
  r.strategy.recompute = recompute;
  std::string error;
  std::optional<Estimate> e = estimate(g, r.strategy, r.cluster, error);
  EXPECT_TRUE(e) << error;
  return e ? e->memory.activations : -1;
}

TEST(KeptActivations, AValueTwoOpsKeepIsHeldOnce) {
  Graph g;
  g.numLayers = 1;
  int x = stream(g, 8, 4), h = -1, a = -1, b = -1;
  g.ops.push_back(gelu(g, x, 8, 4, 0, h));
  // Two projections of the same activation (separate Q and K, say): its
  // 8 x 4 floats are held once, not once per reader.
  g.ops.push_back(linear(g, h, 8, 4, 3, 0, a));
  g.ops.push_back(linear(g, h, 8, 4, 5, 0, b));
  OneRank r;
  GraphSharding sharding = shardGraph(g, r.strategy, r.mesh);
  // gelu keeps x, the projections keep h once.
  EXPECT_EQ(savedActivationBytes(g, sharding, r.mesh, Recompute::None, 0, false), 2 * 8 * 4 * 4);
}

TEST(KeptActivations, SelectiveKeepsWhatTheReRunOpsStartFrom) {
  // linear -> gelu -> linear in one layer: under selective recomputation
  // gelu runs again, so its saved input (the first linear's result) is
  // kept and the second linear's saved input (gelu's result) is not.
  Graph g = linearGeluLinear(16);
  g.ops[2].recomputedWhenSelective = true;
  g.ops[3].saved[0].recomputedWhenSelective = true;
  OneRank r;
  GraphSharding sharding = shardGraph(g, r.strategy, r.mesh);
  double x4 = 8 * 4 * 4, y16 = 8 * 16 * 4;
  EXPECT_EQ(savedActivationBytes(g, sharding, r.mesh, Recompute::None, 0, false), x4 + 2 * y16);
  EXPECT_EQ(savedActivationBytes(g, sharding, r.mesh, Recompute::Selective, 0, false), x4 + y16);
  // Had nothing kept y for gelu's own gradient, the re-run would still
  // start from it: it is kept as the recomputation's source.
  g.ops[2].saved.clear();
  EXPECT_EQ(savedActivationBytes(g, sharding, r.mesh, Recompute::Selective, 0, false), x4 + y16);
}

TEST(KeptActivations, FullRecomputationKeepsTheStreamNotTheWeightALayerOpensWith) {
  // The layer opens with a weight's transposed view (w [6, 4] read as
  // [4, 6]), then y = linear(x, view) [8, 6] and z = gelu(y).
  Graph g;
  g.numLayers = 1;
  int x = stream(g, 8, 4), y = -1, z = -1;
  Op view;
  view.name = "transpose";
  view.layer = 0;
  view.weightView = true;
  view.factors = {{"out", 6, FactorKind::Parallel}, {"in", 4, FactorKind::Parallel}};
  view.inputs = {{g.addValue("w", DType::F32, true), {{0}, {1}}}};
  int viewed = g.addValue("w^T", DType::F32);
  g.values[size_t(viewed)].producer = int(g.ops.size());
  view.outputs = {{viewed, {{1}, {0}}}};
  g.ops.push_back(view);
  g.ops.push_back(linear(g, x, 8, 4, 6, 0, y));
  g.ops.back().inputs[1].value = viewed;
  g.ops.push_back(gelu(g, y, 8, 6, 0, z));
  OneRank r;
  GraphSharding sharding = shardGraph(g, r.strategy, r.mesh);
  // The layer's checkpoint is x (8 x 4 floats), not the weight (6 x 4).
  EXPECT_EQ(savedActivationBytes(g, sharding, r.mesh, Recompute::Full, 0, false), 8 * 4 * 4);
  EXPECT_EQ(savedActivationBytes(g, sharding, r.mesh, Recompute::None, 0, false), 8 * 4 * 4 + 8 * 6 * 4);
}

TEST(KeptActivations, AProductFreesItsSecondFactorBetweenItsGradients) {
  // a = gelu(x), b = gelu(x), c = a * b (SwiGLU's shape), one layer, all
  // [8, 4] floats (128 B).
  Graph g;
  g.numLayers = 1;
  int x = stream(g, 8, 4), a = -1, b = -1;
  g.ops.push_back(gelu(g, x, 8, 4, 0, a));
  g.ops.push_back(gelu(g, x, 8, 4, 0, b));
  Op product;
  product.name = "mul";
  product.layer = 0;
  product.gradientsInTurn = true;
  product.factors = {{"rows", 8, FactorKind::Parallel}, {"width", 4, FactorKind::Parallel}};
  product.inputs = {{a, {{0}, {1}}}, {b, {{0}, {1}}}};
  int c = g.addValue("c", DType::F32);
  g.values[size_t(c)].producer = int(g.ops.size());
  product.outputs = {{c, {{0}, {1}}}};
  product.saved = {{{{0}, {1}}, DType::F32, false, 0}, {{{0}, {1}}, DType::F32, false, 1}};
  g.ops.push_back(product);
  // Kept: x, a and b (384). The product's backward holds c's gradient, a's
  // (made from b), then b's (made from a, b freed by then): 256 beside a
  // and b, with the stream's (128).
  EXPECT_EQ(peakActivations(g), 384 + 256 + 128);
  // Holding b beside both gradients would be 128 more.
  g.ops.back().gradientsInTurn = false;
  EXPECT_EQ(peakActivations(g), 384 + 384 + 128);
}

TEST(KeptActivations, ThePeakAddsTheBackwardTransientWhereItFalls) {
  // A layer (linear keeping x) and a loss after it keeping its logits.
  Graph g;
  g.numLayers = 1;
  int x = stream(g, 8, 4), logits = -1;
  g.ops.push_back(linear(g, x, 8, 4, 6, 0, logits));
  g.ops.push_back(loss(g, logits, 8, 6));
  // Kept: x (128 B) and the logits (192 B). As the backward pass starts the
  // loss's gradients are in flight: the scalar's (4 B) and the logits'
  // (192 B), on top of 320; inside the layer the logits are freed and the
  // linear's output gradient (192 B), its input's (128 B), its weight's
  // (4 x 6 floats, 96 B) and the stream's (x's size, 128 B) are in flight,
  // on top of 128. The larger: 128 + 544.
  EXPECT_EQ(peakActivations(g), 128 + 192 + 128 + 96 + 128);
}

TEST(KeptActivations, ARemadeTensorLivesBetweenItsReadersBackwardPasses) {
  // One layer of two branches from its input x, all [8, 4] floats (128 B):
  // a = gelu(x), b = gelu(a); c = gelu(x), d = gelu(c). Under full
  // recomputation x is kept; a is made again for b's backward and c for
  // d's, each freed after it: never both at once.
  Graph g;
  g.numLayers = 1;
  int x = stream(g, 8, 4), a = -1, b = -1, c = -1, d = -1;
  g.ops.push_back(gelu(g, x, 8, 4, 0, a));
  g.ops.push_back(gelu(g, a, 8, 4, 0, b));
  g.ops.push_back(gelu(g, x, 8, 4, 0, c));
  g.ops.push_back(gelu(g, c, 8, 4, 0, d));
  // Kept: x (128). At d's backward: its output's and input's gradients
  // (256), the residual stream's gradient (x's size, 128) and the remade c
  // (128); a is not alive yet. Holding the whole layer's remade tensors at
  // once would say 128 more.
  EXPECT_EQ(peakActivations(g, Recompute::Full), 128 + 256 + 128 + 128);
}

TEST(KeptActivations, TheHeadsBackwardPassRunsAfterTheLossFreesItsTensors) {
  // h = gelu(x) in the layer; after it a head projects h to logits [8, 6]
  // (keeping h) and a loss keeps the logits.
  Graph g;
  g.numLayers = 1;
  int x = stream(g, 8, 4), h = -1, logits = -1;
  g.ops.push_back(gelu(g, x, 8, 4, 0, h));
  g.ops.push_back(linear(g, h, 8, 4, 6, -1, logits));
  g.ops.back().transposedForGradient = {0};
  g.ops.push_back(loss(g, logits, 8, 6));
  // Kept: x (128), h (128), the logits (192). The loss's backward holds
  // the gradients of its scalar (4) and of the logits (192). The head's:
  // the logits' gradient (192), h's (128), h transposed for the weight's
  // gradient (128) and the weight's (4 x 6 floats, 96), but the logits
  // themselves (192) are freed by then: 352 on top of what is kept.
  EXPECT_EQ(peakActivations(g), 448 + 352);
  // A product reading h transposed in place needs 128 less.
  g.ops[2].transposedForGradient.clear();
  EXPECT_EQ(peakActivations(g), 448 + 224);
}

TEST(KeptActivations, ALayersLaterOpsHaveFreedWhatTheyKeptWhenItsEarlierOnesRun) {
  // y = linear(x) [8, 64], z = gelu(y), u = linear(z) [8, 4], one layer.
  Graph g = linearGeluLinear(64);
  // Kept: x (128), y (2048), z (2048). The second linear's backward holds
  // u's gradient, z's and its weight's (128 + 2048 + 1024), with the
  // stream's (x's size, 128). gelu's holds z's and y's (4096), but the
  // second linear has freed z by then: 2048 more, not 4096. The larger:
  // 3328.
  EXPECT_EQ(peakActivations(g), 128 + 2048 + 2048 + 3328);
}

TEST(KeptActivations, WithoutLayersEachOpsBackwardPassFollowsWhatTheLaterOnesFreed) {
  // No layers: y = linear(x) [8, 16], z = gelu(y), u = linear(z) [8, 6], a
  // loss over u.
  Graph g;
  g.numLayers = 0;
  int x = g.addValue("x", DType::F32), y = -1, z = -1, u = -1;
  g.ops.push_back(linear(g, x, 8, 4, 16, -1, y));
  g.ops.push_back(gelu(g, y, 8, 16, -1, z));
  g.ops.push_back(linear(g, z, 8, 16, 6, -1, u));
  g.ops.push_back(loss(g, u, 8, 6));
  // Kept: y (512), z (512), u (192): 1216 (x is the step's input, the
  // trainer's). The second linear's backward holds u's, z's and its
  // weight's gradients (192 + 512 + 384), the loss's u freed by then: 896
  // on top; the others hold less (the loss 196; gelu 1024 less z and u;
  // the first linear 768 less all of them).
  EXPECT_EQ(peakActivations(g), 1216 + 896);
}

TEST(KeptActivations, AnOpBeforeTheLayersMakesItsGradientsOnceTheLayersFreedTheirs) {
  // a = x E [8, 64] x [64, 4] before the layer (E: 1024 B), b = gelu(a) in
  // it, c = linear(b) [8, 2] after it.
  Graph g;
  g.numLayers = 1;
  int x = g.addValue("x", DType::F32), a = -1, b = -1, c = -1;
  g.ops.push_back(linear(g, x, 8, 64, 4, -1, a));
  g.ops.push_back(gelu(g, a, 8, 4, 0, b));
  g.ops.push_back(linear(g, b, 8, 4, 2, -1, c));
  // Kept: a and b (128 each; x is the step's input). E's gradient is made
  // last, with a's (128), when the layer has freed what it kept: 1152.
  // (Against everything kept it would weigh 256 + 1152.)
  EXPECT_EQ(peakActivations(g), 1152);
}

TEST(KeptActivations, ATiedWeightsGradientWaitsThroughTheLayers) {
  // a = x E [8, 2] x [2, 4] before the layer, b = gelu(a) in it, c = b F
  // [8, 4] x [4, 2] after it. Tied, F is E read transposed: the head's
  // gradient of E is held until the embedding's is added to it.
  auto build = [](bool tied) {
    Graph g;
    g.numLayers = 1;
    int x = g.addValue("x", DType::F32), a = -1, b = -1, c = -1;
    g.ops.push_back(linear(g, x, 8, 2, 4, -1, a));
    g.ops.push_back(gelu(g, a, 8, 4, 0, b));
    g.ops.push_back(linear(g, b, 8, 4, 2, -1, c));
    if (tied)
      g.ops[2].inputs[1] = {g.ops[0].inputs[1].value, {{2}, {1}}};
    return g;
  };
  // Kept: a and b (128 each; x is the step's input). As the backward pass
  // starts the head holds c's, b's and its weight's gradients (64 + 128 +
  // 32); in the layer gelu holds b's and a's (256) and the stream's (128),
  // the head's kept b freed: 256 + 224 against 256 - 128 + 384.
  EXPECT_EQ(peakActivations(build(false)), 256 - 128 + 384);
  // Tied, the layer's backward also holds E's gradient (2 x 4 floats).
  EXPECT_EQ(peakActivations(build(true)), 256 - 128 + 384 + 32);
}

/// c = a * b over [8, 4], in layer `layer`, keeping a (and b if
/// `keepsB`).
Op product(Graph &g, int a, int b, int layer, bool keepsB, int &out) {
  Op op;
  op.name = "mul";
  op.layer = layer;
  op.factors = {{"rows", 8, FactorKind::Parallel}, {"width", 4, FactorKind::Parallel}};
  op.inputs = {{a, {{0}, {1}}}, {b, {{0}, {1}}}};
  out = g.addValue("c", DType::F32);
  g.values[size_t(out)].producer = int(g.ops.size());
  op.outputs = {{out, {{0}, {1}}}};
  op.saved = {{{{0}, {1}}, DType::F32, false, 0}};
  if (keepsB)
    op.saved.push_back({{{0}, {1}}, DType::F32, false, 1});
  return op;
}

TEST(KeptActivations, APipelineStageMakesATableOfTheWeightsAgainRatherThanKeepIt) {
  // A table t [8, 4] made before the layers (a rotary table from a frozen
  // buffer, or from the batch), and two layers each multiplying the stream
  // by it: a = x * t in layer 0, b = a * t in layer 1.
  enum Source { Weights, Batch };
  auto build = [](Source source, bool keepsTable) {
    Graph g;
    g.numLayers = 2;
    int x = stream(g, 8, 4), t = -1, a = -1, b = -1;
    int from = g.addValue("source", DType::F32, source == Weights);
    g.values[size_t(from)].frozen = source == Weights;
    g.ops.push_back(gelu(g, from, 8, 4, -1, t));
    g.ops.back().saved.clear();
    g.ops.push_back(product(g, x, t, 0, keepsTable, a));
    g.ops.push_back(product(g, a, t, 1, keepsTable, b));
    return g;
  };
  auto plan = [](const Graph &g, int pp) {
    Cluster cluster = *Cluster::preset("dgx-a100");
    Strategy strategy;
    strategy.pp = pp;
    strategy.microbatches = 1;
    std::string error;
    std::optional<Estimate> e = estimate(g, strategy, cluster, error);
    EXPECT_TRUE(e) << error;
    return e ? *e : Estimate();
  };
  auto activations = [&](const Graph &g, int pp) {
    std::vector<double> perStage;
    for (const StageEstimate &stage : plan(g, pp).stages)
      perStage.push_back(stage.memory.activations);
    return perStage;
  };
  // What the first stage sends the second per step.
  auto sent = [&](const Graph &g) {
    Estimate e = plan(g, 2);
    for (const CommTotal &t : e.stages.empty() ? std::vector<CommTotal>() : e.stages[0].comm)
      if (t.collective == Collective::SendRecv && t.axis == "pp")
        return t.bytes;
    return 0.0;
  };
  // One stage keeps the table once (128 B) for both layers' backward passes.
  EXPECT_EQ(activations(build(Weights, true), 1)[0] - activations(build(Weights, false), 1)[0], 128);
  // Two stages each make it again from the weights, forward and backward:
  // neither keeps it nor is it sent.
  EXPECT_EQ(activations(build(Weights, true), 2), activations(build(Weights, false), 2));
  EXPECT_EQ(sent(build(Weights, true)), 128); // a alone
  // Made from the batch, it is made once on the first stage, kept there
  // and sent to the second, which keeps what it received.
  std::vector<double> fromBatch = activations(build(Batch, true), 2), without = activations(build(Batch, false), 2);
  ASSERT_EQ(fromBatch.size(), 2u);
  EXPECT_EQ(fromBatch[0] - without[0], 128);
  EXPECT_EQ(fromBatch[1] - without[1], 128);
  EXPECT_EQ(sent(build(Batch, true)), 256); // a and t
}

} // namespace
