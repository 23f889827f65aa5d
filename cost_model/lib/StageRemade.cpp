//===- StageRemade.cpp ----------------------------------------------------===//

#include "StageRemade.h"

namespace colossal::cost {

std::vector<char> remadeOnEachStage(const Graph &graph) {
  // Per value: whether it depends on the batch (an input, or an op reading
  // one; an op reading nothing, as an embedding's stand-in, is taken to).
  std::vector<char> fromBatch(graph.values.size(), 0);
  for (size_t v = 0; v < graph.values.size(); ++v)
    fromBatch[v] = graph.values[v].producer < 0 && !graph.values[v].isParameter && !graph.values[v].constant;
  for (const Op &op : graph.ops) {
    char any = op.inputs.empty();
    for (const TensorUse &use : op.inputs)
      any |= fromBatch[size_t(use.value)];
    for (const TensorUse &out : op.outputs)
      fromBatch[size_t(out.value)] = any;
  }
  std::vector<char> remade(graph.values.size(), 0);
  for (size_t v = 0; v < graph.values.size(); ++v)
    remade[v] = graph.values[v].producer >= 0 && !fromBatch[v];
  return remade;
}

} // namespace colossal::cost
