//===- AppliedShardingTest.cpp - reading a partitioner's split back -------===//
//
// The whole model's graph and one rank's, built by hand as a partitioner
// would leave them: the split factors are found, ops the rank's program
// adds are skipped, a reshape that factors its smaller sizes differently is
// read off its dimensions, a padded split counts, and a size that is no
// split over the ranks is refused with the op named.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/AppliedSharding.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

namespace {

/// x[rows, in] @ w[in, out] (+ bias[out] when `bias`).
Op linear(Graph &g, int x, int64_t rows, int64_t in, int64_t out, bool bias, int &y) {
  Op op;
  op.name = "train.linear";
  op.kind = OpKind::MatMul;
  op.factors = {{"f0", rows, FactorKind::Parallel}, {"f1", in, FactorKind::Reduction},
                {"f2", out, FactorKind::Parallel}};
  op.inputs = {{x, {{0}, {1}}}, {g.addValue("w", DType::F32, true), {{1}, {2}}}};
  if (bias)
    op.inputs.push_back({g.addValue("b", DType::F32, true), {{2}}});
  y = g.addValue("y", DType::F32);
  op.outputs = {{y, {{0}, {2}}}};
  return op;
}

/// [rows, heads * size] -> [rows, heads, size], factored as the sizes allow
/// (a size-1 factor is left out, as a rule derived from shapes does).
Op reshape(Graph &g, int x, int64_t rows, int64_t heads, int64_t size) {
  Op op;
  op.name = "train.reshape";
  op.factors = {{"f0", rows, FactorKind::Parallel}};
  std::vector<int> merged;
  std::vector<std::vector<int>> out{{0}};
  for (int64_t n : {heads, size}) {
    if (n == 1) {
      out.push_back({});
      continue;
    }
    op.factors.push_back({"f" + std::to_string(op.factors.size()), n, FactorKind::Parallel});
    merged.push_back(int(op.factors.size()) - 1);
    out.push_back({int(op.factors.size()) - 1});
  }
  op.inputs = {{x, {{0}, merged}}};
  op.outputs = {{g.addValue("r", DType::F32), out}};
  return op;
}

Op add(Graph &g, int a, int b, int64_t rows, int64_t width) {
  Op op;
  op.name = "train.add";
  op.factors = {{"f0", rows, FactorKind::Parallel}, {"f1", width, FactorKind::Parallel}};
  op.inputs = {{a, {{0}, {1}}}, {b, {{1}}}};
  op.outputs = {{g.addValue("s", DType::F32), {{0}, {1}}}};
  return op;
}

} // namespace

TEST(AppliedSharding, ReadsTheSplitBackOpByOp) {
  // Whole: a column-parallel linear to 2 heads of 8, a reshape into heads,
  // a row-parallel linear back to 16 with its bias. One rank of 2: the
  // first linear's output columns halved (1 head), the reshape then has
  // no head factor, the second linear's inputs halved and its bias added
  // after the sum, by an add the rank's program inserts.
  Graph whole, rank;
  int y = 0, r = 0;
  int x = whole.addValue("x", DType::F32);
  whole.ops.push_back(linear(whole, x, 4, 16, 16, false, y));
  whole.ops.push_back(reshape(whole, y, 4, 2, 8));
  whole.ops.push_back(linear(whole, y, 4, 16, 16, true, r));
  int xr = rank.addValue("x", DType::F32);
  rank.ops.push_back(linear(rank, xr, 4, 16, 8, false, y));
  rank.ops.push_back(reshape(rank, y, 4, 1, 8));
  rank.ops.push_back(linear(rank, y, 4, 8, 16, false, r));
  rank.ops.push_back(add(rank, r, rank.addValue("b", DType::F32, true), 4, 16));

  std::string error;
  std::optional<GraphSharding> sharding = appliedAxisSharding(whole, rank, /*axis=*/0, 2, error);
  ASSERT_TRUE(sharding) << error;
  ASSERT_EQ(sharding->size(), 3u);
  EXPECT_EQ((*sharding)[0], (OpSharding{{}, {}, {0}})); // output columns
  EXPECT_EQ((*sharding)[1], (OpSharding{{}, {0}, {}})); // the heads
  EXPECT_EQ((*sharding)[2], (OpSharding{{}, {0}, {}})); // the reduction
}

TEST(AppliedSharding, APaddedSplitCountsAndAWrongSizeIsRefused) {
  Graph whole, padded, wrong;
  int y = 0;
  whole.ops.push_back(linear(whole, whole.addValue("x", DType::F32), 4, 16, 31, false, y));
  padded.ops.push_back(linear(padded, padded.addValue("x", DType::F32), 4, 16, 16, false, y));
  wrong.ops.push_back(linear(wrong, wrong.addValue("x", DType::F32), 4, 16, 10, false, y));
  std::string error;
  std::optional<GraphSharding> sharding = appliedAxisSharding(whole, padded, 0, 2, error);
  ASSERT_TRUE(sharding) << error;
  EXPECT_EQ((*sharding)[0], (OpSharding{{}, {}, {0}}));
  EXPECT_FALSE(appliedAxisSharding(whole, wrong, 0, 2, error));
  EXPECT_EQ(error, "op 0 (train.linear): factor 2 is 10 on one rank and 31 whole, not a split over 2 ranks");
  Graph none;
  EXPECT_FALSE(appliedAxisSharding(whole, none, 0, 2, error));
  EXPECT_EQ(error, "op 0 (train.linear) of the whole model has no counterpart in one rank's program");
}

TEST(AppliedSharding, AChainOfSplitsIsReadStepByStep) {
  // Tensor axis (mesh axis 0) then sequence axis (mesh axis 1), 2 ranks
  // each: a column-parallel linear to 2 heads of 8 and the reshape into
  // heads. The tensor split halves the output columns (the reshape then has
  // no head factor); the sequence split halves the rows of both, the
  // reshape's read off its dimensions since it factors otherwise than the
  // whole one.
  Graph whole, tensor, both;
  int y = 0;
  whole.ops.push_back(linear(whole, whole.addValue("x", DType::F32), 8, 16, 16, false, y));
  whole.ops.push_back(reshape(whole, y, 8, 2, 8));
  tensor.ops.push_back(linear(tensor, tensor.addValue("x", DType::F32), 8, 16, 8, false, y));
  tensor.ops.push_back(reshape(tensor, y, 8, 1, 8));
  both.ops.push_back(linear(both, both.addValue("x", DType::F32), 4, 16, 8, false, y));
  both.ops.push_back(reshape(both, y, 4, 1, 8));
  std::string error;
  std::optional<GraphSharding> sharding = appliedSharding(whole, {{&tensor, 0, 2}, {&both, 1, 2}}, error);
  ASSERT_TRUE(sharding) << error;
  EXPECT_EQ((*sharding)[0], (OpSharding{{1}, {}, {0}})); // rows by sp, columns by tp
  EXPECT_EQ((*sharding)[1], (OpSharding{{1}, {0}, {}})); // rows by sp, heads by tp
  // A split the second step does not make is an error naming the op.
  Graph wrong;
  wrong.ops.push_back(linear(wrong, wrong.addValue("x", DType::F32), 3, 16, 8, false, y));
  wrong.ops.push_back(reshape(wrong, y, 3, 1, 8));
  EXPECT_FALSE(appliedSharding(whole, {{&tensor, 0, 2}, {&wrong, 1, 2}}, error));
  EXPECT_EQ(error, "op 0 (train.linear): factor 0 is 3 on one rank and 8 whole, not a split over 2 ranks");
}
