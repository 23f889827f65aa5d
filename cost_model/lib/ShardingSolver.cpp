//===- ShardingSolver.cpp - the best per-op sharding over mesh axes ------===//

#include "colossal/cost/ShardingSolver.h"
#include "KernelTime.h"
#include "ShardedCosts.h"

#include <algorithm>
#include <limits>

namespace colossal::cost {
namespace {

/// Forward and backward compute of one op on one rank (the estimator's
/// kernel times, no recomputation), with the sums of a loss whose tokens
/// the sequence axis splits.
double computeSeconds(const Graph &graph, const Op &op, const OpSharding &s, const Mesh &mesh, const Cluster &cluster) {
  double bytes = 0;
  for (const TensorUse &use : op.inputs)
    bytes += localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype);
  for (const TensorUse &use : op.outputs)
    bytes += localElements(op, s, mesh, use.dims) * bytesOf(graph.values[use.value].dtype);
  KernelSeconds t = kernelSeconds(graph, op, s, mesh, cluster, bytes, 1.0);
  double sums = 0;
  int sp = mesh.axisIndex("sp");
  if (sumsLossOverSequence(op, s, mesh, sp))
    sums = collectiveTime(Collective::AllReduce, kLossSumForwardBytes, mesh.axes[size_t(sp)], cluster) +
           collectiveTime(Collective::AllReduce, kLossSumBackwardBytes, mesh.axes[size_t(sp)], cluster);
  return t.forward + t.backward + sums;
}

/// Who an op's input depends on: what the input's resharding costs
/// depends on that op's choice.
struct InputSource {
  /// The producer of an activation, the owner (first reader) of a
  /// trainable parameter, -1 for the step's data and frozen parameters.
  int op = -1;
  /// The producer's output, or the owner's input, holding the value.
  const TensorUse *use = nullptr;
  bool parameter = false;
  /// Whether a gradient flows back through it.
  bool gradient = false;
};

/// The sources of every input of every op.
std::vector<std::vector<InputSource>> inputSources(const Graph &graph) {
  std::vector<char> needs = valuesNeedingGradient(graph);
  std::vector<std::pair<int, int>> owner(graph.values.size(), {-1, -1});
  std::vector<std::vector<InputSource>> sources(graph.ops.size());
  for (size_t o = 0; o < graph.ops.size(); ++o)
    for (size_t i = 0; i < graph.ops[o].inputs.size(); ++i) {
      int v = graph.ops[o].inputs[i].value;
      const Value &value = graph.values[size_t(v)];
      InputSource source;
      source.parameter = value.isParameter;
      source.gradient = needs[size_t(v)];
      if (value.isParameter && owner[size_t(v)].first < 0)
        owner[size_t(v)] = {int(o), int(i)};
      if (value.isParameter && source.gradient) {
        auto [p, j] = owner[size_t(v)];
        source.op = p;
        source.use = &graph.ops[size_t(p)].inputs[size_t(j)];
      } else if (value.producer >= 0) {
        source.op = value.producer;
        for (const TensorUse &out : graph.ops[size_t(value.producer)].outputs)
          if (out.value == v)
            source.use = &out;
      }
      sources[o].push_back(source);
    }
  return sources;
}

/// Resharding input `use` of `op` under `s`, forward (an activation from
/// its producer's layout to the one `op` reads it in) plus backward (its
/// gradient to the producer's layout, or a parameter's to its storage
/// layout, the one its owner reads it in), as the estimator charges them.
double inputSeconds(const Graph &graph, const Op &op, const OpSharding &s, const TensorUse &use,
                    const InputSource &source, const Op &other, const OpSharding &os, const Mesh &mesh,
                    const Cluster &cluster) {
  double full = fullElements(op, use.dims) * bytesOf(graph.values[use.value].dtype);
  std::vector<CommEvent> scratch;
  if (source.parameter)
    return source.gradient ? reshard(gradientSpecOf(op, s, mesh, use), specOf(other, os, mesh, *source.use, false),
                                     full, mesh, cluster, scratch)
                           : 0.0;
  TensorSpec have = specOf(other, os, mesh, *source.use, true);
  double forward = reshard(have, specOf(op, s, mesh, use, false), full, mesh, cluster, scratch);
  have.partial.clear();
  double backward =
      source.gradient ? reshard(gradientSpecOf(op, s, mesh, use), have, full, mesh, cluster, scratch) : 0.0;
  return forward + backward;
}

/// Whether two ops cost the same under the same sharding: everything the
/// kernel and resharding prices read (not the names, layers or which
/// values they are).
bool costsAlike(const Graph &graph, const Op &a, const Op &b) {
  auto sameUses = [&](const std::vector<TensorUse> &x, const std::vector<TensorUse> &y) {
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i) {
      const Value &u = graph.values[size_t(x[i].value)], &v = graph.values[size_t(y[i].value)];
      if (x[i].dims != y[i].dims || u.dtype != v.dtype || u.isParameter != v.isParameter || u.frozen != v.frozen ||
          u.constant != v.constant || u.readByBackward != v.readByBackward)
        return false;
    }
    return true;
  };
  auto sameFactors = [](const std::vector<Factor> &x, const std::vector<Factor> &y) {
    if (x.size() != y.size())
      return false;
    for (size_t f = 0; f < x.size(); ++f)
      if (x[f].name != y[f].name || x[f].size != y[f].size || x[f].kind != y[f].kind)
        return false;
    return true;
  };
  auto sameSaved = [](const std::vector<SavedTensor> &x, const std::vector<SavedTensor> &y) {
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].dims != y[i].dims || x[i].dtype != y[i].dtype ||
          x[i].recomputedWhenSelective != y[i].recomputedWhenSelective || x[i].input != y[i].input ||
          x[i].output != y[i].output)
        return false;
    return true;
  };
  return a.kind == b.kind && a.forwardFlops == b.forwardFlops && a.backwardFlops == b.backwardFlops &&
         a.attentionCore == b.attentionCore && a.recomputedWhenSelective == b.recomputedWhenSelective &&
         a.relabels == b.relabels && a.weightView == b.weightView && a.gradientsInTurn == b.gradientsInTurn &&
         a.transposedForGradient == b.transposedForGradient && a.transcendental == b.transcendental &&
         a.causal == b.causal && a.exchange == b.exchange && sameFactors(a.factors, b.factors) &&
         sameUses(a.inputs, b.inputs) && sameUses(a.outputs, b.outputs) && sameSaved(a.saved, b.saved);
}

