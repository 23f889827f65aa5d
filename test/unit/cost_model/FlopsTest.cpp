//===- FlopsTest.cpp - model FLOPs against Narayanan et al.'s closed form -===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

// Narayanan et al. (SC'21), appendix: one iteration of a GPT with batch B,
// sequence s, l layers, hidden h and vocabulary V costs
// 72 B s l h^2 (1 + s / (6 h) + V / (12 l h)) FLOPs without recomputation.
TEST(GptFlops, MatchesTheClosedForm) {
  struct Config {
    int64_t layers, hidden, heads, seq, vocab;
  };
  for (Config c : {Config{24, 2304, 24, 2048, 51200}, Config{96, 12288, 96, 2048, 51200},
                   Config{128, 25600, 160, 2048, 51200}}) {
    TransformerShape shape;
    shape.layers = c.layers;
    shape.hidden = c.hidden;
    shape.heads = c.heads;
    shape.seq = c.seq;
    shape.vocab = c.vocab;
    shape.microbatch = 4;
    Graph graph = buildTransformer(shape);
    double B = 4, s = c.seq, l = c.layers, h = c.hidden, V = c.vocab;
    double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    EXPECT_NEAR(graph.modelFlops() / expected, 1.0, 0.01) << c.layers << " layers";
  }
}

TEST(GptFlops, ParameterCountOfGpt3) {
  TransformerShape shape;
  shape.layers = 96;
  shape.hidden = 12288;
  shape.heads = 96;
  shape.seq = 2048;
  shape.vocab = 51200;
  Graph graph = buildTransformer(shape);
  // 12 l h^2 (1 + 13 / (12 h)) + (V + s) h: 174.6B for GPT-3's shape.
  EXPECT_NEAR(double(graph.parameterCount()) / 1e9, 174.6, 0.5);
}

TEST(GptFlops, LlamaSevenBParameterCount) {
  // LLaMA-7B: 32 layers, hidden 4096, 32 heads, SwiGLU width 11008,
  // vocabulary 32000, untied head: 6.74B parameters (Touvron et al. 2023).
  TransformerShape shape;
  shape.family = TransformerFamily::LLaMA;
  shape.layers = 32;
  shape.hidden = 4096;
  shape.heads = 32;
  shape.seq = 2048;
  shape.vocab = 32000;
  Graph graph = buildTransformer(shape);
  EXPECT_NEAR(double(graph.parameterCount()) / 1e9, 6.74, 0.005);
}

TEST(GptFlops, LargestLayerIsOneLayersWeightsOrTheEmbedding) {
  // A GPT layer holds 12 h^2 + 13 h weights; the token embedding V h is
  // larger for a small h, and is what ZeRO-3 gathers at once then.
  TransformerShape shape;
  shape.layers = 4;
  shape.hidden = 1024;
  shape.heads = 16;
  shape.seq = 128;
  shape.vocab = 512;
  double h = 1024;
  EXPECT_EQ(double(buildTransformer(shape).largestLayerTrainableElements()), 12 * h * h + 13 * h);
  shape.vocab = 51200;
  EXPECT_EQ(double(buildTransformer(shape).largestLayerTrainableElements()), 51200 * h);
}

// Grouped-query attention (LLaMA 3: 8 key heads of 128 dimensions) against
// the models' published sizes and the closed form of their FLOPs.
TEST(GptFlops, GroupedQueryAttentionLlamaThree) {
  struct Config {
    int64_t layers, hidden, heads, ffn;
    double billions;
  };
  // Grattafiori et al. 2024, table 3: 8B and 405B (8.03B and 405.85B in
  // the released checkpoints), vocabulary 128256.
  for (Config c : {Config{32, 4096, 32, 14336, 8.03}, Config{126, 16384, 128, 53248, 405.85}}) {
    TransformerShape shape;
    shape.family = TransformerFamily::LLaMA;
    shape.layers = c.layers;
    shape.hidden = c.hidden;
    shape.heads = c.heads;
    shape.kvHeads = 8;
    shape.ffn = c.ffn;
    shape.seq = 8192;
    shape.vocab = 128256;
    shape.microbatch = 2;
    Graph graph = buildTransformer(shape);
    EXPECT_NEAR(double(graph.parameterCount()) / 1e9, c.billions, 0.01 * c.billions) << c.layers << " layers";
    // Per token and layer, forward: 2 h (h + 2 kv d) projecting, 2 h h out,
    // 6 h ffn in the SwiGLU MLP, 4 s h in scores and context; the head
    // 2 h V; backward twice the forward.
    double B = 2, s = 8192, l = c.layers, h = c.hidden, kv = 8 * 128, f = c.ffn, V = 128256;
    double forward = B * s * (l * (2 * h * (h + 2 * kv) + 2 * h * h + 6 * h * f + 4 * s * h) + 2 * h * V);
    double matmuls = 0;
    for (const Op &op : graph.ops)
      if (op.kind == OpKind::MatMul)
        matmuls += op.forwardFlops;
    EXPECT_NEAR(matmuls / forward, 1.0, 1e-9) << c.layers << " layers";
  }
}

TEST(GptFlops, GroupedQueryAttentionSplitsKeyHeadsOverTheTensorAxis) {
  TransformerShape shape;
  shape.family = TransformerFamily::LLaMA;
  shape.layers = 2;
  shape.hidden = 1024;
  shape.heads = 16;
  shape.kvHeads = 4;
  shape.seq = 256;
  shape.vocab = 1000;
  Graph graph = buildTransformer(shape);
  Cluster cluster = *Cluster::preset("dgx-a100", 1);
  std::string error;
  EXPECT_TRUE(estimate(graph, *Strategy::parse("tp=4", error), cluster, error)) << error;
  // Eight ranks would split four key heads: refused, naming the factor.
  EXPECT_FALSE(estimate(graph, *Strategy::parse("tp=8", error), cluster, error));
  EXPECT_NE(error.find("kv_heads"), std::string::npos) << error;
}
