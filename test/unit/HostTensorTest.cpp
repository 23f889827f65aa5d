//===- HostTensorTest.cpp - import-time constant evaluation ---------------===//
//
// The importer folds the shape arithmetic PyTorch exports; a wrong fold is a
// wrong shape everywhere downstream. Each case is checked against values
// worked out by hand from the ONNX operator definitions.
//
//===----------------------------------------------------------------------===//

#include "HostTensor.h"

#include <gtest/gtest.h>

using namespace colossal::import;

namespace {

HostTensor ints(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return HostTensor::ofInts(std::move(shape), std::move(values));
}

TEST(HostTensor, BinaryBroadcastsLikeNumpy) {
  // [[1], [2]] + [10, 20, 30] -> [[11, 21, 31], [12, 22, 32]]
  auto out = foldBinary(BinaryFn::Add, ints({2, 1}, {1, 2}), ints({3}, {10, 20, 30}));
  ASSERT_TRUE(out.value);
  EXPECT_EQ(out.value->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{11, 21, 31, 12, 22, 32}));
}

TEST(HostTensor, IncompatibleShapesAreRefused) {
  auto out = foldBinary(BinaryFn::Mul, ints({2}, {1, 2}), ints({3}, {1, 2, 3}));
  EXPECT_FALSE(out.value);
  EXPECT_EQ(out.error, "shapes do not broadcast");
}

TEST(HostTensor, IntegerDivisionTruncatesAndRefusesZero) {
  auto out = foldBinary(BinaryFn::Div, ints({2}, {-7, 7}), ints({}, {2}));
  ASSERT_TRUE(out.value);
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{-3, 3}));
  EXPECT_FALSE(foldBinary(BinaryFn::Div, ints({1}, {1}), ints({}, {0})).value);
}

TEST(HostTensor, ComparisonGivesBool) {
  auto out = foldBinary(BinaryFn::Equal, ints({3}, {0, 1, 0}), ints({}, {0}));
  ASSERT_TRUE(out.value);
  EXPECT_EQ(out.value->kind, ElementKind::Bool);
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{1, 0, 1}));
}

TEST(HostTensor, GatherTakesNegativeIndices) {
  // Shape [2, 3, 4], Gather(axis 0, index -1) is dimension 2's size... as torch
  // exports x.shape[-1]: data is the shape vector.
  auto out = foldGather(ints({3}, {2, 3, 4}), ints({}, {-1}), 0);
  ASSERT_TRUE(out.value);
  EXPECT_TRUE(out.value->shape.empty());
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{4}));
  EXPECT_FALSE(foldGather(ints({3}, {2, 3, 4}), ints({}, {3}), 0).value);
}

TEST(HostTensor, GatherAlongInnerAxis) {
  // [[1, 2, 3], [4, 5, 6]] gathered at columns [2, 0] -> [[3, 1], [6, 4]]
  auto out = foldGather(ints({2, 3}, {1, 2, 3, 4, 5, 6}), ints({2}, {2, 0}), 1);
  ASSERT_TRUE(out.value);
  EXPECT_EQ(out.value->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{3, 1, 6, 4}));
}