/// The index of `use` among `op`'s inputs or outputs (-1 if neither).
int useIndex(const Op &op, const TensorUse *use) {
  for (const auto *uses : {&op.inputs, &op.outputs})
    for (size_t i = 0; i < uses->size(); ++i)
      if (&(*uses)[i] == use)
        return int(i) + (uses == &op.outputs ? 1 << 16 : 0);
  return -1;
}

/// Per op, the op at its place in the previous layer whose cost tables it
/// shares (-1 if none): the same costs and candidate shardings (`choices`), and every
/// input from alike sources with the same candidates. Identical layers
/// then price each choice once rather than once per layer.
std::vector<int> previousLayerTwins(const Graph &graph, const std::vector<std::vector<OpSharding>> &choices,
                                    const std::vector<std::vector<InputSource>> &sources) {
  const size_t n = graph.ops.size();
  std::vector<int> twin(n, -1);
  std::vector<int> layerStart(size_t(std::max(graph.numLayers, 0)), -1);
  for (size_t o = 0; o < n; ++o) {
    int l = graph.ops[o].layer;
    if (l >= 0 && l < graph.numLayers && layerStart[size_t(l)] < 0)
      layerStart[size_t(l)] = int(o);
  }
  auto alike = [&](int a, int b) {
    return a == b ||
           (costsAlike(graph, graph.ops[size_t(a)], graph.ops[size_t(b)]) && choices[size_t(a)] == choices[size_t(b)]);
  };
  for (size_t o = 0; o < n; ++o) {
    const Op &op = graph.ops[o];
    int l = op.layer;
    if (l < 1 || l >= graph.numLayers || layerStart[size_t(l - 1)] < 0 || graph.repeatOf(l) != graph.repeatOf(l - 1))
      continue;
    int t = int(o) - (layerStart[size_t(l)] - layerStart[size_t(l - 1)]);
    if (t < 0 || graph.ops[size_t(t)].layer != l - 1 || !alike(int(o), t))
      continue;
    bool same = sources[o].size() == sources[size_t(t)].size();
    for (size_t i = 0; same && i < sources[o].size(); ++i) {
      const InputSource &a = sources[o][i], &b = sources[size_t(t)][i];
      same = a.parameter == b.parameter && a.gradient == b.gradient && (a.op < 0) == (b.op < 0) &&
             (a.op == int(o)) == (b.op == t);
      if (same && a.op >= 0 && a.op != int(o))
        same =
            alike(a.op, b.op) && useIndex(graph.ops[size_t(a.op)], a.use) == useIndex(graph.ops[size_t(b.op)], b.use);
    }
    if (same)
      twin[o] = t;
  }
  return twin;
}

