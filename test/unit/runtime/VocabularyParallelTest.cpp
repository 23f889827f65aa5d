//===- VocabularyParallelTest.cpp - lookups and losses split by vocabulary -===//
//
// Each test runs T "ranks" as threads over an in-process stand-in for the
// tensor axis, every rank holding one slice of the vocabulary, and checks
// the ranks' results against the unsplit host ops: the lookups' parts sum
// to the whole lookup, the loss is the whole loss on every rank, and the
// ranks' gradient slices side by side are the whole gradient.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/kernels/VocabularyParallel.h"

#include "test/unit/runtime/TensorChecks.h"
#include "test/unit/runtime/ThreadCollectives.h"

#include <gtest/gtest.h>


using namespace colossal::rt;
using colossal::rt::testing::expectNear;
using colossal::rt::testing::onRanks;
using colossal::rt::testing::randomFloats;
using host::Tensor;

namespace {

/// Columns [first, first + count) of a [rows, columns] tensor.
Tensor columnsOf(const Tensor &t, int64_t first, int64_t count) {
  int64_t rows = t.shape[0], columns = t.shape[1];
  Tensor out = Tensor::zeros({rows, count});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < count; ++c)
      out.floats[size_t(r * count + c)] = t.floats[size_t(r * columns + first + c)];
  return out;
}

/// Rows [first, first + count) of a [rows, columns] tensor.
Tensor rowsOf(const Tensor &t, int64_t first, int64_t count) {
  int64_t columns = t.shape[1];
  return Tensor::ofFloats({count, columns}, std::vector<float>(t.floats.begin() + first * columns,
                                                               t.floats.begin() + (first + count) * columns));
}


TEST(VocabularyParallel, LookupPartsSumToTheWholeLookup) {
  const int64_t vocab = 12, dim = 3;
  Tensor table = randomFloats({vocab, dim}, 1, 1.0f);
  // Every row once, one twice, one counted from the end.
  Tensor ids = Tensor::ofInts({2, 4}, {0, 11, 5, 6, -1, 3, 5, 7});
  Tensor whole = host::gather(table, ids, 0, {2, 4, dim});
  Tensor wholeGrad = host::gatherGrad(ids, randomFloats({2, 4, dim}, 2, 1.0f), 0, {vocab, dim});
  Tensor dy = randomFloats({2, 4, dim}, 2, 1.0f);
  for (int ranks : {2, 3, 4}) {
    int64_t rows = vocab / ranks;
    Tensor sum = Tensor::zeros({2, 4, dim});
    for (int r = 0; r < ranks; ++r) {
      Tensor part = host::gatherFromSlice(rowsOf(table, r * rows, rows), ids, 0, r, ranks, {2, 4, dim});
      for (size_t i = 0; i < sum.floats.size(); ++i)
        sum.floats[i] += part.floats[i];
      // The slice's gradient is the whole gradient's rows.
      Tensor grad = host::gatherFromSliceGrad(ids, dy, 0, r, ranks, {rows, dim});
      EXPECT_EQ(grad.floats, rowsOf(wholeGrad, r * rows, rows).floats) << ranks << " ranks, rank " << r;
    }
    // Exactly: one rank contributes each row, the others zeros.
    EXPECT_EQ(sum.floats, whole.floats) << ranks << " ranks";
  }
}

TEST(VocabularyParallel, LossAndGradientEqualTheWholeLogits) {
  const int64_t rows = 6, vocab = 24;
  // Large logits: the maxima must be combined before the exponentials.
  Tensor logits = randomFloats({rows, vocab}, 3, 30.0f);
  Tensor labels = Tensor::ofInts({rows}, {0, 23, -100, 7, 12, 7});
  for (const char *reduction : {"mean", "sum", "none"}) {
    Tensor whole = host::crossEntropy(logits, labels, int64_t(-100), reduction);
    Tensor dloss = std::string(reduction) == "none" ? randomFloats({rows}, 4, 1.0f) : Tensor::ofFloats({}, {0.7f});
    Tensor wholeGrad = host::crossEntropyGrad(logits, labels, dloss, int64_t(-100), reduction);
    for (int ranks : {2, 3, 4}) {
      int64_t columns = vocab / ranks;
      std::vector<Tensor> loss(static_cast<size_t>(ranks)), grad(static_cast<size_t>(ranks));
      onRanks(ranks, [&](int r, StepCollectives &c) {
        Tensor mine = columnsOf(logits, r * columns, columns);
        loss[size_t(r)] = host::vocabularyParallelCrossEntropy(mine, labels, int64_t(-100), reduction, c, "tp");
        grad[size_t(r)] =
            host::vocabularyParallelCrossEntropyGrad(mine, labels, dloss, int64_t(-100), reduction, c, "tp");
      });
      for (int r = 0; r < ranks; ++r) {
        std::string what = std::string(reduction) + ", " + std::to_string(ranks) + " ranks, rank " + std::to_string(r);
        EXPECT_EQ(loss[size_t(r)].shape, whole.shape) << what;
        expectNear(loss[size_t(r)].floats, whole.floats, 1e-6, what.c_str());
        // The unsplit op keeps each row's log-sum-exp in float32: at these
        // magnitudes (about 90) its rounding moves softmax by up to 4e-6.
        expectNear(grad[size_t(r)].floats, columnsOf(wholeGrad, r * columns, columns).floats, 1e-5, what.c_str());
      }
    }
  }
}

