//===- ShardingSolver.cpp - the best per-op sharding over one mesh axis ---===//

#include "colossal/cost/ShardingSolver.h"
#include "KernelTime.h"
#include "ShardedCosts.h"

#include <limits>

namespace colossal::cost {
namespace {

/// Forward and backward compute of one op on one rank (the estimator's
/// kernel times, no recomputation).
double computeSeconds(const Graph &graph, const Op &op, const OpSharding &s, const Mesh &mesh, const Cluster &cluster) {
  double bytes = 0;
  for (const TensorUse &use : op.inputs)
    bytes += localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype);
  for (const TensorUse &use : op.outputs)
    bytes += localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype);
  KernelSeconds t = kernelSeconds(graph, op, s, mesh, cluster, bytes, 1.0);
  return t.forward + t.backward;
}

/// Resharding an activation from its producer's layout to the one `op`
/// reads it in, and its gradient back.
double activationSeconds(const Graph &graph, const Op &op, const OpSharding &s, const TensorUse &use,
                         const Op &producer, const OpSharding &ps, const Mesh &mesh,
                         const Cluster &cluster) {
  const TensorUse *produced = nullptr;
  for (const TensorUse &out : producer.outputs)
    if (out.value == use.value)
      produced = &out;
  double full = fullElements(op, use.dims) * bytesOf(graph.values[use.value].dtype);
  std::vector<CommEvent> scratch;
  TensorSpec have = specOf(producer, ps, mesh, *produced, true);
  double seconds = reshard(have, specOf(op, s, mesh, use, false), full, mesh, cluster, scratch);
  have.partial.clear();
  return seconds + reshard(gradientSpecOf(op, s, mesh, use), have, full, mesh, cluster, scratch);
}

/// Reducing a parameter's gradient from `op`'s layout to its storage layout
/// (the layout its first consumer, `owner`, reads it in).
double parameterSeconds(const Graph &graph, const Op &op, const OpSharding &s, const TensorUse &use,
                        const Op &owner, const OpSharding &os, const TensorUse &ownerUse,
                        const Mesh &mesh, const Cluster &cluster) {
  double full = fullElements(op, use.dims) * bytesOf(graph.values[use.value].dtype);
  std::vector<CommEvent> scratch;
  return reshard(gradientSpecOf(op, s, mesh, use), specOf(owner, os, mesh, ownerUse, false), full, mesh,
                 cluster, scratch);
}

/// Each parameter's first consumer: op and input index.
std::vector<std::pair<int, int>> parameterOwners(const Graph &graph) {
  std::vector<std::pair<int, int>> owner(graph.values.size(), {-1, -1});
  for (size_t o = 0; o < graph.ops.size(); ++o)
    for (size_t i = 0; i < graph.ops[o].inputs.size(); ++i) {
      int v = graph.ops[o].inputs[i].value;
      if (graph.values[v].isParameter && owner[v].first < 0)
        owner[v] = {int(o), int(i)};
    }
  return owner;
}

/// One term of an op's cost that depends on another op's choice.
struct Dependency {
  int op;    // the producer or the parameter's owner
  int input; // which input of the dependent op
  bool parameter;
};

} // namespace

std::vector<int> splittableFactors(const Op &op, const OpSharding &base, const Mesh &mesh, int axis) {
  std::vector<int> out;
  int64_t n = mesh.axes[axis].size;
  for (size_t f = 0; f < op.factors.size(); ++f) {
    if (op.factors[f].kind == FactorKind::Whole || n <= 1)
      continue;
    int64_t already = base.empty() ? 1 : ways(base, mesh, int(f));
    if (op.factors[f].size % (already * n) != 0)
      continue;
    bool major = true;
    auto check = [&](const std::vector<TensorUse> &uses) {
      for (const TensorUse &use : uses)
        for (const std::vector<int> &dim : use.dims)
          for (int g : dim) {
            if (g == int(f))
              break;
            if (std::find(dim.begin(), dim.end(), int(f)) != dim.end() && op.factors[g].size != 1)
              major = false;
          }
    };
    check(op.inputs);
    check(op.outputs);
    if (major)
      out.push_back(int(f));
  }
  return out;
}

