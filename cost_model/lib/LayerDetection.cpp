//===- LayerDetection.cpp - finding a model's identical layers ------------===//

#include "colossal/cost/LayerDetection.h"

#include <functional>
#include <string>

namespace colossal::cost {
namespace {

/// An op's name with its numbers dropped: "layers.3.attn" and
/// "layers.4.attn" name the same op of two layers.
std::string withoutNumbers(const std::string &name) {
  std::string out;
  for (char c : name)
    if (c < '0' || c > '9')
      out += c;
  return out;
}

/// Everything about an op except which values it reads, as one hash.
size_t signatureOf(const Graph &graph, const Op &op) {
  std::string text = withoutNumbers(op.name) + "|" + std::to_string(int(op.kind)) + "|" + std::to_string(op.forwardFlops) + "|" +
                     std::to_string(op.backwardFlops);
  for (const Factor &f : op.factors)
    text += "|" + f.name + ":" + std::to_string(f.size) + ":" + std::to_string(int(f.kind));
  for (const auto *uses : {&op.inputs, &op.outputs})
    for (const TensorUse &use : *uses) {
      const Value &v = graph.values[size_t(use.value)];
      text += "|" + std::to_string(int(v.dtype)) + (v.isParameter ? "p" : "a");
      for (const auto &dim : use.dims) {
        text += "[";
        for (int f : dim)
          text += std::to_string(f) + ",";
      }
    }
  return std::hash<std::string>()(text);
}

} // namespace

DetectedLayers detectLayers(Graph &graph) {
  const int64_t n = int64_t(graph.ops.size());
  std::vector<size_t> signature(static_cast<size_t>(n));
  for (int64_t o = 0; o < n; ++o)
    signature[size_t(o)] = signatureOf(graph, graph.ops[size_t(o)]);
  // A value a resharding delivers (a partitioned graph's sums and gathers
  // between blocks) counts as its source op's.
  auto producer = [&](int64_t o, size_t input) {
    const Value &v = graph.values[size_t(graph.ops[size_t(o)].inputs[input].value)];
    return v.producer >= 0 ? v.producer : v.reshardedFrom;
  };
  auto matches = [&](int64_t i, int64_t period) {
    int64_t j = i + period;
    if (signature[size_t(i)] != signature[size_t(j)])
      return false;
    const Op &a = graph.ops[size_t(i)], &b = graph.ops[size_t(j)];
    if (a.inputs.size() != b.inputs.size())
      return false;
    for (size_t k = 0; k < a.inputs.size(); ++k) {
      int pa = producer(i, k), pb = producer(j, k);
      bool sameValue = a.inputs[k].value == b.inputs[k].value;
      bool shifted = pa >= 0 && pb >= 0 && pb - pa == period;
      bool bothLeaves = pa < 0 && pb < 0; // parameters or data of the same shape
      // The first block reads the model's stem from before the run (an
      // embedding's norm), the next one the previous block's output: an op
      // of the same kind inside the previous block. Ops between the stem and
      // the first block (BERT's mask arithmetic) put them further apart
      // than one period.
      bool entering = pa >= 0 && pb >= 0 && pb - pa > period && pb >= i && pb < j &&
                      graph.ops[size_t(pa)].kind == graph.ops[size_t(pb)].kind;
      if (!sameValue && !shifted && !bothLeaves && !entering)
        return false;
    }
    return true;
  };
  DetectedLayers best;
  for (int64_t period = 1; 2 * period <= n; ++period) {
    int64_t run = 0;
    for (int64_t i = 0; i + period <= n; ++i) {
      bool ok = i + period < n && matches(i, period);
      if (ok) {
        ++run;
        continue;
      }
      // The run [i - run, i) matched its successors: run / period + 1 blocks.
      int64_t blocks = run / period + 1;
      if (run >= period && blocks * period > best.layers * best.opsPerLayer) {
        best.firstOp = i - run;
        best.opsPerLayer = period;
        best.layers = blocks;
      }
      run = 0;
    }
  }
  for (Op &op : graph.ops)
    op.layer = -1;
  graph.numLayers = int(best.layers);
  graph.layerRepeat.clear();
  for (int64_t l = 0; l < best.layers; ++l)
    for (int64_t k = 0; k < best.opsPerLayer; ++k)
      graph.ops[size_t(best.firstOp + l * best.opsPerLayer + k)].layer = int(l);
  return best;
}

} // namespace colossal::cost
