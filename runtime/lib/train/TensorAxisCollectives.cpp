//===- TensorAxisCollectives.cpp --------------------------------------------===//

#include "TensorAxisCollectives.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/kernels/SequenceParallel.h"

#include <algorithm>

namespace colossal::rt::trainer {

TensorAxisCollectives::TensorAxisCollectives(std::vector<Communicator *> axes) : axes_(std::move(axes)) {}

Tensor TensorAxisCollectives::allReduce(const Tensor &x, const std::string &axis) {
  return reduce(x, axis, ReduceOp::Sum);
}

Tensor TensorAxisCollectives::allReduceInPlace(Tensor &&x, const std::string &axis) {
  return reduceInPlace(std::move(x), axis, ReduceOp::Sum);
}

Tensor TensorAxisCollectives::allReduceMax(const Tensor &x, const std::string &axis) {
  return reduce(x, axis, ReduceOp::Max);
}

int64_t TensorAxisCollectives::rankOn(const std::string &axis) {
  return communicator(axis, "a slice").rank();
}

int64_t TensorAxisCollectives::ranksOn(const std::string &axis) {
  return communicator(axis, "a slice").size();
}

Tensor TensorAxisCollectives::allGather(const Tensor &x, const std::string &axis, int64_t dim) {
  Communicator &c = communicator(axis, "an all-gather");
  Runs runs = runsOf(x, dim, "all-gather", axis);
  // Rank r's block [outer, n, inner] becomes columns [r n, (r + 1) n) of
  // the result's dimension.
  Floats gathered = buffer<float>(x.floats.size() * size_t(c.size()), MemoryCategory::Communication);
  c.allGather(Buffer::of(staged(x.floats.data(), x.floats.size()), DType::F32, int64_t(x.floats.size())),
              Buffer::of(gathered.data(), DType::F32, int64_t(gathered.size())));
  Shape shape = x.shape;
  shape[size_t(dim)] *= c.size();
  Tensor result = Tensor::zeros(shape);
  int64_t run = runs.size * runs.inner;
  for (int64_t r = 0; r < c.size(); ++r)
    for (int64_t o = 0; o < runs.outer; ++o)
      std::copy_n(gathered.begin() + (r * runs.outer + o) * run, run, result.floats.begin() + (o * c.size() + r) * run);
  return result;
}

Tensor TensorAxisCollectives::allToAll(const Tensor &x, const std::string &axis, int64_t splitDim, int64_t concatDim) {
  Communicator &c = communicator(axis, "an all-to-all");
  Floats packed = host::blocksAlong(x, splitDim, c.size()),
         received = buffer<float>(packed.size(), MemoryCategory::Communication);
  c.allToAll(Buffer::of(staged(packed.data(), packed.size()), DType::F32, int64_t(packed.size())),
             Buffer::of(received.data(), DType::F32, int64_t(received.size())));
  Shape block = x.shape;
  block[size_t(splitDim)] /= c.size();
  return host::joinAlong(received, block, concatDim, c.size());
}

Tensor TensorAxisCollectives::ringShift(const Tensor &x, const std::string &axis) {
  Communicator &c = communicator(axis, "a ring step");
  if (x.integer)
    fail("step", "a ring step of integers over '" + axis + "'");
  Tensor received = Tensor::zeros(x.shape);
  int next = (c.rank() + 1) % c.size(), previous = (c.rank() + c.size() - 1) % c.size();
  c.sendRecv({{PeerTransfer::Send, next,
               Buffer::of(staged(x.floats.data(), x.floats.size()), DType::F32, int64_t(x.floats.size()))},
              {PeerTransfer::Recv, previous,
               Buffer::of(received.floats.data(), DType::F32, int64_t(received.floats.size()))}});
  return received;
}

Tensor TensorAxisCollectives::reduceScatter(const Tensor &x, const std::string &axis, int64_t dim) {
  Communicator &c = communicator(axis, "a reduce-scatter");
  Runs runs = runsOf(x, dim, "reduce-scatter", axis);
  if (runs.size % c.size())
    fail("step", "a reduce-scatter of " + host::describe(x.shape) + " along dimension " + std::to_string(dim) +
                     " over " + std::to_string(c.size()) + " ranks of '" + axis + "'");
  // Packed so rank r's slice is the r-th contiguous block.
  int64_t part = runs.size / c.size() * runs.inner;
  float *packed = staging(x.floats.size());
  for (int64_t r = 0; r < c.size(); ++r)
    for (int64_t o = 0; o < runs.outer; ++o)
      std::copy_n(x.floats.begin() + (o * c.size() + r) * part, part, packed + (r * runs.outer + o) * part);
  Shape shape = x.shape;
  shape[size_t(dim)] /= c.size();
  Tensor result = Tensor::zeros(shape);
  c.reduceScatter(Buffer::of(packed, DType::F32, int64_t(x.floats.size())),
                  Buffer::of(result.floats.data(), DType::F32, int64_t(result.floats.size())));
  return result;
}

TensorAxisCollectives::Runs TensorAxisCollectives::runsOf(const Tensor &x, int64_t dim, const char *what,
                                                          const std::string &axis) {
  if (x.integer || dim < 0 || size_t(dim) >= x.shape.size())
    fail("step", std::string("an ") + what + " over '" + axis + "' of " + host::describe(x.shape) +
                     (x.integer ? " integers" : "") + " along dimension " + std::to_string(dim));
  Runs runs;
  runs.size = x.shape[size_t(dim)];
  for (size_t d = 0; d < size_t(dim); ++d)
    runs.outer *= x.shape[d];
  for (size_t d = size_t(dim) + 1; d < x.shape.size(); ++d)
    runs.inner *= x.shape[d];
  return runs;
}

Communicator &TensorAxisCollectives::communicator(const std::string &axis, const std::string &what) {
  for (Communicator *c : axes_)
    if (c && c->axis() == axis)
      return *c;
  fail("step", what + " over mesh axis '" + axis + "', which this run does not have");
}

Tensor TensorAxisCollectives::broadcast(const Tensor &x, const std::string &axis, int64_t root) {
  Communicator &c = communicator(axis, "a broadcast");
  if (x.integer)
    fail("step", "a broadcast of an integer tensor over '" + axis + "'");
  Tensor result = c.rank() == root ? x : Tensor::zeros(x.shape);
  c.broadcast(Buffer::of(result.floats.data(), DType::F32, int64_t(result.floats.size())), int(root));
  return result;
}

Tensor TensorAxisCollectives::reduceTo(const Tensor &x, const std::string &axis, int64_t root) {
  Communicator &c = communicator(axis, "a reduce");
  if (x.integer)
    fail("step", "a reduce of an integer tensor over '" + axis + "'");
  Tensor result = x;
  c.reduce(Buffer::of(result.floats.data(), DType::F32, int64_t(result.floats.size())), int(root));
  return result;
}

Tensor TensorAxisCollectives::reduce(const Tensor &x, const std::string &axis, ReduceOp op) {
  return reduceInPlace(Tensor(x), axis, op);
}

Tensor TensorAxisCollectives::reduceInPlace(Tensor &&x, const std::string &axis, ReduceOp op) {
  Communicator &c = communicator(axis, "an all-reduce");
  if (x.integer)
    fail("step", "an all-reduce of an integer tensor over '" + axis + "'");
  Tensor result = std::move(x);
  float *sums = staged(result.floats.data(), result.floats.size());
  c.allReduce(Buffer::of(sums, DType::F32, int64_t(result.floats.size())), op);
  std::copy_n(sums, result.floats.size(), result.floats.begin());
  return result;
}

float *TensorAxisCollectives::staging(size_t n) {
  if (staging_.size() < n)
    staging_ = buffer<float>(n, MemoryCategory::Communication);
  return staging_.data();
}

float *TensorAxisCollectives::staged(const float *data, size_t n) { return std::copy_n(data, n, staging(n)) - n; }

} // namespace colossal::rt::trainer
