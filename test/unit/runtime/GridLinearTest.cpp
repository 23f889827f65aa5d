//===- GridLinearTest.cpp - SUMMA's blocks against the whole product -------===//
//
// q x q "ranks" as threads, each holding one block of X, W and dY: the
// blocks SUMMA makes are the whole product's blocks and its gradients'
// (dX = dY W^T, dW = X^T dY, computed unsplit), and the broadcasts and
// reduces it makes per axis are the cost model's for a 2D linear layer
// (cost/TensorGrid.h, from the Optimus paper).
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/kernels/GridLinear.h"

#include "colossal/cost/TensorGrid.h"
#include "colossal/runtime/kernels/Kernels.h"

#include "test/unit/runtime/GridBlocks.h"
#include "test/unit/runtime/TensorChecks.h"
#include "test/unit/runtime/ThreadCollectives.h"

#include <gtest/gtest.h>

using namespace colossal::rt;
using colossal::rt::testing::expectNear;
using colossal::rt::testing::gridBlock;
using colossal::rt::testing::onGrid;
using colossal::rt::testing::randomFloats;
using colossal::rt::testing::ThreadCounters;
using host::Tensor;

TEST(GridLinear, SummaBlocksAreTheWholeProductsAndGradientsBlocks) {
  for (int q : {2, 3}) {
    const int64_t m = 4 * q, k = 3 * q, n = 5 * q;
    Tensor x = randomFloats({m, k}, 21, 1.0f), w = randomFloats({k, n}, 22, 0.5f), dy = randomFloats({m, n}, 23, 1.0f);
    Tensor y = host::gemm(x, w, nullptr, false, false, 1, 0, {m, n});
    Tensor dx = host::gemm(dy, w, nullptr, false, true, 1, 0, {m, k});
    Tensor dw = host::gemm(x, dy, nullptr, true, false, 1, 0, {k, n});
    size_t ranks = size_t(q * q);
    std::vector<Tensor> yBlocks(ranks), dxBlocks(ranks), dwBlocks(ranks);
    ThreadCounters counters;
    onGrid(q, "tp_col", "tp_row", &counters, [&](int i, int j, StepCollectives &c) {
      Tensor xb = gridBlock(x, i, j, q), wb = gridBlock(w, i, j, q);
      yBlocks[size_t(i * q + j)] = host::summaLinear(xb, wb, c, "tp_col", "tp_row");
      std::vector<Tensor> grads = host::summaLinearGrad(xb, wb, gridBlock(dy, i, j, q), c, "tp_col", "tp_row");
      dxBlocks[size_t(i * q + j)] = grads[0];
      dwBlocks[size_t(i * q + j)] = grads[1];
    });
    for (int i = 0; i < q; ++i)
      for (int j = 0; j < q; ++j) {
        std::string where = std::to_string(q) + "x" + std::to_string(q) + " rank (" + std::to_string(i) + ", " +
                            std::to_string(j) + ")";
        size_t r = size_t(i * q + j);
        expectNear(yBlocks[r].floats, gridBlock(y, i, j, q).floats, 1e-5, ("Y " + where).c_str());
        expectNear(dxBlocks[r].floats, gridBlock(dx, i, j, q).floats, 1e-5, ("dX " + where).c_str());
        expectNear(dwBlocks[r].floats, gridBlock(dw, i, j, q).floats, 1e-5, ("dW " + where).c_str());
        EXPECT_EQ(dxBlocks[r].shape, (host::Shape{m / q, k / q})) << where;
        EXPECT_EQ(dwBlocks[r].shape, (host::Shape{k / q, n / q})) << where;
      }

    // Per rank, the cost model's forward and backward collectives of a 2D
    // linear layer of these sizes (fp32), call for call and byte for byte.
    namespace cost = colossal::cost;
    cost::GridLinear priced =
        cost::gridLinear(cost::TensorMode::TwoD, q, 1, double(m * k * 4), double(k * n * 4), double(m * n * 4));
    std::map<std::pair<std::string, std::string>, ThreadCounters::Entry> expected;
    for (const std::vector<cost::GridCollective> *pass : {&priced.forward, &priced.backward})
      for (const cost::GridCollective &g : *pass) {
        ThreadCounters::Entry &e = expected[{cost::nameOf(g.collective), g.axis}];
        e.calls += g.calls * int64_t(ranks);
        e.bytes += int64_t(g.bytes) * g.calls * int64_t(ranks);
      }
    std::map<std::pair<std::string, std::string>, ThreadCounters::Entry> counted = counters.entries();
    ASSERT_EQ(counted.size(), expected.size()) << q;
    for (const auto &[key, want] : expected) {
      EXPECT_EQ(counted[key].calls, want.calls) << key.first << " on " << key.second << ", q=" << q;
      EXPECT_EQ(counted[key].bytes, want.bytes) << key.first << " on " << key.second << ", q=" << q;
    }
  }
}

