//===- LayerDetection.cpp - finding a model's identical layers ------------===//

#include "colossal/cost/LayerDetection.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace colossal::cost {
namespace {

/// A 64-bit FNV-1a hash fed piece by piece (no text is built).
struct Signature {
  uint64_t hash = 1469598103934665603ull;
  void addByte(uint8_t byte) { hash = (hash ^ byte) * 1099511628211ull; }
  void add(uint64_t word) {
    for (int i = 0; i < 8; ++i, word >>= 8)
      addByte(uint8_t(word));
  }
  void add(double number) {
    uint64_t word;
    std::memcpy(&word, &number, sizeof word);
    add(word);
  }
  /// Text, its numbers dropped with `withoutNumbers`: "layers.3.attn" and
  /// "layers.4.attn" name the same op of two layers.
  void add(const std::string &text, bool withoutNumbers = false) {
    for (char c : text)
      if (!withoutNumbers || c < '0' || c > '9')
        addByte(uint8_t(c));
    add(uint64_t(0));
  }
};

/// Everything about an op except which values it reads, as one hash.
size_t signatureOf(const Graph &graph, const Op &op) {
  Signature s;
  s.add(op.name, /*withoutNumbers=*/true);
  s.add(uint64_t(op.kind));
  s.add(op.forwardFlops);
  s.add(op.backwardFlops);
  for (const Factor &f : op.factors) {
    s.add(f.name);
    s.add(uint64_t(f.size));
    s.add(uint64_t(f.kind));
  }
  for (const auto *uses : {&op.inputs, &op.outputs}) {
    s.add(uint64_t(uses->size()));
    for (const TensorUse &use : *uses) {
      const Value &v = graph.values[size_t(use.value)];
      s.add(uint64_t(v.dtype) * 2 + (v.isParameter ? 1 : 0));
      s.add(uint64_t(use.dims.size()));
      for (const auto &dim : use.dims) {
        s.add(uint64_t(dim.size()));
        for (int f : dim)
          s.add(uint64_t(f));
      }
    }
  }
  return size_t(s.hash);
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

/// The ops matched over (those not skipped), in order.
struct Matched {
  std::vector<int64_t> kept;     // graph op of each position
  std::vector<int64_t> position; // position of each graph op, -1 if skipped
};

Matched matchedOps(const Graph &graph, const std::vector<bool> &skipped) {
  Matched m;
  m.position.assign(graph.ops.size(), -1);
  for (size_t o = 0; o < graph.ops.size(); ++o)
    if (!skipped[o]) {
      m.position[o] = int64_t(m.kept.size());
      m.kept.push_back(int64_t(o));
    }
  return m;
}

/// The longest run of identical blocks over the ops not skipped; firstOp is
/// a position in `m.kept`.
DetectedLayers longestRun(const Graph &graph, const Matched &m) {
  const std::vector<int64_t> &kept = m.kept, &position = m.position;
  const int64_t n = int64_t(kept.size());
  std::vector<size_t> signature(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    signature[size_t(i)] = signatureOf(graph, graph.ops[size_t(kept[size_t(i)])]);
  // A value a resharding delivers (a partitioned graph's sums and gathers
  // between blocks) counts as its source op's; a skipped op's result
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
  // A maximal run of at least `period` matches holds exactly one multiple
  // of the period among any `period` consecutive starts: probing those
  // finds every run that makes two blocks, in n/period probes per period
  // (n log n for all) rather than n.
  DetectedLayers best;
  for (int64_t period = 1; 2 * period <= n; ++period) {
    // Its runs cover at most n / period whole blocks: one that cannot beat
    // the best found is not scanned (the multiples of the layers' period
    // match almost everywhere).
    if ((n / period) * period <= best.layers * best.opsPerLayer)
      continue;
    int64_t explored = 0; // starts below it belong to runs already seen
    for (int64_t probe = 0; probe + period < n; probe += period) {
      if (probe < explored || !matches(probe, period))
        continue;
      int64_t first = probe, end = probe + 1;
      while (first > explored && matches(first - 1, period))
        --first;
      while (end + period < n && matches(end, period))
        ++end;
      explored = end + 1;
      // The run [first, end) matched its successors: run / period + 1 blocks.
      int64_t run = end - first, blocks = run / period + 1;
      if (run >= period && blocks * period > best.layers * best.opsPerLayer) {
        best.firstOp = first;
        best.opsPerLayer = period;
        best.layers = blocks;
      }
    }
  }
  return best;
}

/// Work that every layer reads but that the exporter or common-subexpression
/// elimination left in one of them (the encoder memory every
/// nn.TransformerDecoderLayer transposes, merged into one transpose; a
/// position bias the first layer computes for all): the ops whose results
/// two of `run`'s layers read at the same place, and the lookups and
/// rearrangements of parameters that only feed them. The other layers lack
/// them, so they are skipped like data-only ops on the next try.
std::vector<bool> sharedByLayers(const Graph &graph, const Matched &m, const DetectedLayers &run,
                                 const std::vector<bool> &skipped) {
  const size_t n = graph.ops.size();
  std::vector<bool> shared(n, false);
  if (run.layers < 2)
    return shared;
  auto madeBy = [&](const TensorUse &use) {
    const Value &v = graph.values[size_t(use.value)];
    return v.producer >= 0 ? v.producer : v.reshardedFrom;
  };
  // Where in `run` an op is: (layer, place in the layer), or layer -1.
  auto placeOf = [&](size_t o) -> std::pair<int64_t, int64_t> {
    int64_t p = m.position[o] - run.firstOp;
    if (m.position[o] < 0 || p < 0 || p >= run.layers * run.opsPerLayer)
      return {-1, -1};
    return {p / run.opsPerLayer, p % run.opsPerLayer};
  };
  // Read at the same place in two layers: every layer's copy of an op reads
  // it, as they read a parameter. (The residual stream that a run out of
  // phase with the real layers splits is read at other places.)
  std::vector<std::vector<size_t>> readers(n);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> readPlaces(n);
  for (size_t o = 0; o < n; ++o)
    for (const TensorUse &use : graph.ops[o].inputs) {
      int made = madeBy(use);
      if (made < 0 || skipped[size_t(made)])
        continue;
      readers[size_t(made)].push_back(o);
      auto [layer, place] = placeOf(o);
      if (layer < 0)
        continue;
      for (auto [otherLayer, otherPlace] : readPlaces[size_t(made)])
        if (otherPlace == place && otherLayer != layer)
          shared[size_t(made)] = true;
      readPlaces[size_t(made)].push_back({layer, place});
    }
  // Looks parameters up and rearranges them, from data and the results of
  // such ops only (an embedding of relative positions, its transposes): no
  // contraction, norm or softmax, so neither a model's stem nor an encoder
  // stack whose output only the shared work reads.
  std::vector<bool> fromParameters(n, false);
  for (size_t o = 0; o < n; ++o) {
    OpKind kind = graph.ops[o].kind;
    bool light = kind == OpKind::Elementwise || kind == OpKind::Embedding;
    for (const TensorUse &use : graph.ops[o].inputs) {
      int made = madeBy(use);
      light &= made < 0 || skipped[size_t(made)] || fromParameters[size_t(made)];
    }
    fromParameters[o] = light;
  }
  for (size_t o = n; o-- > 0;) {
    if (shared[o] || !fromParameters[o] || skipped[o] || readers[o].empty())
      continue;
    bool feedsOnlyShared = true;
    for (size_t r : readers[o])
      feedsOnlyShared &= bool(shared[r]);
    shared[o] = feedsOnlyShared;
  }
  return shared;
}

} // namespace

DetectedLayers detectLayers(Graph &graph) {
  // Layers are matched over the ops not skipped: the data-only ones, then
  // also the work the layers found share, as long as that finds more.
  std::vector<bool> skipped = dataOnlyOps(graph);
  Matched m = matchedOps(graph, skipped);
  DetectedLayers best = longestRun(graph, m);
  for (;;) {
    std::vector<bool> widened = sharedByLayers(graph, m, best, skipped);
    if (std::find(widened.begin(), widened.end(), true) == widened.end())
      break;
    for (size_t o = 0; o < widened.size(); ++o)
      widened[o] = widened[o] || skipped[o];
    Matched wider = matchedOps(graph, widened);
    DetectedLayers found = longestRun(graph, wider);
    if (found.layers * found.opsPerLayer <= best.layers * best.opsPerLayer)
      break;
    skipped = std::move(widened);
    m = std::move(wider);
    best = found;
  }
  const std::vector<int64_t> &kept = m.kept;
  for (Op &op : graph.ops)
    op.layer = -1;
  graph.numLayers = int(best.layers);
  graph.layerRepeat.clear();
  for (int64_t l = 0; l < best.layers; ++l)
    for (int64_t k = 0; k < best.opsPerLayer; ++k)
      graph.ops[size_t(kept[size_t(best.firstOp + l * best.opsPerLayer + k)])].layer = int(l);
  // A skipped op between two ops of the layers belongs to the layer of
  // the next one (the layer that reads it first), so that every layer stays
  // one run of consecutive ops.
  std::vector<int> previous(graph.ops.size(), -1);
  for (size_t o = 0, seen = 0; o < graph.ops.size(); ++o) {
    previous[o] = seen ? graph.ops[seen - 1].layer : -1;
    if (!skipped[o])
      seen = o + 1;
  }
  for (size_t o = graph.ops.size(), next = 0; o-- > 0;) {
    if (!skipped[o])
      next = o + 1;
    else if (next && previous[o] >= 0 && graph.ops[next - 1].layer >= 0)
      graph.ops[o].layer = graph.ops[next - 1].layer;
  }
  if (best.layers > 0)
    best.firstOp = kept[size_t(best.firstOp)];
  return best;
}

} // namespace colossal::cost
