//===- SequenceParallel.cpp -----------------------------------------------===//

#include "colossal/runtime/kernels/SequenceParallel.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/TensorOpShapes.h"
#include "colossal/runtime/kernels/VocabularyParallel.h"
#include "colossal/runtime/train/StepInterface.h"

#include <algorithm>
#include <limits>

namespace colossal::rt::host {

std::vector<Tensor> dropoutOfSlice(const Tensor &x, float ratio, const DropoutKey &key, int64_t dim,
                                   int64_t sliceIndex, int64_t slices) {
  if (x.integer || dim < 0 || size_t(dim) >= x.shape.size() || slices < 1 || sliceIndex < 0 || sliceIndex >= slices)
    fail("dropout (sequence slice)", "slice " + std::to_string(sliceIndex) + " of " + std::to_string(slices) +
                                         " along dimension " + std::to_string(dim) + " of " + describe(x.shape));
  int64_t outer = 1, inner = 1, size = x.shape[size_t(dim)];
  for (size_t d = 0; d < size_t(dim); ++d)
    outer *= x.shape[d];
  for (size_t d = size_t(dim) + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  Tensor out = Tensor::zeros(x.shape), mask = Tensor::zeros(x.shape, true);
  // Local element (o, i, k) is the whole tensor's (o, sliceIndex * size + i, k).
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < size; ++i)
      for (int64_t k = 0; k < inner; ++k) {
        size_t local = size_t((o * size + i) * inner + k);
        uint64_t whole = uint64_t((o * slices * size + sliceIndex * size + i) * inner + k);
        bool keep = ratio == 0 || dropoutKeeps(key.seed, key.step, key.firstIndex + whole, ratio);
        mask.ints[local] = keep;
        out.floats[local] = keep ? (ratio == 0 ? x.floats[local]
                                               : float(double(x.floats[local]) / (1.0 - double(ratio))))
                                 : 0.0f;
      }
  return results(std::move(out), std::move(mask));
}

namespace {

/// A tensor of `shape` as [outer, size, inner] around dimension `dim`.
struct Runs {
  int64_t outer = 1, size = 1, inner = 1;
};

Runs runsAround(const Shape &shape, int64_t dim, const char *op) {
  if (dim < 0 || size_t(dim) >= shape.size())
    fail(op, "dimension " + std::to_string(dim) + " of " + describe(shape));
  Runs runs;
  runs.size = shape[size_t(dim)];
  for (size_t d = 0; d < size_t(dim); ++d)
    runs.outer *= shape[d];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d)
    runs.inner *= shape[d];
  return runs;
}

} // namespace

Floats blocksAlong(const Tensor &x, int64_t splitDim, int64_t parts) {
  const char *op = "all_to_all (packing)";
  Runs runs = runsAround(x.shape, splitDim, op);
  if (x.integer || parts < 1 || runs.size % parts != 0)
    fail(op, describe(x.shape) + " along dimension " + std::to_string(splitDim) + " into " + std::to_string(parts) +
                 " equal parts");
  int64_t run = runs.size / parts * runs.inner;
  Floats packed = buffer<float>(x.floats.size(), MemoryCategory::Communication);
  for (int64_t j = 0; j < parts; ++j)
    for (int64_t o = 0; o < runs.outer; ++o)
      std::copy_n(x.floats.begin() + (o * parts + j) * run, run, packed.begin() + (j * runs.outer + o) * run);
  return packed;
}

Tensor joinAlong(const Floats &received, const Shape &block, int64_t concatDim, int64_t parts) {
  const char *op = "all_to_all (unpacking)";
  Runs runs = runsAround(block, concatDim, op);
  int64_t run = runs.size * runs.inner, blockSize = runs.outer * run;
  if (parts < 1 || int64_t(received.size()) != blockSize * parts)
    fail(op, std::to_string(received.size()) + " floats are not " + std::to_string(parts) + " blocks of " +
                 describe(block));
  Shape shape = block;
  shape[size_t(concatDim)] *= parts;
  Tensor out = Tensor::zeros(shape);
  for (int64_t r = 0; r < parts; ++r)
    for (int64_t o = 0; o < runs.outer; ++o)
      std::copy_n(received.begin() + r * blockSize + o * run, run, out.floats.begin() + (o * parts + r) * run);
  return out;
}

