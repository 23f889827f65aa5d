//===- VocabularyParallel.cpp ---------------------------------------------===//

#include "colossal/runtime/kernels/VocabularyParallel.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/TensorIndexing.h"
#include "colossal/runtime/kernels/TensorOpShapes.h"
#include "colossal/runtime/train/StepInterface.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace colossal::rt::host {

namespace ix = colossal::rt::indexing;

namespace {

/// The run of a split dimension a slice holds: [first, first + size) of
/// `whole`.
struct Run {
  int64_t first, size, whole;
  /// `index` of the whole dimension (checked; negative counts from the
  /// end) as an index into the run, or -1 when outside it.
  int64_t local(int64_t index, const char *op) const {
    if (index < -whole || index >= whole)
      fail(op, "index " + std::to_string(index) + " outside a dimension of " + std::to_string(whole));
    int64_t at = (index < 0 ? index + whole : index) - first;
    return at >= 0 && at < size ? at : -1;
  }
};

Run runOf(int64_t size, int64_t sliceIndex, int64_t slices, const char *op) {
  if (slices < 1 || sliceIndex < 0 || sliceIndex >= slices)
    fail(op, "slice " + std::to_string(sliceIndex) + " of " + std::to_string(slices));
  return Run{sliceIndex * size, size, size * slices};
}

int64_t axisIn(int64_t axis, const Shape &shape, const char *op) {
  int64_t rank = int64_t(shape.size());
  if (axis < -rank || axis >= rank)
    fail(op, "axis " + std::to_string(axis) + " outside rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void requireKinds(const Tensor &scores, const Tensor &labels, const char *op) {
  if (scores.integer)
    fail(op, "the logits are integers");
  shapes::requireLossOperands(scores.shape, labels.shape, labels.integer, op);
}

/// Each row's log-sum-exp over all the axis's columns (the first `columns`
/// of this rank's are classes; the rest pad the vocabulary): the maxima
/// first (for stability), then the exponentials' sums. `target`, when
/// given, is each row's label logit (0 where another rank holds it or the
/// row is ignored), summed over the axis in the same call.
TrackedVector<double> logSumExp(const Tensor &scores, int64_t columns, StepCollectives &collectives,
                                const std::string &axis, Floats *target) {
  int64_t rows = scores.shape[0], stride = scores.shape[1];
  // The rows' maxima and sums are summed over the axis: communication buffers.
  MemoryScope scope(MemoryCategory::Communication);
  Tensor max = Tensor::zeros({rows});
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = scores.floats.data() + r * stride;
    max.floats[size_t(r)] = columns ? *std::max_element(x, x + columns) : -std::numeric_limits<float>::infinity();
  }
  max = collectives.allReduceMax(max, axis);
  // One sum for both: the exponentials' sums, then the label logits.
  Tensor sums = Tensor::zeros({rows * (target ? 2 : 1)});
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = scores.floats.data() + r * stride;
    double sum = 0;
    for (int64_t c = 0; c < columns; ++c)
      sum += std::exp(double(x[c]) - max.floats[size_t(r)]);
    sums.floats[size_t(r)] = float(sum);
    if (target)
      sums.floats[size_t(rows + r)] = (*target)[size_t(r)];
  }
  sums = collectives.allReduce(sums, axis);
  TrackedVector<double> lse = scratch<double>(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    lse[size_t(r)] = double(max.floats[size_t(r)]) + std::log(double(sums.floats[size_t(r)]));
  if (target)
    for (int64_t r = 0; r < rows; ++r)
      (*target)[size_t(r)] = sums.floats[size_t(rows + r)];
  return lse;
}

} // namespace

Tensor gatherFromSlice(const Tensor &slice, const Tensor &indices, int64_t axis, int64_t sliceIndex, int64_t slices,
                       const Shape &out) {
  const char *op = "gather (vocabulary slice)";
  if (!indices.integer)
    fail(op, "the indices are not integers");
  axis = axisIn(axis, slice.shape, op);
  Run run = runOf(slice.shape[size_t(axis)], sliceIndex, slices, op);
  int64_t outer = ix::product(slice.shape, 0, size_t(axis)), inner = ix::product(slice.shape, size_t(axis) + 1);
  int64_t count = indices.elements();
  Tensor result = Tensor::zeros(out, slice.integer);
  if (result.elements() != outer * count * inner)
    fail(op, "cannot take " + describe(indices.shape) + " from " + describe(slice.shape) + " into " + describe(out));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = run.local(indices.ints[size_t(i)], op);
      if (at < 0)
        continue;
      int64_t from = (o * run.size + at) * inner, to = (o * count + i) * inner;
      if (slice.integer)
        std::copy_n(slice.ints.begin() + from, inner, result.ints.begin() + to);
      else
        std::copy_n(slice.floats.begin() + from, inner, result.floats.begin() + to);
    }
  return result;
}