TEST(GridLinear, LeadingDimensionsAreRowsAndBadGridsAreRefused) {
  // [2, 4, 6] times [6, 4] on a 2 x 2 grid: the leading dimensions are the
  // rows of X, so a [2, 2, 3] block multiplies like its [4, 3] matrix.
  const int q = 2;
  Tensor x = randomFloats({8, 6}, 31, 1.0f), w = randomFloats({6, 4}, 32, 1.0f);
  Tensor y = host::gemm(x, w, nullptr, false, false, 1, 0, {8, 4});
  std::vector<Tensor> blocks(4);
  onGrid(q, "tp_col", "tp_row", nullptr, [&](int i, int j, StepCollectives &c) {
    Tensor xb = gridBlock(x, i, j, q);
    xb.shape = {2, 2, 3};
    blocks[size_t(i * q + j)] = host::summaLinear(xb, gridBlock(w, i, j, q), c, "tp_col", "tp_row");
  });
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < q; ++j) {
      EXPECT_EQ(blocks[size_t(i * q + j)].shape, (host::Shape{2, 2, 2}));
      expectNear(blocks[size_t(i * q + j)].floats, gridBlock(y, i, j, q).floats, 1e-5, "3D X");
    }
  // Blocks that do not multiply name their shapes.
  try {
    onGrid(q, "tp_col", "tp_row", nullptr, [&](int, int, StepCollectives &c) {
      host::summaLinear(Tensor::zeros({4, 3}), Tensor::zeros({2, 2}), c, "tp_col", "tp_row");
    });
    FAIL() << "mismatched blocks were multiplied";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("[4, 3] and [2, 2] do not multiply"), std::string::npos) << e.what();
  }
}

// The step charges SUMMA's results to its own category, and nothing else
// the product makes: the blocks received and the partial sums sent are
// communication buffers, freed before it returns.
TEST(GridLinear, OnlyTheResultsAreChargedToTheCaller) {
  Tensor x = randomFloats({4, 6}, 41, 1.0f), w = randomFloats({6, 8}, 42, 1.0f), dy = randomFloats({4, 8}, 43, 1.0f);
  for (int q : {1, 2}) {
    MemoryTracker &memory = MemoryTracker::global();
    onGrid(q, "tp_col", "tp_row", nullptr, [&](int i, int j, StepCollectives &c) {
      Tensor xb = gridBlock(x, i, j, q), wb = gridBlock(w, i, j, q), dyb = gridBlock(dy, i, j, q);
      if (i != 0 || j != 0) {
        host::summaLinear(xb, wb, c, "tp_col", "tp_row");
        host::summaLinearGrad(xb, wb, dyb, c, "tp_col", "tp_row");
        return;
      }
      MemoryScope scope(MemoryCategory::Activations);
      int64_t before = memory.current(MemorySpace::Host, MemoryCategory::Activations);
      memory.resetPeaks();
      Tensor y = host::summaLinear(xb, wb, c, "tp_col", "tp_row");
      EXPECT_EQ(memory.peak(MemorySpace::Host, MemoryCategory::Activations) - before,
                int64_t(y.floats.size() * sizeof(float)))
          << q;
      memory.resetPeaks();
      std::vector<Tensor> grads = host::summaLinearGrad(xb, wb, dyb, c, "tp_col", "tp_row");
      EXPECT_EQ(memory.peak(MemorySpace::Host, MemoryCategory::Activations) - before,
                int64_t((y.floats.size() + grads[0].floats.size() + grads[1].floats.size()) * sizeof(float)))
          << q;
    });
  }
}

// A weight stored [out, in] (W^T): rank (i, j) holds (W_ij)^T, block (j, i)
// of W^T, and SUMMA reads it transposed in place; the weight gradient comes
// in the same layout.
TEST(GridLinear, TransposedWeightBlocksGiveTheSameProductAndGradients) {
  const int q = 2;
  const int64_t m = 4 * q, k = 3 * q, n = 5 * q;
  Tensor x = randomFloats({m, k}, 51, 1.0f), w = randomFloats({k, n}, 52, 0.5f), dy = randomFloats({m, n}, 53, 1.0f);
  Tensor y = host::gemm(x, w, nullptr, false, false, 1, 0, {m, n});
  Tensor dx = host::gemm(dy, w, nullptr, false, true, 1, 0, {m, k});
  Tensor dw = host::gemm(x, dy, nullptr, true, false, 1, 0, {k, n});
  std::vector<Tensor> yBlocks(4), dxBlocks(4), dwtBlocks(4);
  onGrid(q, "tp_col", "tp_row", nullptr, [&](int i, int j, StepCollectives &c) {
    Tensor xb = gridBlock(x, i, j, q), wtb = host::transpose(gridBlock(w, i, j, q), {1, 0});
    size_t r = size_t(i * q + j);
    yBlocks[r] = host::summaLinear(xb, wtb, c, "tp_col", "tp_row", /*transposed=*/true);
    std::vector<Tensor> grads = host::summaLinearGrad(xb, wtb, gridBlock(dy, i, j, q), c, "tp_col", "tp_row", true);
    dxBlocks[r] = grads[0], dwtBlocks[r] = grads[1];
  });
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < q; ++j) {
      size_t r = size_t(i * q + j);
      expectNear(yBlocks[r].floats, gridBlock(y, i, j, q).floats, 1e-5, "Y");
      expectNear(dxBlocks[r].floats, gridBlock(dx, i, j, q).floats, 1e-5, "dX");
      expectNear(dwtBlocks[r].floats, host::transpose(gridBlock(dw, i, j, q), {1, 0}).floats, 1e-5, "dW^T");
    }
}
