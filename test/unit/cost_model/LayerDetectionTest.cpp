//===- LayerDetectionTest.cpp - finding identical layers in a graph -------===//
//
// The builder knows where each transformer's layers are; the detector,
// given the same ops without that knowledge, must find the same layers.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/LayerDetection.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

#include <functional>

using namespace colossal::cost;

namespace {

/// The builder's transformer of `family` with `layers` layers, and the
/// layer the builder put each op in.
Graph builtTransformer(TransformerFamily family, int64_t layers, std::vector<int> &layerOfOp) {
  TransformerShape shape;
  shape.family = family;
  shape.layers = layers;
  shape.hidden = 256;
  shape.heads = 4;
  shape.seq = 64;
  shape.vocab = 1000;
  Graph graph = buildTransformer(shape);
  layerOfOp.clear();
  for (const Op &op : graph.ops)
    layerOfOp.push_back(op.layer);
  return graph;
}

} // namespace

TEST(LayerDetection, FindsTheBuildersLayers) {
  for (TransformerFamily family : {TransformerFamily::GPT, TransformerFamily::BERT, TransformerFamily::LLaMA})
    for (int64_t layers : {2, 3, 12}) {
      std::vector<int> expected;
      Graph graph = builtTransformer(family, layers, expected);
      Graph stripped = graph;
      for (Op &op : stripped.ops)
        op.layer = -1;
      stripped.numLayers = 0;
      DetectedLayers found = detectLayers(stripped);
      EXPECT_EQ(found.layers, layers);
      EXPECT_EQ(stripped.numLayers, layers);
      std::vector<int> got;
      for (const Op &op : stripped.ops)
        got.push_back(op.layer);
      EXPECT_EQ(got, expected) << "family " << int(family) << ", " << layers << " layers";
    }
}

TEST(LayerDetection, NoRepeatedBlockMeansNoLayers) {
  Graph graph;
  int x = graph.addValue("x", DType::F32);
  for (int i = 0; i < 5; ++i) {
    Op op;
    op.name = "op" + std::to_string(i); // every op different
    op.factors = {{"n", 8 << i, FactorKind::Parallel}};
    op.inputs = {{x, {{0}}}};
    int y = graph.addValue("y", DType::F32);
    graph.values[size_t(y)].producer = int(graph.ops.size());
    op.outputs = {{y, {{0}}}};
    graph.ops.push_back(op);
    x = y;
  }
  DetectedLayers found = detectLayers(graph);
  EXPECT_EQ(found.layers, 0);
  EXPECT_EQ(graph.numLayers, 0);
  for (const Op &op : graph.ops)
    EXPECT_EQ(op.layer, -1);
}

TEST(LayerDetection, FindsLayersJoinedByReshardings) {
  // A partitioned graph: every contraction's result and the embedding's
  // reach their readers through a collective (tensor- and vocabulary-
  // parallel sums), a value with no producer of its own, resharded from
  // theirs. The first layer reads its input from such a sum, the others
  // from the previous layer's residual add.
  std::vector<int> expected;
  Graph graph = builtTransformer(TransformerFamily::LLaMA, 3, expected);
  for (Op &op : graph.ops) {
    op.layer = -1;
    for (TensorUse &use : op.inputs) {
      int producer = graph.values[size_t(use.value)].producer;
      if (producer < 0 || (graph.ops[size_t(producer)].kind != OpKind::MatMul &&
                           graph.ops[size_t(producer)].kind != OpKind::Embedding))
        continue;
      int summed = graph.addValue("summed", graph.values[size_t(use.value)].dtype);
      graph.values[size_t(summed)].reshardedFrom = producer;
      use.value = summed;
    }
  }
  graph.numLayers = 0;
  Graph unmarked = graph;
  EXPECT_EQ(detectLayers(graph).layers, 3);
  std::vector<int> got;
  for (const Op &op : graph.ops)
    got.push_back(op.layer);
  EXPECT_EQ(got, expected);
  // Resharded from the wrong op (every sum from the embedding), the same
  // graph's blocks no longer match. (Read as inputs from nowhere they would
  // be data-only ops, which matching skips.)
  for (Value &value : unmarked.values)
    if (value.reshardedFrom >= 0)
      value.reshardedFrom = 0;
  EXPECT_NE(detectLayers(unmarked).layers, 3);
}

