//===- Resharding.cpp - the collectives between two layouts of a value ----===//

#include "colossal/cost/Resharding.h"

#include <algorithm>
#include <unordered_map>

namespace colossal::cost {

bool collectiveOf(ReshardKind kind, Collective &out) {
  switch (kind) {
  case ReshardKind::AllReduce: out = Collective::AllReduce; return true;
  case ReshardKind::ReduceScatter: out = Collective::ReduceScatter; return true;
  case ReshardKind::AllGather: out = Collective::AllGather; return true;
  case ReshardKind::AllToAll: out = Collective::AllToAll; return true;
  case ReshardKind::Slice: return false;
  }
  return false;
}

double busBytes(const ReshardPlan &plan, const std::vector<int> &axisSizes) {
  double bytes = 0;
  for (const ReshardStep &step : plan.steps)
    if (Collective c; collectiveOf(step.kind, c))
      bytes += step.bytes * busFactor(c, axisSizes[size_t(step.axis)]);
  return bytes;
}

namespace {

bool contains(const std::vector<int> &list, int x) { return std::find(list.begin(), list.end(), x) != list.end(); }

int dimOf(const TensorSpec &spec, int axis) {
  for (size_t d = 0; d < spec.dims.size(); ++d)
    if (contains(spec.dims[d], axis))
      return int(d);
  return -1;
}

/// The layout without axes of one rank; an error when an axis is used twice
/// (or is not on the mesh).
std::string normalize(TensorSpec &spec, const std::vector<int> &sizes, const char *which) {
  std::vector<char> used(sizes.size(), 0);
  auto keep = [&](std::vector<int> &axes) -> std::string {
    std::vector<int> kept;
    for (int a : axes) {
      if (a < 0 || size_t(a) >= sizes.size())
        return std::string("the ") + which + " layout names mesh axis " + std::to_string(a) + ", which the mesh lacks";
      if (used[size_t(a)]++)
        return std::string("the ") + which + " layout uses mesh axis " + std::to_string(a) + " twice";
      if (sizes[size_t(a)] > 1)
        kept.push_back(a);
    }
    axes = std::move(kept);
    return "";
  };
  for (auto &dim : spec.dims)
    if (std::string e = keep(dim); !e.empty())
      return e;
  return keep(spec.partial);
}

} // namespace

TensorSpec alignedTo(const TensorSpec &from, const TensorSpec &to) {
  TensorSpec aligned = to;
  for (size_t d = 0; d < aligned.dims.size() && d < from.dims.size(); ++d) {
    std::vector<int> order;
    for (int a : from.dims[d])
      if (contains(to.dims[d], a))
        order.push_back(a);
    for (int a : to.dims[d])
      if (!contains(order, a))
        order.push_back(a);
    aligned.dims[d] = std::move(order);
  }
  return aligned;
}

namespace {

/// A layout as the search keys it: each dimension's axes in order, then the
/// pending sums in ascending order.
std::string keyOf(const TensorSpec &spec) {
  std::vector<int> partial = spec.partial;
  std::sort(partial.begin(), partial.end());
  std::string key;
  for (const auto &dim : spec.dims) {
    for (int a : dim)
      key += char('A' + a);
    key += '|';
  }
  for (int a : partial)
    key += char('A' + a);
  return key;
}

struct Node {
  TensorSpec spec;
  double local;  // bytes per rank, of a value of one byte
  double cost;   // bus bytes so far
  int steps;
  int parent;    // index into the search's nodes, or -1
  ReshardStep step;
};

/// The cheapest steps from `from` to `to` (both normalized; every pending
/// sum of `to` is one of `from`'s) for a value of one byte: Dijkstra over
/// layouts, cost the bus bytes, fewer steps breaking ties.
std::vector<ReshardStep> cheapestSteps(const TensorSpec &from, const TensorSpec &to, const std::vector<int> &sizes,
                                       const std::vector<int64_t> *shape) {
  // Whether dimension `d` of `spec` splits once more over `a` (any split
  // without the value's shape).
  auto divides = [&](const TensorSpec &spec, int d, int a) {
    if (!shape || size_t(d) >= shape->size())
      return true;
    int64_t parts = sizes[size_t(a)];
    for (int b : spec.dims[size_t(d)])
      parts *= sizes[size_t(b)];
    return (*shape)[size_t(d)] % parts == 0;
  };
  std::vector<Node> nodes;
  auto later = [&](int x, int y) {
    const Node &a = nodes[size_t(x)], &b = nodes[size_t(y)];
    if (a.cost != b.cost)
      return a.cost > b.cost;
    if (a.steps != b.steps)
      return a.steps > b.steps;
    return x > y;
  };
  std::vector<int> heap;
  auto push = [&](Node node) {
    nodes.push_back(std::move(node));
    heap.push_back(int(nodes.size()) - 1);
    std::push_heap(heap.begin(), heap.end(), later);
  };
  double local = 1;
  for (const auto &dim : from.dims)
    for (int a : dim)
      local /= sizes[size_t(a)];
  push({from, local, 0, 0, -1, {}});
  std::string goal = keyOf(to);
  std::vector<std::string> closed;
  auto isClosed = [&](const std::string &key) { return std::binary_search(closed.begin(), closed.end(), key); };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    int at = heap.back();
    heap.pop_back();
    std::string key = keyOf(nodes[size_t(at)].spec);
    if (key == goal) {
      std::vector<ReshardStep> steps;
      for (int n = at; nodes[size_t(n)].parent >= 0; n = nodes[size_t(n)].parent)
        steps.push_back(nodes[size_t(n)].step);
      std::reverse(steps.begin(), steps.end());
      return steps;
    }
    if (isClosed(key))
      continue;
    closed.insert(std::upper_bound(closed.begin(), closed.end(), key), key);
    const Node current = nodes[size_t(at)];
    auto next = [&](TensorSpec spec, ReshardStep step, double newLocal) {
      double bus = 0;
      if (Collective c; collectiveOf(step.kind, c))
        bus = step.bytes * busFactor(c, sizes[size_t(step.axis)]);
      if (!isClosed(keyOf(spec)))
        push({std::move(spec), newLocal, current.cost + bus, current.steps + 1, at, step});
    };
    const TensorSpec &spec = current.spec;
    for (int a = 0; a < int(sizes.size()); ++a) {
      if (sizes[size_t(a)] <= 1)
        continue;
      double n = sizes[size_t(a)];
      bool partial = contains(spec.partial, a), split = dimOf(spec, a) >= 0;
      if (partial && contains(to.partial, a))
        continue; // a pending sum the target keeps
      if (!contains(from.partial, a) && dimOf(from, a) < 0 && dimOf(to, a) < 0)
        continue; // whole at both ends: the axis is not the resharding's to use
      for (int d = 0; d < int(spec.dims.size()); ++d) {
        if (!divides(spec, d, a))
          continue;
        TensorSpec s = spec;
        s.dims[size_t(d)].push_back(a);
        if (!partial && !split) {
          next(s, {ReshardKind::Slice, a, d, -1, 0}, current.local / n);
        } else if (partial) {
          s.partial.erase(std::find(s.partial.begin(), s.partial.end(), a));
          next(s, {ReshardKind::ReduceScatter, a, d, -1, current.local}, current.local / n);
        }
      }
      if (partial) {
        TensorSpec s = spec;
        s.partial.erase(std::find(s.partial.begin(), s.partial.end(), a));
        next(s, {ReshardKind::AllReduce, a, -1, -1, current.local}, current.local);
      }
    }
    for (int d = 0; d < int(spec.dims.size()); ++d) {
      if (spec.dims[size_t(d)].empty())
        continue;
      int a = spec.dims[size_t(d)].back();
      TensorSpec gathered = spec;
      gathered.dims[size_t(d)].pop_back();
      double whole = current.local * sizes[size_t(a)];
      for (int to2 = 0; to2 < int(spec.dims.size()); ++to2) {
        if (to2 == d || !divides(gathered, to2, a))
          continue;
        TensorSpec moved = gathered;
        moved.dims[size_t(to2)].push_back(a);
        next(moved, {ReshardKind::AllToAll, a, to2, d, current.local}, current.local);
      }
      next(gathered, {ReshardKind::AllGather, a, d, -1, whole}, whole);
    }
  }
  return {};
}

} // namespace

