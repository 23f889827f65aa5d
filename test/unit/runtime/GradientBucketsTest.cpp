//===- GradientBucketsTest.cpp - bucket planning of the gradient all-reduce ===//

#include "colossal/runtime/train/GradientBuckets.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

using namespace colossal::rt;

namespace {

std::vector<std::vector<size_t>> tensorsOf(const std::vector<GradientBucket> &buckets) {
  std::vector<std::vector<size_t>> out;
  for (const GradientBucket &b : buckets)
    out.push_back(b.tensors);
  return out;
}

} // namespace

TEST(GradientBucketsTest, FillsInReverseOrderUpToTheCapacity) {
  // 40 bytes per bucket: tensors of 4, 6, 3, 2, 5 floats, taken from the end.
  std::vector<GradientBucket> buckets = planGradientBuckets({4, 6, 3, 2, 5}, 40);
  EXPECT_EQ(tensorsOf(buckets), (std::vector<std::vector<size_t>>{{4, 3, 2}, {1, 0}}));
  EXPECT_EQ(buckets[0].elements, 10);
  EXPECT_EQ(buckets[1].elements, 10);
}

TEST(GradientBucketsTest, ATensorLargerThanTheCapacityHasItsOwnBucket) {
  std::vector<GradientBucket> buckets = planGradientBuckets({1, 100, 1}, 16);
  EXPECT_EQ(tensorsOf(buckets), (std::vector<std::vector<size_t>>{{2}, {1}, {0}}));
}

TEST(GradientBucketsTest, ALargeCapacityMakesOneBucketAndNoTensorsNone) {
  EXPECT_EQ(tensorsOf(planGradientBuckets({3, 5, 7}, 25 << 20)),
            (std::vector<std::vector<size_t>>{{2, 1, 0}}));
  EXPECT_TRUE(planGradientBuckets({}, 64).empty());
}

// On random sizes and capacities: every tensor in exactly one bucket, in
// reverse order, and no bucket past the capacity unless it holds one tensor
// that alone is; no two neighbouring buckets could have been one.
TEST(GradientBucketsTest, RandomPlansCoverEveryTensorOnceWithinTheCapacity) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int64_t> elements(rng() % 20);
    for (int64_t &e : elements)
      e = int64_t(rng() % 50);
    int64_t capacity = 4 * int64_t(1 + rng() % 80);
    std::vector<GradientBucket> buckets = planGradientBuckets(elements, capacity);
    std::vector<size_t> order;
    for (size_t b = 0; b < buckets.size(); ++b) {
      int64_t sum = 0;
      for (size_t t : buckets[b].tensors) {
        order.push_back(t);
        sum += elements[t];
      }
      EXPECT_EQ(sum, buckets[b].elements);
      EXPECT_TRUE(sum * 4 <= capacity || buckets[b].tensors.size() == 1) << "trial " << trial;
      if (b + 1 < buckets.size())
        EXPECT_GT((buckets[b].elements + elements[buckets[b + 1].tensors.front()]) * 4, capacity);
    }
    std::vector<size_t> reverse(elements.size());
    std::iota(reverse.rbegin(), reverse.rend(), size_t(0));
    EXPECT_EQ(order, reverse) << "trial " << trial;
  }
}