/// The layers whose step of the solver's dynamic program is the previous
/// layer's one period of ops later: each op is its twin's copy one period
/// on (previousLayerTwins), reads the same ops outside the layers or its
/// twin's sources one period on, and leaves the frontier its twin left
/// with each op the same or one period on. The states after such a layer
/// then mean what they meant after the one before.
struct RepeatingLayers {
  std::vector<int> first, last;
  std::vector<char> repeats;
  int64_t period = 0;
};

RepeatingLayers repeatingLayers(const Graph &graph, const std::vector<int> &twins,
                                const std::vector<std::vector<InputSource>> &sources,
                                const std::vector<std::vector<int>> &frontierAfter) {
  RepeatingLayers layers;
  const size_t count = size_t(std::max(graph.numLayers, 0));
  layers.first.assign(count, -1), layers.last.assign(count, -1), layers.repeats.assign(count, 0);
  for (size_t o = 0; o < graph.ops.size(); ++o)
    if (int l = graph.ops[o].layer; l >= 0 && size_t(l) < count) {
      if (layers.first[size_t(l)] < 0)
        layers.first[size_t(l)] = int(o);
      layers.last[size_t(l)] = int(o);
    }
  if (count < 2 || layers.first[0] < 0)
    return layers;
  layers.period = layers.first[1] - layers.first[0];
  if (layers.period <= 0)
    return layers;
  auto sameOrOn = [&](int now, int before) { return now == before || int64_t(now) - before == layers.period; };
  auto frontiersAlike = [&](size_t o) {
    if (int64_t(o) < layers.period)
      return false;
    const std::vector<int> &now = frontierAfter[o], &before = frontierAfter[o - size_t(layers.period)];
    if (now.size() != before.size())
      return false;
    for (size_t j = 0; j < now.size(); ++j)
      if (!sameOrOn(now[j], before[j]))
        return false;
    return true;
  };
  for (size_t l = 1; l < count; ++l) {
    int first = layers.first[l], last = layers.last[l];
    bool repeats = first >= 0 && layers.first[l - 1] >= 0 && first - layers.first[l - 1] == layers.period &&
                   last - first == layers.last[l - 1] - layers.first[l - 1] && first == layers.last[l - 1] + 1 &&
                   frontiersAlike(size_t(first) - 1);
    for (int o = first; repeats && o <= last; ++o) {
      const std::vector<InputSource> &now = sources[size_t(o)], &before = sources[size_t(o - layers.period)];
      repeats = graph.ops[size_t(o)].layer == int(l) && twins[size_t(o)] == o - layers.period &&
                now.size() == before.size() && frontiersAlike(size_t(o));
      for (size_t i = 0; repeats && i < now.size(); ++i)
        repeats = (now[i].op < 0) == (before[i].op < 0) && (now[i].op < 0 || sameOrOn(now[i].op, before[i].op));
    }
    layers.repeats[l] = repeats;
  }
  return layers;
}