ReshardPlan planResharding(const TensorSpec &from, const TensorSpec &to, const std::vector<int> &axisSizes,
                           double fullBytes, const std::vector<int64_t> *shape) {
  ReshardPlan plan;
  TensorSpec cur = from, tgt = to;
  cur.dims.resize(tgt.dims.size());
  if (std::string e = normalize(cur, axisSizes, "source"); !e.empty())
    return plan.error = e, plan;
  if (std::string e = normalize(tgt, axisSizes, "target"); !e.empty())
    return plan.error = e, plan;
  for (int a : tgt.partial)
    if (!contains(cur.partial, a))
      return plan.error = "a value cannot become a pending sum over mesh axis " + std::to_string(a) +
                          " by resharding (it is not one there)",
             plan;
  // The steps do not depend on the value's size (every cost scales with
  // it), so each pair of layouts on a mesh is searched once; the search's
  // cost model asks for the same few pairs over and over.
  std::string key = keyOf(cur) + "/" + keyOf(tgt) + "/";
  for (int n : axisSizes)
    key += std::to_string(n) + ",";
  if (shape) {
    key += "/";
    for (int64_t n : *shape)
      key += std::to_string(n) + ",";
  }
  static thread_local std::unordered_map<std::string, std::vector<ReshardStep>> known;
  auto found = known.find(key);
  if (found == known.end())
    found = known.emplace(key, cheapestSteps(cur, tgt, axisSizes, shape)).first;
  plan.steps = found->second;
  for (ReshardStep &step : plan.steps)
    step.bytes *= fullBytes;
  return plan;
}

} // namespace colossal::cost
