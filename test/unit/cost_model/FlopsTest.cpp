//===- FlopsTest.cpp - model FLOPs against Narayanan et al.'s closed form -===//

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
