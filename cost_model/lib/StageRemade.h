//===- StageRemade.h - values every pipeline stage makes again --*- C++ -*-===//
//
// A pipelined step neither sends nor keeps what is made from the weights and
// constants alone (a rotary table, a causal mask, a weight's view): every
// stage function that reads such a value makes it again, forward and
// backward, as the compiler's stage split does (passes/partition/
// SplitStages.cpp, `readsOnlyWeights`). Values made from the batch are
// made on one stage and sent.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_STAGEREMADE_H
#define COLOSSAL_COST_LIB_STAGEREMADE_H

#include "colossal/cost/Graph.h"

#include <vector>

namespace colossal::cost {

/// Per value: whether an op makes it from the weights and constants alone.
std::vector<char> remadeOnEachStage(const Graph &graph);

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_STAGEREMADE_H
