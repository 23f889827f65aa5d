//===- InitialValuesTest.cpp - weights a program draws (--init) ------------===//

#include "colossal/runtime/train/InitialValues.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace colossal::rt;

namespace {

ParameterInit normal(double std) { return ParameterInit{ParameterInit::Normal, std}; }

// Every tensor rank's slice of a padded tensor holds the model's element
// (row, column) drawn at index row * columns + column, wherever the padding
// sits, and zeros in the padding.
TEST(InitialValuesTest, SlicesOfAPaddedTensorHoldTheModelsElements) {
  const int64_t rows = 3, columns = 5, seed = 7;
  uint64_t key = parameterKey("head.weight");
  for (int64_t dim : {0, 1}) {
    // The model's [3, 5] padded along `dim` to a multiple of 2 ranks.
    int64_t extent = dim == 0 ? rows : columns, padded = extent + 1;
    ProgramParameter p;
    p.name = "head.weight";
    p.shape = dim == 0 ? host::Shape{padded / 2, columns} : host::Shape{rows, padded / 2};
    p.splitDim = dim, p.padding = 1, p.init = normal(0.5);
    for (int64_t rank = 0; rank < 2; ++rank) {
      std::vector<float> part(size_t(p.shape[0] * p.shape[1]), -1.0f);
      drawSlice(p, sliceOf(p, rank, 2), seed, part.data());
      for (int64_t r = 0; r < p.shape[0]; ++r)
        for (int64_t c = 0; c < p.shape[1]; ++c) {
          int64_t row = dim == 0 ? rank * p.shape[0] + r : r, column = dim == 1 ? rank * p.shape[1] + c : c;
          float want = (dim == 0 ? row : column) >= extent
                           ? 0.0f
                           : initialValue(p.init, seed, key, uint64_t(row * columns + column));
          EXPECT_EQ(part[size_t(r * p.shape[1] + c)], want)
              << "dim " << dim << " rank " << rank << " at " << r << ", " << c;
        }
    }
  }
}

// A tensor large enough to be drawn on several threads holds the same
// values as drawn one by one.
TEST(InitialValuesTest, LargeTensorsDrawnOnThreadsHoldEachElementsValue) {
  ProgramParameter p;
  p.name = "embed.weight";
  p.shape = {1025, 2048}; // a split one: rank 1 of 2 along dimension 0, one padding row
  p.splitDim = 0, p.padding = 1, p.init = normal(0.02);
  SliceOf slice = sliceOf(p, 1, 2);
  std::vector<float> part(size_t(p.shape[0] * p.shape[1]), -1.0f);
  drawSlice(p, slice, 3, part.data());
  uint64_t key = parameterKey(p.name);
  int64_t mismatches = 0;
  for (int64_t r = 0; r < p.shape[0]; ++r)
    for (int64_t c = 0; c < p.shape[1]; ++c) {
      int64_t row = 1025 + r; // the model has 2049 rows, the padded tensor 2050
      float want = row >= 2049 ? 0.0f : initialValue(p.init, 3, key, uint64_t(row * 2048 + c));
      mismatches += part[size_t(r * 2048 + c)] != want;
    }
  EXPECT_EQ(mismatches, 0);
}

TEST(InitialValuesTest, NormalDrawsHaveTheirMomentsAndDependOnNameAndSeed) {
  const int64_t n = 200000;
  const double std = 0.02;
  double sum = 0, squares = 0;
  int64_t withinOne = 0, differentName = 0, differentSeed = 0;
  uint64_t key = parameterKey("w"), other = parameterKey("v");
  for (int64_t i = 0; i < n; ++i) {
    double x = initialValue(normal(std), 0, key, uint64_t(i));
    sum += x, squares += x * x;
    withinOne += std::fabs(x) <= std;
    differentName += x != initialValue(normal(std), 0, other, uint64_t(i));
    differentSeed += x != initialValue(normal(std), 1, key, uint64_t(i));
  }
  double mean = sum / n, sd = std::sqrt(squares / n - mean * mean);
  EXPECT_LT(std::fabs(mean), 5 * std / std::sqrt(double(n)));
  EXPECT_NEAR(sd, std, 5 * std / std::sqrt(2.0 * n));
  // P(|z| <= 1) = 0.6827 for a normal variable.
  EXPECT_NEAR(double(withinOne) / n, 0.6827, 0.005);
  EXPECT_EQ(differentName, n);
  EXPECT_EQ(differentSeed, n);
  EXPECT_EQ(initialValue(ParameterInit{ParameterInit::Ones, 0}, 3, key, 11), 1.0f);
  EXPECT_EQ(initialValue(ParameterInit{ParameterInit::Zeros, 0}, 3, key, 11), 0.0f);
}

} // namespace
