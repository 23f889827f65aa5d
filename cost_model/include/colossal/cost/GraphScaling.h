//===- GraphScaling.h - a graph at another microbatch size ---------*- C++ -*-===//
//
// The search tries several microbatch sizes. Importing the model again for
// each costs seconds for a large one; instead, the graphs at m and at 2m
// samples tell which factors are the batch (their size doubles) and how
// each op's FLOPs grow with it (linearly), which gives the graph at any
// size. Everything else (factor rules, parameters, layers) is the same.
// (At one sample an export often has another structure: a batch dimension
// of 1 is reshaped away. The graphs at two and four then serve the larger
// sizes.)
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_GRAPHSCALING_H
#define COLOSSAL_COST_GRAPHSCALING_H

#include "colossal/cost/Graph.h"

#include <optional>
#include <string>

namespace colossal::cost {

/// The graph at `microbatch` samples from the graphs at m and 2m samples
/// (`one`, `two`); nullopt with `error` when the two do not have the same
/// structure or a factor grows other than twofold.
std::optional<Graph> graphAtBatch(const Graph &one, const Graph &two, int64_t microbatch, std::string &error);

} // namespace colossal::cost

#endif // COLOSSAL_COST_GRAPHSCALING_H