/// The least finite cost (0 if none).
double leastFinite(const std::vector<double> &cost) {
  double least = std::numeric_limits<double>::infinity();
  for (double c : cost)
    least = std::min(least, c);
  return least == std::numeric_limits<double>::infinity() ? 0 : least;
}

/// Whether the layer of ops [first, last] changed the states by a constant
/// alone: `now` less its least is `before` less its least (to rounding of
/// the totals' size), and each op chose as its twin one period earlier.
bool settledByConstant(const std::vector<double> &before, const std::vector<double> &now,
                       const std::vector<std::vector<std::pair<int32_t, int16_t>>> &back,
                       const std::vector<size_t> &backOf, int first, int last, int64_t period) {
  if (before.size() != now.size() || first - period < 0)
    return false;
  const double leastBefore = leastFinite(before), leastNow = leastFinite(now);
  const double tolerance = 1e-9 * std::max(std::abs(leastNow), std::numeric_limits<double>::min());
  for (size_t j = 0; j < now.size(); ++j) {
    bool infinite = now[j] == std::numeric_limits<double>::infinity();
    if (infinite != (before[j] == std::numeric_limits<double>::infinity()))
      return false;
    if (!infinite && std::abs((now[j] - leastNow) - (before[j] - leastBefore)) > tolerance)
      return false;
  }
  for (int o = first; o <= last; ++o)
    if (back[backOf[size_t(o)]] != back[backOf[size_t(o - period)]])
      return false;
  return true;
}

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

double shardingSeconds(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh, const Cluster &cluster) {
  std::vector<std::vector<InputSource>> sources = inputSources(graph);
  double total = 0;
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    double seconds = computeSeconds(graph, op, sharding[o], mesh, cluster);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const InputSource &source = sources[o][i];
      if (source.op < 0)
        continue;
      seconds += inputSeconds(graph, op, sharding[o], op.inputs[i], source, graph.ops[size_t(source.op)],
                              sharding[size_t(source.op)], mesh, cluster);
    }
    total += seconds * double(graph.repeatOf(op.layer));
  }
  return total;
}

std::vector<OpSharding> candidateShardings(const Graph &graph, size_t op, const OpSharding &base, const Mesh &mesh,
                                           const std::vector<AxisToPlace> &axes) {
  std::vector<OpSharding> out{base};
  for (const AxisToPlace &place : axes) {
    std::vector<OpSharding> extended;
    for (const OpSharding &s : out) {
      extended.push_back(s);
      for (int f : splittableFactors(graph.ops[op], s, mesh, place.axis))
        if (!place.admits || place.admits(op, f)) {
          extended.push_back(s);
          extended.back()[size_t(f)].push_back(place.axis);
        }
    }
    out = std::move(extended);
  }
  return out;
}

std::optional<ShardingSolution> solveAxisSharding(const Graph &graph, const GraphSharding &base, const Mesh &mesh,
                                                  int axis, const Cluster &cluster, std::string &error,
                                                  int64_t maxStates) {
  return solveSharding(graph, base, mesh, {{axis, {}}}, cluster, error, maxStates);
}

/// Relative difference below which two totals are the same.
constexpr double kTieTolerance = 1e-12;