namespace {

/// Labels this rank counts (not ignored), checked against the classes.
int64_t countedHere(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex, const char *op) {
  if (scores.integer || !labels.integer || scores.shape.size() != 2 || labels.shape.size() != 1 ||
      labels.shape[0] != scores.shape[0])
    fail(op, "scores " + describe(scores.shape) + " and labels " + describe(labels.shape));
  return shapes::countedLabels(labels.ints.data(), scores.shape[0], scores.shape[1],
                               ignoreIndex.value_or(std::numeric_limits<int64_t>::min()), op);
}

/// The labels of this rank's rows that count (the vocabulary-parallel loss
/// checks them against the whole vocabulary).
int64_t labelsCounted(const Tensor &labels, std::optional<int64_t> ignoreIndex) {
  int64_t ignore = ignoreIndex.value_or(std::numeric_limits<int64_t>::min());
  return int64_t(std::count_if(labels.ints.begin(), labels.ints.end(), [&](int64_t l) { return l != ignore; }));
}

void requireReduced(const std::string &reduction, const char *op) {
  if (reduction != "mean" && reduction != "sum")
    fail(op, "reduction '" + reduction + "': a loss split by rows is summed over the ranks (mean or sum)");
}

} // namespace

Tensor tokenSplitCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                              const std::string &reduction, StepCollectives &collectives, const std::string &axis,
                              const std::string &vocabularyAxis, int64_t classes) {
  const char *op = "cross_entropy (split by tokens)";
  requireReduced(reduction, op);
  int64_t counted =
      vocabularyAxis.empty() ? countedHere(scores, labels, ignoreIndex, op) : labelsCounted(labels, ignoreIndex);
  double loss = 0;
  {
    // The partial sums are the op's scratch; only the loss is its value.
    MemoryScope scope(MemoryCategory::Workspace);
    Tensor sum = vocabularyAxis.empty() ? crossEntropy(scores, labels, ignoreIndex, "sum")
                                        : vocabularyParallelCrossEntropy(scores, labels, ignoreIndex, "sum",
                                                                         collectives, vocabularyAxis, classes);
    Tensor totals = collectives.allReduce(Tensor::ofFloats({2}, {sum.floats[0], float(counted)}), axis);
    loss = totals.floats[0];
    if (reduction == "mean")
      loss = totals.floats[1] > 0 ? loss / double(totals.floats[1]) : 0.0;
  }
  return Tensor::ofFloats({}, {float(loss)});
}

Tensor tokenSplitCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                  std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                  StepCollectives &collectives, const std::string &axis,
                                  const std::string &vocabularyAxis, int64_t classes) {
  const char *op = "cross_entropy_grad (split by tokens)";
  requireReduced(reduction, op);
  if (dloss.integer || dloss.floats.size() != 1)
    fail(op, "the loss gradient " + describe(dloss.shape) + " is not one float");
  double scale = dloss.floats[0];
  MemoryScope scope(MemoryCategory::Workspace);
  if (reduction == "mean") {
    int64_t counted =
        vocabularyAxis.empty() ? countedHere(scores, labels, ignoreIndex, op) : labelsCounted(labels, ignoreIndex);
    float total = collectives.allReduce(Tensor::ofFloats({1}, {float(counted)}), axis).floats[0];
    scale /= std::max(1.0, double(total));
  }
  Tensor scaled = Tensor::ofFloats({}, {float(scale)});
  MemoryScope result(MemoryCategory::Activations);
  if (!vocabularyAxis.empty())
    return vocabularyParallelCrossEntropyGrad(scores, labels, scaled, ignoreIndex, "sum", collectives, vocabularyAxis,
                                              classes);
  return crossEntropyGrad(scores, labels, scaled, ignoreIndex, "sum");
}

} // namespace colossal::rt::host
