//===- LayerDetection.cpp - finding a model's identical layers ------------===//

#include "colossal/cost/LayerDetection.h"

#include <functional>
#include <string>
#include <vector>

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

/// The ops that read only the step's data and constants, however deeply
/// (a padding mask made into additive scores, position arithmetic).
/// Exporters put them where their first reader is: nn.TransformerEncoder
/// makes its mask inside the first layer's attention, so that layer has
/// ops the others lack. Matching skips them.
std::vector<bool> dataOnlyOps(const Graph &graph) {
  std::vector<bool> dataOnly(graph.ops.size(), false);
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    bool only = true;
    for (const TensorUse &use : graph.ops[o].inputs) {
      const Value &v = graph.values[size_t(use.value)];
      int producer = v.producer >= 0 ? v.producer : v.reshardedFrom;
      only &= producer >= 0 ? bool(dataOnly[size_t(producer)]) : !v.isParameter;
    }
    dataOnly[o] = only;
  }
  return dataOnly;
}

} // namespace

DetectedLayers detectLayers(Graph &graph) {
  // Layers are matched over the ops that are not data-only (`kept`, in
  // order); positions below are indices into it.
  std::vector<bool> dataOnly = dataOnlyOps(graph);
  std::vector<int64_t> kept, position(graph.ops.size(), -1);
  for (size_t o = 0; o < graph.ops.size(); ++o)
    if (!dataOnly[o]) {
      position[o] = int64_t(kept.size());
      kept.push_back(int64_t(o));
    }
  const int64_t n = int64_t(kept.size());
  std::vector<size_t> signature(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    signature[size_t(i)] = signatureOf(graph, graph.ops[size_t(kept[size_t(i)])]);
  // A value a resharding delivers (a partitioned graph's sums and gathers
  // between blocks) counts as its source op's; a data-only op's result
  // counts as data, like an input.
  auto producer = [&](int64_t i, size_t input) -> int64_t {
    const Value &v = graph.values[size_t(graph.ops[size_t(kept[size_t(i)])].inputs[input].value)];
    int made = v.producer >= 0 ? v.producer : v.reshardedFrom;
    return made >= 0 ? position[size_t(made)] : -1;
  };
  auto opAt = [&](int64_t i) -> const Op & { return graph.ops[size_t(kept[size_t(i)])]; };
  auto matches = [&](int64_t i, int64_t period) {
    int64_t j = i + period;
    if (signature[size_t(i)] != signature[size_t(j)])
      return false;
    const Op &a = opAt(i), &b = opAt(j);
    if (a.inputs.size() != b.inputs.size())
      return false;
    for (size_t k = 0; k < a.inputs.size(); ++k) {
      int64_t pa = producer(i, k), pb = producer(j, k);
      bool sameValue = a.inputs[k].value == b.inputs[k].value;
      bool shifted = pa >= 0 && pb >= 0 && pb - pa == period;
      bool bothLeaves = pa < 0 && pb < 0; // parameters or data of the same shape
      // The first block reads the model's stem from before the run (an
      // embedding's norm), the next one the previous block's output: an op
      // of the same kind inside the previous block. Ops between the stem and
      // the first block (BERT's mask arithmetic) put them further apart
      // than one period.
      bool entering = pa >= 0 && pb >= 0 && pb - pa > period && pb >= i && pb < j && opAt(pa).kind == opAt(pb).kind;
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
      graph.ops[size_t(kept[size_t(best.firstOp + l * best.opsPerLayer + k)])].layer = int(l);
  // A data-only op between two ops of the layers belongs to the layer of
  // the next one (the layer that reads it first), so that every layer stays
  // one run of consecutive ops.
  std::vector<int> previous(graph.ops.size(), -1);
  for (size_t o = 0, seen = 0; o < graph.ops.size(); ++o) {
    previous[o] = seen ? graph.ops[seen - 1].layer : -1;
    if (!dataOnly[o])
      seen = o + 1;
  }
  for (size_t o = graph.ops.size(), next = 0; o-- > 0;) {
    if (!dataOnly[o])
      next = o + 1;
    else if (next && previous[o] >= 0 && graph.ops[next - 1].layer >= 0)
      graph.ops[o].layer = graph.ops[next - 1].layer;
  }
  if (best.layers > 0)
    best.firstOp = kept[size_t(best.firstOp)];
  return best;
}

} // namespace colossal::cost