std::optional<ShardingSolution> solveSharding(const Graph &graph, const GraphSharding &base, const Mesh &mesh,
                                              const std::vector<AxisToPlace> &axes, const Cluster &cluster,
                                              std::string &error, int64_t maxStates) {
  const size_t n = graph.ops.size();
  GraphSharding start = base.empty() ? replicatedSharding(graph) : base;
  bool axesValid = !axes.empty();
  for (const AxisToPlace &place : axes)
    axesValid &= place.axis >= 0 && place.axis < int(mesh.axes.size());
  if (start.size() != n || !axesValid) {
    error = "the base sharding or the axes do not match the graph and mesh";
    return std::nullopt;
  }
  // Choice k of op o: the k-th of its candidate shardings.
  std::vector<std::vector<OpSharding>> choices(n);
  for (size_t o = 0; o < n; ++o) {
    choices[o] = candidateShardings(graph, o, start[o], mesh, axes);
    if (choices[o].size() > size_t(std::numeric_limits<int16_t>::max())) {
      error = "op " + std::to_string(o) + " (" + graph.ops[o].name + ") has " + std::to_string(choices[o].size()) +
              " candidate shardings, more than the solver holds";
      return std::nullopt;
    }
  }

  std::vector<std::vector<InputSource>> sources = inputSources(graph);
  // An op's cost depends on its sources' choices: each stays in the
  // frontier until its last dependent.
  std::vector<int> lastUse(n, -1);
  for (size_t o = 0; o < n; ++o)
    for (const InputSource &source : sources[o]) {
      if (source.op > int(o) || (source.op == int(o) && !source.parameter)) {
        error = "op " + std::to_string(o) + " (" + graph.ops[o].name +
                ") reads a value produced later: "
                "the ops are not in topological order";
        return std::nullopt;
      }
      if (source.op >= 0 && source.op != int(o))
        lastUse[size_t(source.op)] = std::max(lastUse[size_t(source.op)], int(o));
    }

  // The frontier before op o: ops before o that an op from o on depends on.
  std::vector<int> frontier;
  std::vector<int> slotOf(n, -1);
  std::vector<double> cost{0.0};
  // back[o][state after o] = (state before o, choice of o), in 8 bytes:
  // the solver's largest allocation.
  maxStates = std::min<int64_t>(maxStates, std::numeric_limits<int32_t>::max());
  std::vector<std::vector<std::pair<int32_t, int16_t>>> back(n);
  // The op whose back pointers op o's are (a copied layer's are its
  // model's), so that copying a layer allocates nothing.
  std::vector<size_t> backOf(n);
  for (size_t o = 0; o < n; ++o)
    backOf[o] = o;
  ShardingSolution solution;
  solution.widestFrontier = 1;
  std::vector<int> decoded;
  // Per input: its resharding, indexed by (own choice, source's choice),
  // the source's own choice where it is this op.
  struct Term {
    int source, width;
    std::vector<double> seconds;
  };
  const std::vector<int> twins = previousLayerTwins(graph, choices, sources);
  std::vector<std::vector<double>> unaries(n);
  std::vector<std::vector<Term>> termsOf(n);
  // The frontier after each op: which ops stay live depends on the reads
  // alone, not on the costs.
  std::vector<std::vector<int>> frontierAfter(n);
  for (size_t o = 0; o < n; ++o) {
    for (int p : o > 0 ? frontierAfter[o - 1] : std::vector<int>{})
      if (lastUse[size_t(p)] > int(o))
        frontierAfter[o].push_back(p);
    if (lastUse[o] > int(o))
      frontierAfter[o].push_back(int(o));
  }
  const RepeatingLayers repeating = repeatingLayers(graph, twins, sources, frontierAfter);
  // The states after the previous layer, to tell when a layer changed them
  // by a constant alone.
  std::vector<double> previousLayerCost;
  for (size_t o = 0; o < n; ++o) {
    const Op &op = graph.ops[o];
    double repeat = double(graph.repeatOf(op.layer));
    const int k = int(choices[o].size());
    // An op alike its twin in the previous layer shares its tables.
    const int t = twins[o];
    std::vector<double> &unary = unaries[o];
    std::vector<Term> &terms = termsOf[o];
    if (t >= 0) {
      unary = unaries[size_t(t)];
      terms = termsOf[size_t(t)];
      size_t j = 0;
      for (const InputSource &source : sources[o])
        if (source.op >= 0)
          terms[j++].source = source.op;
    } else {
      ++solution.opsPriced;
      unary.resize(size_t(k));
      for (int c = 0; c < k; ++c)
        unary[size_t(c)] = computeSeconds(graph, op, choices[o][size_t(c)], mesh, cluster) * repeat;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        const InputSource &source = sources[o][i];
        if (source.op < 0)
          continue;
        Term term{source.op, source.op == int(o) ? 1 : int(choices[size_t(source.op)].size()), {}};
        term.seconds.resize(size_t(k * term.width));
        for (int cp = 0; cp < term.width; ++cp)
          for (int c = 0; c < k; ++c) {
            const OpSharding &theirs =
                source.op == int(o) ? choices[o][size_t(c)] : choices[size_t(source.op)][size_t(cp)];
            term.seconds[size_t(c * term.width + cp)] =
                inputSeconds(graph, op, choices[o][size_t(c)], op.inputs[i], source, graph.ops[size_t(source.op)],
                             theirs, mesh, cluster) *
                repeat;
          }
        terms.push_back(std::move(term));
      }
    }

    std::vector<int> next = frontierAfter[o];
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
    for (size_t j = 0; j < frontier.size(); ++j)
      slotOf[size_t(frontier[j])] = int(j);
    std::vector<int> keptSlot(next.size(), -1);
    for (size_t m = 0; m < next.size(); ++m)
      if (next[m] != int(o))
        keptSlot[m] = slotOf[size_t(next[m])];
    int ownSlot = !next.empty() && next.back() == int(o) ? int(next.size()) - 1 : -1;

    std::vector<double> nextCost(size_t(nextStates), std::numeric_limits<double>::infinity());
    back[o].assign(size_t(nextStates), {-1, -1});
    // Per term, the frontier slot of its source (-1: this op itself), and
    // for the state at hand, the source's choice.
    std::vector<int> termSlot, termChoice(terms.size(), 0);
    for (const Term &term : terms)
      termSlot.push_back(term.source == int(o) ? -1 : slotOf[size_t(term.source)]);
    std::vector<int> width;
    for (int p : frontier)
      width.push_back(int(choices[size_t(p)].size()));
    const int64_t ownStride = ownSlot >= 0 ? nextStride[size_t(ownSlot)] : 0;
    // What op o adds under choice c depends on its sources' choices alone,
    // far fewer combinations than states (the frontier carries ops o does
    // not read, such as a tied embedding read again at the end): summed
    // once per combination met, indexed by the sources' choices.
    // Where the combinations outnumber the states (an op of many inputs),
    // each state sums its own.
    const int64_t tableLimit = std::min<int64_t>(int64_t(cost.size()), (int64_t(1) << 22) / k);
    std::vector<int64_t> termStride(terms.size());
    int64_t combinations = 1;
    for (size_t t = 0; t < terms.size() && combinations <= tableLimit; ++t) {
      termStride[t] = combinations;
      combinations *= terms[t].width;
    }
    const bool tabled = combinations <= tableLimit;
    if (!tabled)
      std::fill(termStride.begin(), termStride.end(), 0);
    std::vector<double> added(size_t((tabled ? combinations : 1) * k));
    std::vector<char> addedReady(size_t(tabled ? combinations : 1), 0);
    // Each frontier digit's step in the kept state and in the sources'
    // combination: both follow the digits as they are counted up.
    std::vector<int64_t> keptStep(frontier.size(), 0), combinationStep(frontier.size(), 0);
    for (size_t m = 0; m < next.size(); ++m)
      if (keptSlot[m] >= 0)
        keptStep[size_t(keptSlot[m])] = nextStride[m];
    for (size_t t = 0; t < terms.size(); ++t)
      if (termSlot[t] >= 0)
        combinationStep[size_t(termSlot[t])] += termStride[t];
    // The states in order, their digits (each frontier op's choice) counted
    // up rather than divided out of the index.
    decoded.assign(frontier.size(), 0);
    int64_t kept = 0, combination = 0;
    for (int64_t state = 0; state < int64_t(cost.size()); ++state) {
      if (state > 0)
        for (size_t j = 0; j < decoded.size(); ++j) {
          if (++decoded[j] < width[j]) {
            kept += keptStep[j];
            combination += combinationStep[j];
            break;
          }
          decoded[j] = 0;
          kept -= (width[j] - 1) * keptStep[j];
          combination -= (width[j] - 1) * combinationStep[j];
        }
      const double before = cost[size_t(state)];
      if (before == std::numeric_limits<double>::infinity())
        continue;
      double *add = &added[size_t(combination * k)];
      if (!tabled || !addedReady[size_t(combination)]) {
        addedReady[size_t(combination)] = 1;
        for (size_t t = 0; t < terms.size(); ++t)
          termChoice[t] = termSlot[t] < 0 ? 0 : decoded[size_t(termSlot[t])];
        for (int c = 0; c < k; ++c) {
          double sum = unary[size_t(c)];
          for (size_t t = 0; t < terms.size(); ++t)
            sum += terms[t].seconds[size_t(c * terms[t].width + termChoice[t])];
          add[c] = sum;
        }
      }
      double *into = nextCost.data() + kept;
      std::pair<int32_t, int16_t> *from = back[o].data() + kept;
      for (int c = 0; c < k; ++c) {
        double total = before + add[c];
        int64_t target = c * ownStride;
        // Totals within rounding of each other are ties, kept by the
        // first met: rounding must not break a tie one way in one layer
        // and the other way in the next (identical layers keep one
        // sharding, which the estimator prices once).
        if (total < into[target] * (1 - kTieTolerance)) {
          into[target] = total;
          from[target] = {int32_t(state), int16_t(c)};
        }
      }
    }
    for (int p : frontier)
      slotOf[size_t(p)] = -1;
    frontier = std::move(next);
    cost = std::move(nextCost);

    // At the end of a layer that changed the states by a constant alone
    // (the same costs, less the least, as after the layer before) and took
    // the same choices, each following layer that repeats it does the same
    // again: its choices are copied and the constant added once per layer.
    // A hundred identical layers are solved in the few it takes the costs
    // to settle.
    int l = graph.ops[o].layer;
    if (l < 0 || l >= graph.numLayers || int(o) != repeating.last[size_t(l)])
      continue;
    int64_t period = repeating.period;
    int run = l;
    while (run + 1 < graph.numLayers && repeating.repeats[size_t(run + 1)])
      ++run;
    if (l >= 1 && run > l && repeating.repeats[size_t(l)] &&
        settledByConstant(previousLayerCost, cost, back, backOf, repeating.first[size_t(l)], int(o), period)) {
      double step = leastFinite(cost) - leastFinite(previousLayerCost);
      for (size_t copy = size_t(repeating.first[size_t(l + 1)]); copy <= size_t(repeating.last[size_t(run)]); ++copy) {
        backOf[copy] = backOf[copy - size_t(period)];
        unaries[copy] = unaries[copy - size_t(period)];
        termsOf[copy] = termsOf[copy - size_t(period)];
        size_t j = 0;
        for (const InputSource &source : sources[copy])
          if (source.op >= 0)
            termsOf[copy][j++].source = source.op;
      }
      for (double &c : cost)
        c += step * double(run - l);
      solution.layersCopied += run - l;
      o = size_t(repeating.last[size_t(run)]);
      frontier = frontierAfter[o];
      l = run;
    }
    previousLayerCost = cost;
  }

  // Every op's last reader has run: one state remains.
  solution.sharding = start;
  int64_t state = 0;
  for (size_t o = n; o-- > 0;) {
    auto [previous, c] = back[backOf[o]][size_t(state)];
    solution.sharding[o] = choices[o][size_t(c)];
    state = previous;
  }
  solution.seconds = cost.empty() ? 0 : cost[0];
  return solution;
}

} // namespace colossal::cost
