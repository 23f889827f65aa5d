//===- SequenceParallelTest.cpp - all-to-alls and losses split by tokens ----===//
//
// T "ranks" as threads over a stand-in for the sequence axis. An
// all-to-all of each rank's slice of a tensor along the tokens gives its
// slice along the heads, and back; a loss over each rank's rows is the
// whole rows' loss on every rank, its gradients the whole gradient's rows;
// ring attention over each rank's tokens gives the whole attention's rows
// and gradients (causal or not, with a padding mask).
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/kernels/SequenceParallel.h"

#include "colossal/runtime/kernels/RingAttention.h"

#include "test/unit/runtime/TensorChecks.h"
#include "test/unit/runtime/ThreadCollectives.h"

#include <gtest/gtest.h>

using namespace colossal::rt;
using colossal::rt::testing::expectNear;
using colossal::rt::testing::onRanks;
using colossal::rt::testing::randomFloats;
using host::Tensor;

namespace {

/// Slice `index` of `parts` equal slices of `t` along `dim`, by indices.
Tensor sliceAlong(const Tensor &t, int64_t dim, int64_t index, int64_t parts) {
  host::Shape shape = t.shape;
  shape[size_t(dim)] /= parts;
  Tensor out = Tensor::zeros(shape);
  std::vector<int64_t> at(shape.size(), 0);
  for (size_t flat = 0; flat < out.floats.size(); ++flat) {
    // `at` is out's multi-index of `flat`; the whole tensor's is shifted.
    size_t source = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      source = source * size_t(t.shape[d]) + size_t(at[d] + (int64_t(d) == dim ? index * shape[d] : 0));
    out.floats[flat] = t.floats[source];
    for (size_t d = shape.size(); d-- > 0;) {
      if (++at[d] < shape[d])
        break;
      at[d] = 0;
    }
  }
  return out;
}

TEST(SequenceParallel, AllToAllTradesTheTokensSplitForTheHeadsSplit) {
  // [batch, heads, tokens, head size]
  Tensor whole = randomFloats({2, 4, 8, 3}, 11, 1.0f);
  for (int ranks : {2, 4}) {
    std::vector<Tensor> byHeads(static_cast<size_t>(ranks)), back(static_cast<size_t>(ranks));
    onRanks(ranks, [&](int r, StepCollectives &c) {
      byHeads[size_t(r)] = c.allToAll(sliceAlong(whole, 2, r, ranks), "sp", 1, 2);
      back[size_t(r)] = c.allToAll(byHeads[size_t(r)], "sp", 2, 1);
    });
    for (int r = 0; r < ranks; ++r) {
      Tensor heads = sliceAlong(whole, 1, r, ranks), tokens = sliceAlong(whole, 2, r, ranks);
      EXPECT_EQ(byHeads[size_t(r)].shape, heads.shape) << ranks << " ranks, rank " << r;
      EXPECT_EQ(byHeads[size_t(r)].floats, heads.floats) << ranks << " ranks, rank " << r;
      EXPECT_EQ(back[size_t(r)].floats, tokens.floats) << ranks << " ranks, rank " << r;
    }
  }
}

TEST(SequenceParallel, LossOverEachRanksRowsIsTheWholeLoss) {
  const int64_t rows = 12, classes = 7;
  Tensor logits = randomFloats({rows, classes}, 12, 3.0f);
  // Ignored rows unevenly spread: rank 0 of 2 counts fewer labels.
  Tensor labels = Tensor::ofInts({rows}, {-100, 3, -100, 6, 0, -100, 1, 2, 2, 5, 4, 0});
  for (const char *reduction : {"mean", "sum"}) {
    Tensor whole = host::crossEntropy(logits, labels, int64_t(-100), reduction);
    Tensor dloss = Tensor::ofFloats({}, {0.7f});
    Tensor wholeGrad = host::crossEntropyGrad(logits, labels, dloss, int64_t(-100), reduction);
    for (int ranks : {2, 3, 4}) {
      std::vector<Tensor> loss(static_cast<size_t>(ranks)), grad(static_cast<size_t>(ranks));
      onRanks(ranks, [&](int r, StepCollectives &c) {
        Tensor mine = sliceAlong(logits, 0, r, ranks);
        Tensor myLabels = Tensor::ofInts({rows / ranks}, std::vector<int64_t>(labels.ints.begin() + r * (rows / ranks),
                                                                              labels.ints.begin() + (r + 1) * (rows / ranks)));
        loss[size_t(r)] = host::tokenSplitCrossEntropy(mine, myLabels, int64_t(-100), reduction, c, "sp");
        grad[size_t(r)] = host::tokenSplitCrossEntropyGrad(mine, myLabels, dloss, int64_t(-100), reduction, c, "sp");
      });
      for (int r = 0; r < ranks; ++r) {
        std::string what = std::string(reduction) + ", " + std::to_string(ranks) + " ranks, rank " + std::to_string(r);
        EXPECT_EQ(loss[size_t(r)].shape, whole.shape) << what;
        expectNear(loss[size_t(r)].floats, whole.floats, 1e-6, what.c_str());
        expectNear(grad[size_t(r)].floats, sliceAlong(wholeGrad, 0, r, ranks).floats, 1e-6, what.c_str());
      }
    }
  }
}

TEST(SequenceParallel, RingAttentionIsTheWholeAttentionsRows) {
  const int64_t tokens = 12;
  Tensor q = randomFloats({2, 2, tokens, 4}, 21, 1.0f), k = randomFloats({2, 2, tokens, 4}, 22, 1.0f);
  Tensor v = randomFloats({2, 2, tokens, 3}, 23, 1.0f), dOut = randomFloats({2, 2, tokens, 3}, 24, 1.0f);
  // A padding mask: the second sequence's last five keys hidden.
  Tensor mask = Tensor::zeros({2, 1, 1, tokens});
  for (int64_t c = tokens - 5; c < tokens; ++c)
    mask.floats[size_t(tokens + c)] = -10000.0f;
  for (bool causal : {false, true})
    for (bool masked : {false, true}) {
      Tensor whole = host::attention(q, k, v, masked ? &mask : nullptr, 0.5f, causal);
      std::vector<Tensor> wholeGrad = host::attentionGrad(q, k, v, masked ? &mask : nullptr, dOut, 0.5f, causal);
      for (int ranks : {2, 3, 4}) {
        std::vector<Tensor> out(static_cast<size_t>(ranks));
        std::vector<std::vector<Tensor>> grad(static_cast<size_t>(ranks));
        onRanks(ranks, [&](int r, StepCollectives &c) {
          Tensor myMask = sliceAlong(mask, 3, r, ranks);
          out[size_t(r)] = host::ringAttention(sliceAlong(q, 2, r, ranks), sliceAlong(k, 2, r, ranks),
                                               sliceAlong(v, 2, r, ranks), masked ? &myMask : nullptr, 0.5f, causal,
                                               c, "sp");
          grad[size_t(r)] = host::ringAttentionGrad(sliceAlong(q, 2, r, ranks), sliceAlong(k, 2, r, ranks),
                                                    sliceAlong(v, 2, r, ranks), masked ? &myMask : nullptr,
                                                    sliceAlong(dOut, 2, r, ranks), 0.5f, causal, c, "sp");
        });
        for (int r = 0; r < ranks; ++r) {
          std::string what = std::string(causal ? "causal" : "full") + (masked ? ", masked, " : ", ") +
                             std::to_string(ranks) + " ranks, rank " + std::to_string(r);
          expectNear(out[size_t(r)].floats, sliceAlong(whole, 2, r, ranks).floats, 1e-5, what.c_str());
          for (size_t g = 0; g < 3; ++g)
            expectNear(grad[size_t(r)][g].floats, sliceAlong(wholeGrad[g], 2, r, ranks).floats, 1e-5,
                       (what + (g == 0 ? " dq" : g == 1 ? " dk" : " dv")).c_str());
        }
      }
    }
}

TEST(SequenceParallel, LossPerRowIsRefused) {
  Tensor logits = randomFloats({4, 3}, 13, 1.0f), labels = Tensor::ofInts({4}, {0, 1, 2, 0});
  EXPECT_THROW(onRanks(2,
                       [&](int, StepCollectives &c) {
                         host::tokenSplitCrossEntropy(logits, labels, std::nullopt, "none", c, "sp");
                       }),
               Error);
}

} // namespace
