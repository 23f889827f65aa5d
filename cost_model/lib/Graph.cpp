//===- Graph.cpp - the training computation as the cost model sees it ----===//

#include "colossal/cost/Graph.h"

#include <algorithm>

namespace colossal::cost {

int Graph::addValue(std::string name, DType dtype, bool isParameter) {
  values.push_back({std::move(name), dtype, isParameter, false, true, -1});
  return int(values.size()) - 1;
}

int64_t Graph::dimSize(const Op &op, const std::vector<int> &factors) {
  int64_t size = 1;
  for (int f : factors)
    size *= op.factors[f].size;
  return size;
}

int64_t Graph::elements(const Op &op, const TensorUse &use) const {
  int64_t n = 1;
  for (const auto &dim : use.dims)
    n *= dimSize(op, dim);
  return n;
}

std::vector<int64_t> Graph::parameterElements() const {
  std::vector<int64_t> elementsOf(values.size(), 0);
  for (const Op &op : ops)
    for (const TensorUse &use : op.inputs)
      if (values[use.value].isParameter)
        elementsOf[use.value] = elements(op, use);
  return elementsOf;
}

int64_t Graph::realLayers() const {
  if (layerRepeat.empty())
    return numLayers;
  int64_t total = 0;
  for (int64_t r : layerRepeat)
    total += r;
  return total;
}

int64_t Graph::firstRealLayer(int layer) const {
  if (layerRepeat.empty())
    return layer;
  int64_t first = 0;
  for (int l = 0; l < layer && size_t(l) < layerRepeat.size(); ++l)
    first += layerRepeat[size_t(l)];
  return first;
}

int64_t Graph::parameterCount() const {
  std::vector<int64_t> repeat(values.size(), 0);
  for (const Op &op : ops)
    for (const TensorUse &use : op.inputs)
      if (values[use.value].isParameter && repeat[use.value] == 0)
        repeat[use.value] = repeatOf(op.layer);
  std::vector<int64_t> elementsOf = parameterElements();
  int64_t total = 0;
  for (size_t v = 0; v < values.size(); ++v)
    total += elementsOf[v] * repeat[v];
  return total;
}

std::vector<int64_t> Graph::layerTrainableElements() const {
  std::vector<int64_t> elementsOf = parameterElements();
  std::vector<int64_t> layerElements(size_t(std::max(numLayers, 0)), 0);
  std::vector<char> counted(values.size(), 0);
  for (const Op &op : ops)
    for (const TensorUse &use : op.inputs) {
      const Value &value = values[use.value];
      if (!value.isParameter || value.frozen || counted[use.value])
        continue;
      counted[use.value] = 1;
      if (op.layer >= 0 && op.layer < numLayers)
        layerElements[size_t(op.layer)] += elementsOf[use.value];
    }
  return layerElements;
}

int64_t Graph::largestLayerTrainableElements() const {
  std::vector<int64_t> layers = layerTrainableElements();
  int64_t largest = layers.empty() ? 0 : *std::max_element(layers.begin(), layers.end());
  std::vector<int64_t> elementsOf = parameterElements();
  for (const Op &op : ops)
    for (const TensorUse &use : op.inputs)
      if (values[use.value].isParameter && !values[use.value].frozen)
        largest = std::max(largest, elementsOf[use.value]);
  return largest;
}

double Graph::modelFlops() const {
  double total = 0;
  for (const Op &op : ops)
    if (op.kind == OpKind::MatMul)
      total += (op.forwardFlops + op.backwardFlops) * double(repeatOf(op.layer));
  return total;
}

} // namespace colossal::cost
