//===- GridLinearRanks.cpp - SUMMA over MPI on a q x q mesh ---------------===//
//
//   mpirun -np Q*Q grid-linear-ranks
//
// Every rank of the mesh "tp_row=q,tp_col=q" draws the same X, W and dY,
// runs SUMMA's forward and backward on its blocks through the trainer's
// step collectives (the MPI communicators of the mesh's axes), and checks
// its Y, dX and dW blocks against the unsplit product and gradients, and
// the runtime's counters per collective and axis against the cost model's
// 2D linear layer (cost/TensorGrid.h), call for call and byte for byte.
// Exit status 0 only when every rank passed.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/TensorGrid.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/comm/MpiCommunicator.h"
#include "colossal/runtime/comm/ProcessGroups.h"
#include "colossal/runtime/kernels/GridLinear.h"
#include "colossal/runtime/kernels/Kernels.h"

#include "runtime/lib/train/TensorAxisCollectives.h"
#include "test/unit/runtime/GridBlocks.h"

#include <cmath>
#include <cstdio>
#include <random>

using namespace colossal::rt;
using colossal::rt::testing::gridBlock;
using host::Tensor;

namespace {

Tensor drawn(host::Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t = Tensor::zeros(std::move(shape));
  for (float &v : t.floats)
    v = normal(rng);
  return t;
}

/// The first element further than 1e-5 (relative) from `want`, or "".
std::string differs(const char *what, const Tensor &got, const Tensor &want) {
  if (got.floats.size() != want.floats.size())
    return std::string(what) + ": " + std::to_string(got.floats.size()) + " elements, expected " +
           std::to_string(want.floats.size());
  for (size_t i = 0; i < got.floats.size(); ++i)
    if (std::fabs(got.floats[i] - want.floats[i]) > 1e-5 * std::max(1.0f, std::fabs(want.floats[i])))
      return std::string(what) + " element " + std::to_string(i) + " is " + std::to_string(got.floats[i]) +
             ", expected " + std::to_string(want.floats[i]);
  return "";
}

} // namespace

int main(int argc, char **argv) {
  MpiSession mpi(&argc, &argv);
  return runOrAbort(
      [&]() -> int {
        CommCounters counters;
        auto world = MpiCommunicator::world(&counters);
        int q = int(std::lround(std::sqrt(double(world->size()))));
        if (q * q != world->size())
          fail("grid-linear-ranks", std::to_string(world->size()) + " ranks are not a square grid");
        MeshShape mesh({{"tp_row", q}, {"tp_col", q}});
        ProcessGroups groups = ProcessGroups::overMpi(mesh, *world);
        trainer::TensorAxisCollectives collectives({&groups.axis("tp_row"), &groups.axis("tp_col")});
        // A group of axis tp_col is a grid row: its ranks differ in their column.
        int64_t i = groups.axis("tp_row").rank(), j = groups.axis("tp_col").rank();

        const int64_t m = 4 * q, k = 3 * q, n = 5 * q;
        Tensor x = drawn({m, k}, 41), w = drawn({k, n}, 42), dy = drawn({m, n}, 43);
        counters.reset();
        Tensor y = host::summaLinear(gridBlock(x, i, j, q), gridBlock(w, i, j, q), collectives, "tp_col", "tp_row");
        std::vector<Tensor> grads = host::summaLinearGrad(gridBlock(x, i, j, q), gridBlock(w, i, j, q),
                                                          gridBlock(dy, i, j, q), collectives, "tp_col", "tp_row");
        std::string failure =
            differs("Y", y, gridBlock(host::gemm(x, w, nullptr, false, false, 1, 0, {m, n}), i, j, q));
        if (failure.empty())
          failure = differs("dX", grads[0], gridBlock(host::gemm(dy, w, nullptr, false, true, 1, 0, {m, k}), i, j, q));
        if (failure.empty())
          failure = differs("dW", grads[1], gridBlock(host::gemm(x, dy, nullptr, true, false, 1, 0, {k, n}), i, j, q));

        namespace cost = colossal::cost;
        cost::GridLinear priced =
            cost::gridLinear(cost::TensorMode::TwoD, q, 1, double(m * k * 4), double(k * n * 4), double(m * n * 4));
        std::map<CommCounters::Key, CommCounters::Entry> expected;
        for (const std::vector<cost::GridCollective> *pass : {&priced.forward, &priced.backward})
          for (const cost::GridCollective &g : *pass) {
            CommCounters::Entry &e = expected[{cost::nameOf(g.collective), g.axis}];
            e.calls += g.calls;
            e.bytes += int64_t(g.bytes) * g.calls;
          }
        std::map<CommCounters::Key, CommCounters::Entry> counted = counters.snapshot();
        if (failure.empty() && counted.size() != expected.size())
          failure = "counted " + std::to_string(counted.size()) + " kinds of collective, the plan " +
                    std::to_string(expected.size()) + ": " + counters.json();
        for (const auto &[key, want] : expected)
          if (failure.empty() && (counted[key].calls != want.calls || counted[key].bytes != want.bytes))
            failure = key.first + " on " + key.second + ": counted " + std::to_string(counted[key].calls) +
                      " calls of " + std::to_string(counted[key].bytes) + " bytes, the plan " +
                      std::to_string(want.calls) + " of " + std::to_string(want.bytes);

        int64_t failed = failure.empty() ? 0 : 1;
        if (failed)
          std::fprintf(stderr, "FAIL rank %d (grid %lld, %lld): %s\n", world->rank(), (long long)i, (long long)j,
                       failure.c_str());
        world->allReduce(Buffer::of(&failed, DType::I64, 1));
        if (world->rank() == 0)
          std::printf("grid-linear-ranks: %d x %d grid: %s\n", q, q,
                      failed ? "FAILED" : "Y, dX, dW and the counters per axis as planned");
        return failed ? 1 : 0;
      },
      [] { MpiSession::abort(1); });
}