TEST(VocabularyParallel, PaddingColumnsTakeNoPart) {
  // 10 classes padded to 12 over 4 ranks (3 columns each; the last rank
  // holds 1 class and 2 padding columns, filled with large values that
  // would dominate the softmax if counted).
  const int64_t rows = 5, classes = 10, padded = 12, ranks = 4, columns = padded / ranks;
  Tensor logits = randomFloats({rows, classes}, 5, 2.0f);
  Tensor labels = Tensor::ofInts({rows}, {0, 9, 4, 9, 3});
  Tensor whole = host::crossEntropy(logits, labels, std::nullopt, "mean");
  Tensor dloss = Tensor::ofFloats({}, {1.0f});
  Tensor wholeGrad = host::crossEntropyGrad(logits, labels, dloss, std::nullopt, "mean");
  Tensor withPadding = Tensor::zeros({rows, padded});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < padded; ++c)
      withPadding.floats[size_t(r * padded + c)] = c < classes ? logits.floats[size_t(r * classes + c)] : 50.0f;
  std::vector<Tensor> loss(static_cast<size_t>(ranks)), grad(static_cast<size_t>(ranks));
  onRanks(int(ranks), [&](int r, StepCollectives &c) {
    Tensor mine = columnsOf(withPadding, r * columns, columns);
    loss[size_t(r)] = host::vocabularyParallelCrossEntropy(mine, labels, std::nullopt, "mean", c, "tp", classes);
    grad[size_t(r)] =
        host::vocabularyParallelCrossEntropyGrad(mine, labels, dloss, std::nullopt, "mean", c, "tp", classes);
  });
  for (int r = 0; r < int(ranks); ++r) {
    expectNear(loss[size_t(r)].floats, whole.floats, 1e-6, "padded loss");
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t col = 0; col < columns; ++col) {
        int64_t global = r * columns + col;
        float want = global < classes ? wholeGrad.floats[size_t(row * classes + global)] : 0.0f;
        EXPECT_NEAR(grad[size_t(r)].floats[size_t(row * columns + col)], want, 1e-6)
            << "rank " << r << ", row " << row << ", column " << global;
      }
  }
  // A label in the padding is outside the vocabulary.
  EXPECT_THROW(onRanks(int(ranks),
                       [&](int r, StepCollectives &c) {
                         host::vocabularyParallelCrossEntropy(columnsOf(withPadding, r * columns, columns),
                                                              Tensor::ofInts({rows}, {0, 10, 4, 9, 3}),
                                                              std::nullopt, "mean", c, "tp", classes);
                       }),
               Error);
}

TEST(VocabularyParallel, LabelsOutsideTheWholeVocabularyAreErrors) {
  Tensor labels = Tensor::ofInts({2}, {1, 8}); // the vocabulary is 2 x 4
  EXPECT_THROW(onRanks(2,
                       [&](int, StepCollectives &c) {
                         host::vocabularyParallelCrossEntropy(Tensor::zeros({2, 4}), labels, std::nullopt, "mean", c,
                                                              "tp");
                       }),
               Error);
  // A label of the other rank's slice is fine.
  EXPECT_NO_THROW(onRanks(2, [&](int, StepCollectives &c) {
    host::vocabularyParallelCrossEntropy(Tensor::zeros({2, 4}), Tensor::ofInts({2}, {1, 7}), std::nullopt, "mean", c,
                                         "tp");
  }));
  EXPECT_THROW(host::gatherFromSlice(Tensor::zeros({4, 2}), Tensor::ofInts({1}, {8}), 0, 0, 2, {1, 2}), Error);
}

} // namespace
