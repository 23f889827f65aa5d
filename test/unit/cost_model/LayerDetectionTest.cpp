//===- LayerDetectionTest.cpp - finding identical layers in a graph -------===//
//
// The builder knows where each transformer's layers are; the detector,
// given the same ops without that knowledge, must find the same layers.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/LayerDetection.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

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