Tensor gatherFromSliceGrad(const Tensor &indices, const Tensor &dy, int64_t axis, int64_t sliceIndex, int64_t slices,
                           const Shape &sliceShape) {
  const char *op = "gather_grad (vocabulary slice)";
  if (!indices.integer || dy.integer)
    fail(op, "needs integer indices and a float gradient");
  axis = axisIn(axis, sliceShape, op);
  Run run = runOf(sliceShape[size_t(axis)], sliceIndex, slices, op);
  int64_t outer = ix::product(sliceShape, 0, size_t(axis)), inner = ix::product(sliceShape, size_t(axis) + 1);
  int64_t count = indices.elements();
  if (dy.elements() != outer * count * inner)
    fail(op, "a gradient of " + describe(dy.shape) + " for " + describe(indices.shape) + " indices into " +
                 describe(sliceShape));
  Tensor result = Tensor::zeros(sliceShape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = run.local(indices.ints[size_t(i)], op);
      if (at < 0)
        continue;
      float *row = result.floats.data() + (o * run.size + at) * inner;
      const float *g = dy.floats.data() + (o * count + i) * inner;
      for (int64_t j = 0; j < inner; ++j)
        row[j] += g[j];
    }
  return result;
}

/// The classes among the whole's columns, and how many of this rank's
/// columns are classes (the rest pad the vocabulary).
std::pair<int64_t, int64_t> classesOf(const Run &run, int64_t classes, const char *op) {
  if (classes < 0)
    return {run.whole, run.size};
  if (classes > run.whole || classes <= run.whole - run.size)
    fail(op, std::to_string(classes) + " classes in " + std::to_string(run.whole) + " columns of " +
                 std::to_string(run.size) + " per rank");
  return {classes, std::clamp<int64_t>(classes - run.first, 0, run.size)};
}

Tensor vocabularyParallelCrossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                                      const std::string &reduction, StepCollectives &collectives,
                                      const std::string &axis, int64_t classes) {
  const char *op = "cross_entropy (vocabulary-parallel)";
  requireKinds(scores, labels, op);
  int64_t rows = scores.shape[0], columns = scores.shape[1];
  Run run = runOf(columns, collectives.rankOn(axis), collectives.ranksOn(axis), op);
  auto [whole, mine] = classesOf(run, classes, op);
  int64_t ignore = ignoreIndex.value_or(std::numeric_limits<int64_t>::min());
  int64_t counted = shapes::countedLabels(labels.ints.data(), rows, whole, ignore, op);
  Floats target = scratch<float>(size_t(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels.ints[size_t(r)];
    if (label != ignore && label >= run.first && label < run.first + run.size)
      target[size_t(r)] = scores.floats[size_t(r * columns + label - run.first)];
  }
  TrackedVector<double> lse = logSumExp(scores, mine, collectives, axis, &target);
  Floats loss = scratch<float>(size_t(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    if (labels.ints[size_t(r)] != ignore)
      loss[size_t(r)] = float(lse[size_t(r)] - double(target[size_t(r)]));
  if (reduction == "none")
    return Tensor::ofFloats({rows}, loss);
  return Tensor::ofFloats({}, {float(shapes::reduceRowLosses(loss, counted, reduction))});
}

Tensor vocabularyParallelCrossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                                          std::optional<int64_t> ignoreIndex, const std::string &reduction,
                                          StepCollectives &collectives, const std::string &axis, int64_t classes) {
  const char *op = "cross_entropy_grad (vocabulary-parallel)";
  requireKinds(scores, labels, op);
  if (dloss.integer)
    fail(op, "the loss gradient is integer");
  int64_t rows = scores.shape[0], columns = scores.shape[1];
  Run run = runOf(columns, collectives.rankOn(axis), collectives.ranksOn(axis), op);
  auto [whole, mine] = classesOf(run, classes, op);
  int64_t ignore = ignoreIndex.value_or(std::numeric_limits<int64_t>::min());
  int64_t counted = shapes::countedLabels(labels.ints.data(), rows, whole, ignore, op);
  Floats scale = shapes::rowGradientScales(dloss.floats, rows, counted, reduction);
  // The denominators again (two small sums), not kept from the forward.
  TrackedVector<double> lse = logSumExp(scores, mine, collectives, axis, nullptr);
  Tensor out = Tensor::zeros(scores.shape);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels.ints[size_t(r)];
    if (label == ignore)
      continue;
    const float *x = scores.floats.data() + r * columns;
    float *g = out.floats.data() + r * columns;
    for (int64_t c = 0; c < mine; ++c) // padding columns keep a zero gradient
      g[c] = float(std::exp(double(x[c]) - lse[size_t(r)])) * scale[size_t(r)];
    if (label >= run.first && label < run.first + run.size)
      g[label - run.first] -= scale[size_t(r)];
  }
  return out;
}

} // namespace colossal::rt::host
