//===- ActivationMemoryTest.cpp - op-level activations vs Korthikanti -----===//
//
// The activation memory of a GPT layer, summed over the tensors its ops keep
// for backward, must equal Korthikanti et al.'s closed forms (16-bit
// activations, REFERENCE.md) within 1%:
//   none                   s b h (34 + 5 a s / h)
//   tensor parallel        s b h (10 + 24 / t + 5 a s / (h t))
//   tensor + sequence      s b h (34 + 5 a s / h) / t
//   + selective recompute  34 s b h / t
//   full recompute         2 s b h (/ t with sequence parallelism)
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

namespace {

struct Case {
  int tp;
  SequenceMode sp;
  Recompute recompute;
};

class KorthikantiClosedForm : public testing::TestWithParam<Case> {};

double closedForm(double s, double b, double h, double a, double t, const Case &c) {
  bool seq = c.sp == SequenceMode::Megatron;
  if (c.recompute == Recompute::Full)
    return 2 * s * b * h / (seq ? t : 1);
  if (c.recompute == Recompute::Selective)
    return 34 * s * b * h / t; // with tensor and sequence parallelism
  if (t == 1)
    return s * b * h * (34 + 5 * a * s / h);
  if (seq)
    return s * b * h * (34 + 5 * a * s / h) / t;
  return s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
}

TEST_P(KorthikantiClosedForm, LayerActivationsFromOps) {
  const Case &c = GetParam();
  TransformerShape shape;
  shape.layers = 2;
  shape.hidden = 2048;
  shape.heads = 16;
  shape.seq = 1024;
  shape.vocab = 32000;
  shape.microbatch = 2;
  Graph graph = buildTransformer(shape);
  Cluster cluster = *Cluster::preset("dgx-a100");
  Strategy strategy;
  strategy.tp = c.tp;
  strategy.spMode = c.sp;
  strategy.recompute = c.recompute;
  Mesh mesh = buildMesh(strategy, cluster);
  GraphSharding sharding = shardGraph(graph, strategy, mesh);
  std::string error;
  ASSERT_TRUE(checkSharding(graph, sharding, mesh, strategy, error)) << error;

  double measured = savedActivationBytes(graph, sharding, mesh, c.recompute, /*layer=*/1,
                                         /*keepShardedInputs=*/c.sp == SequenceMode::Megatron);
  double expected = closedForm(1024, 2, 2048, 16, c.tp, c);
  // The issue asks for 1%; the op-level sums are exact, so hold them to that.
  EXPECT_NEAR(measured / expected, 1.0, 1e-12)
      << "measured " << measured << " bytes, closed form " << expected;
}

INSTANTIATE_TEST_SUITE_P(
    Plans, KorthikantiClosedForm,
    testing::Values(Case{1, SequenceMode::None, Recompute::None},
                    Case{8, SequenceMode::None, Recompute::None},
                    Case{4, SequenceMode::None, Recompute::None},
                    Case{8, SequenceMode::Megatron, Recompute::None},
                    Case{8, SequenceMode::Megatron, Recompute::Selective},
                    Case{1, SequenceMode::None, Recompute::Full},
                    Case{8, SequenceMode::Megatron, Recompute::Full}));

} // namespace