TEST(HostTensor, ConcatAlongAxis) {
  std::vector<const HostTensor *> inputs;
  HostTensor a = ints({2, 1}, {1, 2}), b = ints({2, 2}, {3, 4, 5, 6});
  inputs = {&a, &b};
  auto out = foldConcat(inputs, 1);
  ASSERT_TRUE(out.value);
  EXPECT_EQ(out.value->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
}

TEST(HostTensor, SliceWithNegativeStep) {
  // [0..7][6:1:-2] -> [6, 4, 2]
  std::vector<int64_t> values{0, 1, 2, 3, 4, 5, 6, 7};
  HostTensor out = foldSlice(ints({8}, values), {6}, {1}, {-2});
  EXPECT_EQ(out.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(out.ints, (std::vector<int64_t>{6, 4, 2}));
}

TEST(HostTensor, SliceWithAStepBeyondTheDimension) {
  // Found by the fuzzer: a step far larger than the dimension selects one
  // element, and its stride must not overflow (UBSan checks in CI).
  std::vector<int64_t> values(24);
  for (int64_t i = 0; i < 24; ++i)
    values[size_t(i)] = i;
  HostTensor out = foldSlice(ints({3, 8}, values), {1, 0}, {3, 8}, {4611686018427387860, 1});
  EXPECT_EQ(out.shape, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(out.ints, (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  HostTensor back = foldSlice(ints({3, 8}, values), {2, 7}, {-1, -1}, {-4611686018427387860, -4611686018427387860});
  EXPECT_EQ(back.shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(back.ints, (std::vector<int64_t>{23}));
}

TEST(HostTensor, TransposeAndBroadcast) {
  HostTensor t = foldTranspose(ints({2, 3}, {1, 2, 3, 4, 5, 6}), {1, 0});
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.ints, (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
  HostTensor b = foldBroadcast(ints({2, 1}, {7, 8}), {2, 3});
  EXPECT_EQ(b.ints, (std::vector<int64_t>{7, 7, 7, 8, 8, 8}));
}

TEST(HostTensor, InnerRunsAreCopiedAsElementByElementIndexingGives) {
  // Slices and transposes of a rank-3 tensor copy whole innermost runs;
  // each element is checked against its index formula.
  std::vector<double> values(3 * 4 * 5);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 0.5 * double(i);
  HostTensor x = HostTensor::ofFloats({3, 4, 5}, values);
  HostTensor slice = foldSlice(x, {1, 0, 1}, {3, 4, 4}, {1, 2, 1});
  ASSERT_EQ(slice.shape, (std::vector<int64_t>{2, 2, 3}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(slice.floats[size_t((a * 2 + b) * 3 + c)], values[size_t((1 + a) * 20 + 2 * b * 5 + 1 + c)]);
  HostTensor t = foldTranspose(x, {2, 0, 1});
  ASSERT_EQ(t.shape, (std::vector<int64_t>{5, 3, 4}));
  for (int64_t a = 0; a < 5; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_EQ(t.floats[size_t((a * 3 + b) * 4 + c)], values[size_t(b * 20 + c * 5 + a)]);
  HostTensor empty = foldSlice(x, {1, 0, 0}, {1, 4, 5}, {1, 1, 1});
  EXPECT_EQ(empty.shape, (std::vector<int64_t>{0, 4, 5}));
  EXPECT_TRUE(empty.floats.empty());
  HostTensor scalar = foldBroadcast(HostTensor::ofFloats({}, {2.5}), {});
  EXPECT_EQ(scalar.floats, (std::vector<double>{2.5}));
}

TEST(HostTensor, TriluKeepsTheRequestedTriangle) {
  HostTensor ones = ints({3, 3}, std::vector<int64_t>(9, 1));
  EXPECT_EQ(foldTrilu(ones, /*upper=*/true, 1).ints,
            (std::vector<int64_t>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(foldTrilu(ones, /*upper=*/false, 0).ints,
            (std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
}

TEST(HostTensor, RangeCountsAndRefusesZeroDelta) {
  auto out = foldRange(ints({}, {0}), ints({}, {7}), ints({}, {3}));
  ASSERT_TRUE(out.value);
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{0, 3, 6}));
  EXPECT_FALSE(foldRange(ints({}, {0}), ints({}, {7}), ints({}, {0})).value);
  // A range too large to fold is refused, not allocated.
  EXPECT_FALSE(foldRange(ints({}, {0}), ints({}, {int64_t(1) << 40}), ints({}, {1})).value);
  // Mixed element types or non-scalars are malformed, not read out of bounds.
  EXPECT_FALSE(foldRange(ints({}, {0}), ints({}, {7}), HostTensor::ofFloats({}, {0.5})).value);
  EXPECT_FALSE(foldRange(ints({0}, {}), ints({}, {7}), ints({}, {1})).value);
}

TEST(HostTensor, CastSaturatesInsteadOfOverflowing) {
  HostTensor f = HostTensor::ofFloats({3}, {1e30, -1e30, 2.7});
  HostTensor i = foldCast(f, ElementKind::Int64);
  EXPECT_EQ(i.ints, (std::vector<int64_t>{INT64_MAX, INT64_MIN, 2}));
  HostTensor b = foldCast(f, ElementKind::Bool);
  EXPECT_EQ(b.ints, (std::vector<int64_t>{1, 1, 1}));
}

TEST(HostTensor, WhereBroadcastsAllThree) {
  HostTensor cond = HostTensor::ofInts({2, 1}, {1, 0}, ElementKind::Bool);
  auto out = foldWhere(cond, ints({2}, {1, 2}), ints({}, {9}));
  ASSERT_TRUE(out.value);
  EXPECT_EQ(out.value->ints, (std::vector<int64_t>{1, 2, 9, 9}));
}

} // namespace