double shardingSeconds(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                       const Cluster &cluster) {
  std::vector<std::pair<int, int>> owner = parameterOwners(graph);
  double total = 0;
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    double seconds = computeSeconds(graph, op, sharding[o], mesh, cluster);
    for (const TensorUse &use : op.inputs) {
      const Value &value = graph.values[use.value];
      if (value.isParameter) {
        auto [p, i] = owner[use.value];
        seconds += parameterSeconds(graph, op, sharding[o], use, graph.ops[p], sharding[p],
                                    graph.ops[p].inputs[i], mesh, cluster);
      } else if (value.producer >= 0) {
        seconds += activationSeconds(graph, op, sharding[o], use, graph.ops[value.producer],
                                     sharding[value.producer], mesh, cluster);
      }
    }
    total += seconds * double(graph.repeatOf(op.layer));
  }
  return total;
}

std::optional<ShardingSolution> solveAxisSharding(const Graph &graph, const GraphSharding &base,
                                                  const Mesh &mesh, int axis,
                                                  const Cluster &cluster, std::string &error,
                                                  int64_t maxStates) {
  const size_t n = graph.ops.size();
  GraphSharding start = base;
  if (start.empty())
    for (const Op &op : graph.ops)
      start.emplace_back(op.factors.size());
  if (start.size() != n || axis < 0 || axis >= int(mesh.axes.size())) {
    error = "the base sharding or the axis does not match the graph and mesh";
    return std::nullopt;
  }
  // Choice k of op o: -1 leaves the axis unused, otherwise the factor it splits.
  std::vector<std::vector<int>> choices(n);
  for (size_t o = 0; o < n; ++o) {
    choices[o] = {-1};
    for (int f : splittableFactors(graph.ops[o], start[o], mesh, axis))
      choices[o].push_back(f);
  }
  auto shardingWith = [&](size_t o, int k) {
    OpSharding s = start[o];
    if (choices[o][k] >= 0)
      s[choices[o][k]].push_back(axis);
    return s;
  };

  std::vector<std::pair<int, int>> owner = parameterOwners(graph);
  std::vector<std::vector<Dependency>> deps(n);
  std::vector<int> lastUse(n, -1);
  std::vector<double> unaryBase(n, 0);
  for (size_t o = 0; o < n; ++o)
    for (size_t i = 0; i < graph.ops[o].inputs.size(); ++i) {
      const Value &value = graph.values[graph.ops[o].inputs[i].value];
      int on = value.isParameter ? owner[graph.ops[o].inputs[i].value].first : value.producer;
      if (on < 0)
        continue;
      if (on > int(o) || (on == int(o) && !value.isParameter)) {
        error = "op " + std::to_string(o) + " (" + graph.ops[o].name + ") reads a value produced later: "
                "the ops are not in topological order";
        return std::nullopt;
      }
      deps[o].push_back({on, int(i), value.isParameter});
      if (on != int(o))
        lastUse[size_t(on)] = std::max(lastUse[size_t(on)], int(o));
    }

  // The frontier before op o: ops before o that an op from o on depends on.
  std::vector<int> frontier;
  std::vector<double> cost{0.0};
  // back[o][state after o] = (state before o, choice of o).
  std::vector<std::vector<std::pair<int64_t, int8_t>>> back(n);
  ShardingSolution solution;
  solution.widestFrontier = 1;
  std::vector<int> decoded;
  for (size_t o = 0; o < n; ++o) {
    const Op &op = graph.ops[o];
    double repeat = double(graph.repeatOf(op.layer));
    const int k = int(choices[o].size());
    // Costs of op o: its own part per choice, and one table per dependency
    // indexed by (own choice, the other op's choice).
    std::vector<double> unary(static_cast<size_t>(k));
    std::vector<std::vector<double>> pairTables(deps[o].size());
    std::vector<OpSharding> mine(static_cast<size_t>(k));
    for (int c = 0; c < k; ++c) {
      mine[size_t(c)] = shardingWith(o, c);
      unary[size_t(c)] = computeSeconds(graph, op, mine[size_t(c)], mesh, cluster) * repeat;
    }
    for (size_t d = 0; d < deps[o].size(); ++d) {
      const Dependency &dep = deps[o][d];
      const TensorUse &use = op.inputs[size_t(dep.input)];
      if (dep.op == int(o)) { // a parameter this op owns: its own layout
        int i = owner[use.value].second;
        for (int c = 0; c < k; ++c)
          unary[size_t(c)] += parameterSeconds(graph, op, mine[size_t(c)], use, op, mine[size_t(c)],
                                               op.inputs[size_t(i)], mesh, cluster) *
                              repeat;
        continue;
      }
      const Op &other = graph.ops[size_t(dep.op)];
      int kp = int(choices[size_t(dep.op)].size());
      std::vector<double> &table = pairTables[d];
      table.resize(size_t(k * kp));
      for (int cp = 0; cp < kp; ++cp) {
        OpSharding theirs = shardingWith(size_t(dep.op), cp);
        for (int c = 0; c < k; ++c)
          table[size_t(c * kp + cp)] =
              repeat * (dep.parameter
                            ? parameterSeconds(graph, op, mine[size_t(c)], use, other, theirs,
                                               other.inputs[size_t(owner[use.value].second)], mesh, cluster)
                            : activationSeconds(graph, op, mine[size_t(c)], use, other, theirs, mesh, cluster));
      }
    }

    // The frontier after op o.
    std::vector<int> next;
    for (int p : frontier)
      if (lastUse[size_t(p)] > int(o))
        next.push_back(p);
    if (lastUse[o] > int(o))
      next.push_back(int(o));
    std::vector<int64_t> nextStride(next.size());
    int64_t nextStates = 1;
    for (size_t j = 0; j < next.size(); ++j) {
      nextStride[j] = nextStates;
      int64_t width = int64_t(choices[size_t(next[j])].size());
      if (nextStates > maxStates / width) {
        error = "the sharding solver's frontier at op " + std::to_string(o) + " (" + op.name + ") holds " +
                std::to_string(next.size()) + " live ops, more than " + std::to_string(maxStates) + " states";
        return std::nullopt;
      }
      nextStates *= width;
    }
    solution.widestFrontier = std::max(solution.widestFrontier, int64_t(cost.size()));
    // Where each dependency and each kept op sits in the current frontier.
    std::vector<int> depSlot(deps[o].size(), -1), keptSlot(next.size(), -1);
    for (size_t j = 0; j < frontier.size(); ++j) {
      for (size_t d = 0; d < deps[o].size(); ++d)
        if (deps[o][d].op == frontier[j])
          depSlot[d] = int(j);
      for (size_t m = 0; m < next.size(); ++m)
        if (next[m] == frontier[j])
          keptSlot[m] = int(j);
    }
    int ownSlot = !next.empty() && next.back() == int(o) ? int(next.size()) - 1 : -1;

    std::vector<double> nextCost(size_t(nextStates), std::numeric_limits<double>::infinity());
    back[o].assign(size_t(nextStates), {-1, -1});
    decoded.assign(frontier.size(), 0);
    for (int64_t state = 0; state < int64_t(cost.size()); ++state) {
      if (cost[size_t(state)] == std::numeric_limits<double>::infinity())
        continue;
      int64_t rest = state;
      for (size_t j = 0; j < frontier.size(); ++j) {
        int64_t width = int64_t(choices[size_t(frontier[j])].size());
        decoded[j] = int(rest % width);
        rest /= width;
      }
      int64_t kept = 0;
      for (size_t m = 0; m < next.size(); ++m)
        if (keptSlot[m] >= 0)
          kept += decoded[size_t(keptSlot[m])] * nextStride[m];
      for (int c = 0; c < k; ++c) {
        double total = cost[size_t(state)] + unary[size_t(c)];
        for (size_t d = 0; d < deps[o].size(); ++d)
          if (depSlot[d] >= 0) {
            int kp = int(choices[size_t(deps[o][d].op)].size());
            total += pairTables[d][size_t(c * kp + decoded[size_t(depSlot[d])])];
          }
        int64_t target = kept + (ownSlot >= 0 ? c * nextStride[size_t(ownSlot)] : 0);
        if (total < nextCost[size_t(target)]) {
          nextCost[size_t(target)] = total;
          back[o][size_t(target)] = {state, int8_t(c)};
        }
      }
    }
    frontier = std::move(next);
    cost = std::move(nextCost);
  }

  // Every op's last reader has run: one state remains.
  solution.sharding = start;
  int64_t state = 0;
  for (size_t o = n; o-- > 0;) {
    auto [previous, c] = back[o][size_t(state)];
    if (choices[o][size_t(c)] >= 0)
      solution.sharding[o][size_t(choices[o][size_t(c)])].push_back(axis);
    state = previous;
  }
  solution.seconds = cost.empty() ? 0 : cost[0];
  return solution;
}

} // namespace colossal::cost
