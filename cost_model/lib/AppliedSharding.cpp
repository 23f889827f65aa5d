//===- AppliedSharding.cpp - the split a partitioner made, read back ------===//

#include "colossal/cost/AppliedSharding.h"

namespace colossal::cost {

namespace {

/// The same op as `w`, its operands and results of the same ranks (its
/// factors may differ: a reshape's depend on the sizes it sees); the rank's
/// op may lack trailing operands (a row-parallel layer's bias, added after
/// the sum).
bool sameOp(const Op &p, const Op &w) {
  auto sameRanks = [](const std::vector<TensorUse> &x, const std::vector<TensorUse> &y, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (x[i].dims.size() != y[i].dims.size())
        return false;
    return true;
  };
  return p.name == w.name && p.inputs.size() <= w.inputs.size() && !p.inputs.empty() &&
         sameRanks(p.inputs, w.inputs, p.inputs.size()) && p.outputs.size() == w.outputs.size() &&
         sameRanks(p.outputs, w.outputs, p.outputs.size());
}

/// A split, even or padded (the last share partly zeros).
bool isSplit(int64_t share, int64_t all, int64_t ranks) {
  return share < all && share * ranks >= all && share * (ranks - 1) < all;
}

/// Whether `factor` of `w` is split between `before` and `after` (the same
/// op before and after a split), read off a tensor dimension it alone
/// indexes in `w` (size-1 factors aside), where `after`'s dimension is
/// smaller. Used when the ops factor differently (a reshape of smaller
/// sizes); nullopt when no dimension tells.
std::optional<bool> splitByDims(const Op &w, const Op &before, const Op &after, int factor, int64_t ranks) {
  auto scan = [&](const std::vector<TensorUse> &wu, const std::vector<TensorUse> &bu,
                  const std::vector<TensorUse> &au) -> std::optional<bool> {
    for (size_t t = 0; t < wu.size() && t < bu.size() && t < au.size(); ++t)
      for (size_t d = 0; d < wu[t].dims.size(); ++d) {
        const std::vector<int> &dim = wu[t].dims[d];
        int others = 0;
        bool here = false;
        for (int f : dim) {
          here |= f == factor;
          others += f != factor && w.factors[f].size > 1;
        }
        if (!here || others)
          continue;
        int64_t all = Graph::dimSize(before, bu[t].dims[d]), share = Graph::dimSize(after, au[t].dims[d]);
        return isSplit(share, all, ranks);
      }
    return std::nullopt;
  };
  if (std::optional<bool> split = scan(w.inputs, before.inputs, after.inputs))
    return split;
  return scan(w.outputs, before.outputs, after.outputs);
}

/// appliedAxisSharding, also giving the index in `perRank` of each op of
/// `whole`.
std::optional<GraphSharding> readSplit(const Graph &whole, const Graph &perRank, int axis, int64_t ranks,
                                       std::string &error, std::vector<size_t> &matched) {
  GraphSharding sharding;
  size_t r = 0;
  for (size_t o = 0; o < whole.ops.size(); ++o, ++r) {
    const Op &w = whole.ops[o];
    // Ops the rank's program adds in between (a row-parallel layer's bias,
    // added once the partial products are summed) are skipped.
    while (r < perRank.ops.size() && !sameOp(perRank.ops[r], w))
      ++r;
    std::string where = "op " + std::to_string(o) + " (" + w.name + ")";
    if (r == perRank.ops.size()) {
      error = where + " of the whole model has no counterpart in one rank's program";
      return std::nullopt;
    }
    matched.push_back(r);
    const Op &p = perRank.ops[r];
    bool sameFactors = p.factors.size() == w.factors.size();
    OpSharding split(w.factors.size());
    for (size_t f = 0; f < w.factors.size(); ++f) {
      int64_t all = w.factors[f].size;
      bool isSplitHere = false;
      if (sameFactors) {
        int64_t share = p.factors[f].size;
        if (share != all && !isSplit(share, all, ranks)) {
          error = where + ": factor " + std::to_string(f) + " is " + std::to_string(share) + " on one rank and " +
                  std::to_string(all) + " whole, not a split over " + std::to_string(ranks) + " ranks";
          return std::nullopt;
        }
        isSplitHere = share != all;
      } else if (all > 1) {
        isSplitHere = splitByDims(w, w, p, int(f), ranks).value_or(false);
      }
      if (isSplitHere)
        split[f].push_back(axis);
    }
    sharding.push_back(std::move(split));
  }
  return sharding;
}

} // namespace

std::optional<GraphSharding> appliedAxisSharding(const Graph &whole, const Graph &perRank, int axis, int64_t ranks,
                                                 std::string &error) {
  std::vector<size_t> matched;
  return readSplit(whole, perRank, axis, ranks, error, matched);
}

std::optional<GraphSharding> appliedModelAxes(const Graph &whole, const Graph *tensorSplit, const Graph &split,
                                              const Mesh &mesh, int64_t tensorRanks, int64_t sequenceRanks,
                                              std::string &error) {
  std::vector<AppliedSplit> splits;
  if (tensorRanks > 1 && sequenceRanks > 1 && !tensorSplit) {
    error = "no graph of the tensor split alone to read the tensor axis from";
    return std::nullopt;
  }
  if (tensorRanks > 1)
    splits.push_back({sequenceRanks > 1 ? tensorSplit : &split, mesh.axisIndex("tp"), tensorRanks});
  if (sequenceRanks > 1)
    splits.push_back({&split, mesh.axisIndex("sp"), sequenceRanks});
  return appliedSharding(whole, splits, error);
}

std::optional<GraphSharding> appliedSharding(const Graph &whole, const std::vector<AppliedSplit> &splits,
                                             std::string &error) {
  GraphSharding sharding;
  for (const Op &op : whole.ops)
    sharding.push_back(OpSharding(op.factors.size()));
  // Where each op of `whole` is in the graph the next split starts from.
  std::vector<size_t> at(whole.ops.size());
  for (size_t o = 0; o < at.size(); ++o)
    at[o] = o;
  const Graph *before = &whole;
  for (const AppliedSplit &split : splits) {
    std::vector<size_t> matched;
    std::optional<GraphSharding> step = readSplit(*before, *split.perRank, split.axis, split.ranks, error, matched);
    if (!step)
      return std::nullopt;
    for (size_t o = 0; o < whole.ops.size(); ++o) {
      const OpSharding &here = (*step)[at[o]];
      if (here.size() == sharding[o].size()) {
        for (size_t f = 0; f < here.size(); ++f)
          sharding[o][f].insert(sharding[o][f].end(), here[f].begin(), here[f].end());
      } else {
        // Factored otherwise after an earlier split (a reshape's factors
        // follow its sizes): the whole op's factors read off the dimensions.
        const Op &w = whole.ops[o], &from = before->ops[at[o]], &to = split.perRank->ops[matched[at[o]]];
        for (size_t f = 0; f < w.factors.size(); ++f)
          if (w.factors[f].size > 1 && splitByDims(w, from, to, int(f), split.ranks).value_or(false))
            sharding[o][f].push_back(split.axis);
      }
      at[o] = matched[at[o]];
    }
    before = split.perRank;
  }
  return sharding;
}

} // namespace colossal::cost