namespace {

/// A graph written op by op: each op's inputs and one output, every tensor
/// one dimension of 8.
struct ChainBuilder {
  Graph graph;
  int parameter(const std::string &name) { return graph.addValue(name, DType::F32, /*isParameter=*/true); }
  int data(const std::string &name) { return graph.addValue(name, DType::F32); }
  int op(const std::string &name, OpKind kind, const std::vector<int> &inputs) {
    Op op;
    op.name = name;
    op.kind = kind;
    op.factors = {{"n", 8, FactorKind::Parallel}};
    for (int v : inputs)
      op.inputs.push_back({v, {{0}}});
    int out = graph.addValue(name, DType::F32);
    graph.values[size_t(out)].producer = int(graph.ops.size());
    op.outputs = {{out, {{0}}}};
    graph.ops.push_back(op);
    return out;
  }
};

/// Three decoder-style layers (a norm, a query from the layer's input, a
/// key from a value every layer reads, their sum, the residual) after a
/// stem and an encoder op. `sharedWork` adds to the first layer, before its
/// key, the ops that make that value from the encoder's result (their
/// indices land in `sharedOps`); `starts` receives each layer's first op.
/// With `onlyFirstReads`, the other layers' keys read the encoder's result
/// itself.
Graph layersReadingSharedWork(const std::function<int(ChainBuilder &, int)> &sharedWork, std::vector<int> &starts,
                              std::vector<int> &sharedOps, bool onlyFirstReads = false) {
  ChainBuilder b;
  int embedded = b.op("embedding", OpKind::Embedding, {b.parameter("table"), b.data("tokens")});
  int x = b.op("stem", OpKind::Elementwise, {embedded});
  int memory = b.op("encoder", OpKind::MatMul, {b.data("source"), b.parameter("we")});
  int key = -1;
  starts.clear();
  sharedOps.clear();
  for (int l = 0; l < 3; ++l) {
    starts.push_back(int(b.graph.ops.size()));
    int h = b.op("norm", OpKind::Norm, {x, b.parameter("gamma")});
    int q = b.op("query", OpKind::MatMul, {h, b.parameter("wq")});
    if (l == 0) {
      size_t before = b.graph.ops.size();
      key = sharedWork(b, memory);
      for (size_t o = before; o < b.graph.ops.size(); ++o)
        sharedOps.push_back(int(o));
    }
    int k = b.op("key", OpKind::MatMul, {l > 0 && onlyFirstReads ? memory : key, b.parameter("wk")});
    int s = b.op("scores", OpKind::Elementwise, {q, k});
    x = b.op("residual", OpKind::Elementwise, {x, s});
  }
  b.op("loss", OpKind::Loss, {x, b.data("labels")});
  return b.graph;
}

/// The three layers found whole, the shared work in the first (the layer
/// that reads it first), the ops around them in none.
void expectThreeLayers(Graph &graph, const std::vector<int> &starts, const std::vector<int> &sharedOps) {
  DetectedLayers found = detectLayers(graph);
  EXPECT_EQ(found.layers, 3);
  EXPECT_EQ(found.firstOp, starts[0]);
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    int layer = -1;
    for (int l = 0; l < 3; ++l)
      if (int(o) >= starts[size_t(l)] && (l == 2 ? o + 1 < graph.ops.size() : int(o) < starts[size_t(l) + 1]))
        layer = l;
    EXPECT_EQ(graph.ops[o].layer, layer) << "op " << o << " (" << graph.ops[o].name << ")";
  }
  for (int o : sharedOps)
    EXPECT_EQ(graph.ops[size_t(o)].layer, 0) << "shared op " << o;
}

} // namespace

TEST(LayerDetection, WorkEveryLayerReadsIsSharedNotPartOfTheFirst) {
  std::vector<int> starts, shared;
  // nn.TransformerDecoder after common-subexpression elimination: one
  // transpose of the encoder's memory, in the first layer, for every layer.
  Graph decoder = layersReadingSharedWork(
      [](ChainBuilder &b, int memory) { return b.op("transpose", OpKind::Elementwise, {memory}); }, starts, shared);
  expectThreeLayers(decoder, starts, shared);
  // A T5-style position bias: looked up from the first layer's table by
  // data-only bucket indices, rearranged, added to the padding mask's scores
  // and read by every layer. (The encoder's result is not read at all.)
  Graph t5 = layersReadingSharedWork(
      [](ChainBuilder &b, int) {
        int bias = b.op("bias", OpKind::Embedding, {b.parameter("relative_table"), b.data("buckets")});
        int rearranged = b.op("transpose", OpKind::Elementwise, {bias});
        return b.op("with_mask", OpKind::Elementwise, {rearranged, b.data("mask_scores")});
      },
      starts, shared);
  expectThreeLayers(t5, starts, shared);
  // Work that only the first layer reads is that layer's own: that layer
  // differs from the others, and two blocks are all that repeat.
  Graph own = layersReadingSharedWork(
      [](ChainBuilder &b, int memory) { return b.op("transpose", OpKind::Elementwise, {memory}); }, starts, shared,
      /*onlyFirstReads=*/true);
  DetectedLayers found = detectLayers(own);
  EXPECT_EQ(found.layers, 2);
  EXPECT_EQ(own.ops[size_t(shared[0])].layer, -1);
}
