//===- TensorSlicesTest.cpp - a rank's block of a tensor grid's weight ----===//

#include "colossal/runtime/train/TensorSlices.h"
#include "colossal/runtime/Error.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

using namespace colossal::rt;

namespace {

// On a q x q grid, a weight [6, 4] cut over (tp_col, tp_row) gives tensor
// rank t = i q + j the rows of block j and the columns of block i: cut
// out of the whole and placed back, every element lands in exactly one
// rank's block, at the index the layout names.
TEST(TensorSlicesTest, GridBlocksTileTheWholeTensorOnce) {
  for (int64_t q : {2, 3}) {
    ProgramParameter p;
    p.name = "w";
    p.shape = {6 / q, 12 / q};
    p.gridSplit = {{"tp_col"}, {"tp_row"}};
    host::Shape whole = {6, 12};
    std::vector<float> model(72);
    std::iota(model.begin(), model.end(), 0.0f);
    std::vector<int> covered(72, 0);
    for (int64_t t = 0; t < q * q; ++t) {
      SliceOf slice = sliceOf(p, t, q * q);
      ASSERT_EQ(slice.whole, whole);
      std::vector<float> block(size_t(p.shape[0] * p.shape[1]));
      cutSlice(model.data(), slice, p.shape, block.data());
      int64_t i = t / q, j = t % q;
      for (int64_t r = 0; r < p.shape[0]; ++r)
        for (int64_t c = 0; c < p.shape[1]; ++c) {
          int64_t row = j * p.shape[0] + r, column = i * p.shape[1] + c;
          EXPECT_EQ(block[size_t(r * p.shape[1] + c)], float(row * 12 + column)) << "q " << q << " rank " << t;
          ++covered[size_t(row * 12 + column)];
        }
    }
    for (int n : covered)
      EXPECT_EQ(n, 1) << "q " << q;
  }
}

// A bias cut over tp_col alone: the ranks of one grid column (same j)
// hold the same block; major-first axes order a dimension cut twice.
TEST(TensorSlicesTest, BlocksOfOneAxisAndOfTwoAxesOnOneDimension) {
  ProgramParameter bias;
  bias.name = "b";
  bias.shape = {4};
  bias.gridSplit = {{"tp_col"}};
  for (int64_t t = 0; t < 4; ++t)
    EXPECT_EQ(sliceOf(bias, t, 4).offsets[0], (t % 2) * 4);
  ProgramParameter both;
  both.name = "c";
  both.shape = {2};
  both.gridSplit = {{"tp_col", "tp_row"}};
  for (int64_t t = 0; t < 4; ++t) {
    SliceOf slice = sliceOf(both, t, 4);
    EXPECT_EQ(slice.whole[0], 8);
    EXPECT_EQ(slice.offsets[0], ((t % 2) * 2 + t / 2) * 2);
  }
}

// A fused projection's weight [3n, k] whose rows are three groups (query,
// key, value), each cut over tp_col: rank (i, j) holds rows j of every
// group, side by side, and columns i; every element in one block.
TEST(TensorSlicesTest, GroupedGridBlocksHoldEachGroupsBlock) {
  const int64_t q = 2, n = 4, k = 6;
  ProgramParameter p;
  p.name = "qkv";
  p.shape = {3 * n / q, k / q};
  p.gridSplit = {{"tp_col"}, {"tp_row"}};
  p.gridGroupDim = 0, p.gridGroups = 3;
  std::vector<float> model(size_t(3 * n * k));
  std::iota(model.begin(), model.end(), 0.0f);
  std::vector<int> covered(model.size(), 0);
  for (int64_t t = 0; t < q * q; ++t) {
    SliceOf slice = sliceOf(p, t, q * q);
    ASSERT_EQ(slice.whole, (host::Shape{3 * n, k}));
    std::vector<float> block(size_t(p.shape[0] * p.shape[1]));
    cutSlice(model.data(), slice, p.shape, block.data());
    int64_t i = t / q, j = t % q, part = n / q;
    for (int64_t r = 0; r < p.shape[0]; ++r)
      for (int64_t c = 0; c < p.shape[1]; ++c) {
        int64_t row = (r / part) * n + j * part + r % part, column = i * p.shape[1] + c;
        EXPECT_EQ(block[size_t(r * p.shape[1] + c)], float(row * k + column)) << "rank " << t;
        ++covered[size_t(row * k + column)];
      }
  }
  for (int c : covered)
    EXPECT_EQ(c, 1);
  p.gridGroups = 5;
  EXPECT_THROW(sliceOf(p, 0, q * q), Error);
}

// On a q x q x q cube (tensor rank t = in q^2 + w q + out), a weight
// [k, n] cut with k over (tp_out, tp_w) and n over tp_in: every element
// lands in exactly one rank's block, at the index the layout names.
TEST(TensorSlicesTest, CubeBlocksTileTheWholeTensorOnce) {
  for (int64_t q : {2, 3}) {
    ProgramParameter p;
    p.name = "w";
    p.shape = {36 / (q * q), 6 / q};
    p.gridSplit = {{"tp_out", "tp_w"}, {"tp_in"}};
    std::vector<float> model(216);
    std::iota(model.begin(), model.end(), 0.0f);
    std::vector<int> covered(216, 0);
    for (int64_t t = 0; t < q * q * q; ++t) {
      SliceOf slice = sliceOf(p, t, q * q * q);
      ASSERT_EQ(slice.whole, (host::Shape{36, 6}));
      std::vector<float> block(size_t(p.shape[0] * p.shape[1]));
      cutSlice(model.data(), slice, p.shape, block.data());
      int64_t in = t / (q * q), w = t / q % q, out = t % q;
      for (int64_t r = 0; r < p.shape[0]; ++r)
        for (int64_t c = 0; c < p.shape[1]; ++c) {
          int64_t row = (out * q + w) * p.shape[0] + r, column = in * p.shape[1] + c;
          EXPECT_EQ(block[size_t(r * p.shape[1] + c)], float(row * 6 + column)) << "q " << q << " rank " << t;
          ++covered[size_t(row * 6 + column)];
        }
    }
    for (int n : covered)
      EXPECT_EQ(n, 1) << "q " << q;
  }
}

// A grid on a number of ranks that is not a square, or an axis the grid
// does not have, is an error naming the parameter.
TEST(TensorSlicesTest, ImpossibleGridsAreRefused) {
  ProgramParameter p;
  p.name = "w";
  p.shape = {2, 2};
  p.gridSplit = {{"tp_row"}, {"tp_col"}};
  EXPECT_THROW(sliceOf(p, 0, 6), Error);
  p.gridSplit = {{"tp_row"}, {"tp_depth"}};
  EXPECT_THROW(sliceOf(p, 0, 4), Error);
  p.gridSplit = {{"tp_row"}};
  EXPECT_THROW(sliceOf(p, 0, 4), Error);
  // A cube's block on ranks that are not a cube.
  p.gridSplit = {{"tp_in"}, {"tp_out"}};
  EXPECT_THROW(sliceOf(p, 0, 4), Error);
}

} // namespace
