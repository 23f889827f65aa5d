//===- GraphScaling.cpp - a graph at another microbatch size --------------===//

#include "colossal/cost/GraphScaling.h"

namespace colossal::cost {

std::optional<Graph> graphAtBatch(const Graph &one, const Graph &two, int64_t microbatch, std::string &error) {
  const int64_t m = one.microbatch;
  if (m < 1 || two.microbatch != 2 * m) {
    error =
        "the graphs are at " + std::to_string(m) + " and " + std::to_string(two.microbatch) + " samples, not m and 2m";
    return std::nullopt;
  }
  if (one.ops.size() != two.ops.size() || one.values.size() != two.values.size() ||
      one.numLayers != two.numLayers) {
    error = "the graphs at " + std::to_string(m) + " and " + std::to_string(2 * m) + " samples differ in structure";
    return std::nullopt;
  }
  Graph out = one;
  for (size_t o = 0; o < one.ops.size(); ++o) {
    const Op &a = one.ops[o], &b = two.ops[o];
    Op &op = out.ops[o];
    if (a.name != b.name || a.factors.size() != b.factors.size() || a.layer != b.layer) {
      error = "op " + std::to_string(o) + " (" + a.name + ") differs between the graphs at " + std::to_string(m) +
              " and " + std::to_string(2 * m) + " samples";
      return std::nullopt;
    }
    for (size_t f = 0; f < a.factors.size(); ++f) {
      if (b.factors[f].size == a.factors[f].size)
        continue;
      if (b.factors[f].size != 2 * a.factors[f].size || a.factors[f].size % m != 0) {
        error = "op " + std::to_string(o) + " (" + a.name + "): factor " + a.factors[f].name + " grows from " +
                std::to_string(a.factors[f].size) + " to " + std::to_string(b.factors[f].size) +
                " with the batch, not in proportion";
        return std::nullopt;
      }
      op.factors[f].size = a.factors[f].size / m * microbatch;
    }
    // FLOPs grow linearly: each sample adds what the m samples of `two`
    // added over `one`, divided among them.
    op.forwardFlops = a.forwardFlops + (b.forwardFlops - a.forwardFlops) * double(microbatch - m) / double(m);
    op.backwardFlops = a.backwardFlops + (b.backwardFlops - a.backwardFlops) * double(microbatch - m) / double(m);
  }
  out.microbatch = microbatch;
  out.tokensPerMicrobatch =
      one.tokensPerMicrobatch + (two.tokensPerMicrobatch - one.tokensPerMicrobatch) / m * (microbatch - m);
  return out;
}

} // namespace colossal::cost
