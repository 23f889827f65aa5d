//===- Plan.cpp - strategies, meshes and per-op shardings -----------------===//

#include "colossal/cost/Plan.h"

#include <algorithm>
#include <cstdlib>

namespace colossal::cost {

const char *nameOf(TensorMode m) {
  switch (m) {
  case TensorMode::OneD: return "1d";
  case TensorMode::TwoD: return "2d";
  case TensorMode::TwoPointFiveD: return "2.5d";
  case TensorMode::ThreeD: return "3d";
  }
  return "?";
}
const char *nameOf(SequenceMode m) {
  switch (m) {
  case SequenceMode::None: return "none";
  case SequenceMode::Megatron: return "megatron";
  case SequenceMode::AllToAll: return "all-to-all";
  case SequenceMode::Ring: return "ring";
  }
  return "?";
}
const char *nameOf(Schedule s) {
  switch (s) {
  case Schedule::GPipe: return "gpipe";
  case Schedule::OneFOneB: return "1f1b";
  case Schedule::Interleaved: return "interleaved";
  }
  return "?";
}
const char *nameOf(Recompute r) {
  switch (r) {
  case Recompute::None: return "none";
  case Recompute::Selective: return "selective";
  case Recompute::Full: return "full";
  }
  return "?";
}

std::string Strategy::str() const {
  std::string s = "dp=" + std::to_string(dp) + ",tp=" + std::to_string(tp) +
                  ",pp=" + std::to_string(pp) + ",sp=" + std::to_string(sp);
  if (tpMode != TensorMode::OneD)
    s += std::string(",tp_mode=") + nameOf(tpMode);
  if (tpMode == TensorMode::TwoPointFiveD)
    s += ",tp_depth=" + std::to_string(tpDepth);
  if (spMode != SequenceMode::None)
    s += std::string(",sp_mode=") + nameOf(spMode);
  s += ",microbatches=" + std::to_string(microbatches);
  if (pp > 1)
    s += std::string(",schedule=") + nameOf(schedule);
  if (virtualStages > 1)
    s += ",virtual_stages=" + std::to_string(virtualStages);
  s += ",zero=" + std::to_string(zero);
  if (offloadOptimizer)
    s += ",offload=optimizer";
  s += std::string(",recompute=") + nameOf(recompute);
  if (!stageLayers.empty()) {
    s += ",stage_layers=";
    for (size_t i = 0; i < stageLayers.size(); ++i)
      s += (i ? "/" : "") + std::to_string(stageLayers[i]);
  }
  return s;
}

Json Strategy::toJson() const {
  Json::Object object{{"dp", dp},
                      {"tp", tp},
                      {"tp_mode", nameOf(tpMode)},
                      {"tp_depth", tpDepth},
                      {"sp", sp},
                      {"sp_mode", nameOf(spMode)},
                      {"pp", pp},
                      {"microbatches", microbatches},
                      {"schedule", nameOf(schedule)},
                      {"virtual_stages", virtualStages},
                      {"zero", zero},
                      {"offload", offloadOptimizer ? "optimizer" : "none"},
                      {"recompute", nameOf(recompute)}};
  if (!stageLayers.empty()) {
    Json::Array layers;
    for (int64_t n : stageLayers)
      layers.push_back(Json(n));
    object["stage_layers"] = Json(layers);
  }
  return object;
}

std::optional<Strategy> Strategy::fromJson(const Json &json, std::string &error) {
  Strategy s;
  if (!json.isObject()) {
    error = "strategy: expected an object";
    return std::nullopt;
  }
  auto positive = [&](const char *key, int &out) {
    if (const Json *v = json.find(key)) {
      if (!v->isNumber() || v->asNumber() < 1 || v->asNumber() != int(v->asNumber())) {
        error = std::string("strategy.") + key + ": expected a positive integer";
        return false;
      }
      out = int(v->asNumber());
    }
    return true;
  };
  auto choice = [&](const char *key, auto &out, auto... values) {
    const Json *v = json.find(key);
    if (!v)
      return true;
    if (v->isString())
      for (auto value : {values...})
        if (v->asString() == nameOf(value)) {
          out = value;
          return true;
        }
    error = std::string("strategy.") + key + ": unknown value";
    return false;
  };
  if (!positive("dp", s.dp) || !positive("tp", s.tp) || !positive("sp", s.sp) ||
      !positive("pp", s.pp) || !positive("microbatches", s.microbatches) ||
      !positive("virtual_stages", s.virtualStages) || !positive("tp_depth", s.tpDepth) ||
      !choice("tp_mode", s.tpMode, TensorMode::OneD, TensorMode::TwoD,
              TensorMode::TwoPointFiveD, TensorMode::ThreeD) ||
      !choice("sp_mode", s.spMode, SequenceMode::None, SequenceMode::Megatron,
              SequenceMode::AllToAll, SequenceMode::Ring) ||
      !choice("schedule", s.schedule, Schedule::GPipe, Schedule::OneFOneB,
              Schedule::Interleaved) ||
      !choice("recompute", s.recompute, Recompute::None, Recompute::Selective, Recompute::Full))
    return std::nullopt;
  if (const Json *v = json.find("zero")) {
    if (!v->isNumber() || v->asNumber() < 0 || v->asNumber() > 3) {
      error = "strategy.zero: expected 0, 1, 2 or 3";
      return std::nullopt;
    }
    s.zero = int(v->asNumber());
  }
  if (const Json *v = json.find("offload"))
    s.offloadOptimizer = v->isString() && v->asString() == "optimizer";
  if (const Json *v = json.find("stage_layers")) {
    // An array, or "12/12/11/13" from the command line.
    std::vector<std::string> items;
    if (v->isArray()) {
      for (const Json &n : v->asArray())
        items.push_back(n.isNumber() ? std::to_string(int64_t(n.asNumber())) : "?");
    } else if (v->isString() || v->isNumber()) {
      std::string text = v->isString() ? v->asString() : std::to_string(int64_t(v->asNumber()));
      size_t start = 0;
      while (start <= text.size()) {
        size_t slash = text.find('/', start);
        items.push_back(text.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos)
          break;
        start = slash + 1;
      }
    }
    for (const std::string &item : items) {
      char *end = nullptr;
      long long n = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || n < 1) {
        error = "strategy.stage_layers: expected positive layer counts, one per stage (e.g. 12/12/11/13)";
        return std::nullopt;
      }
      s.stageLayers.push_back(n);
    }
    if (s.stageLayers.empty()) {
      error = "strategy.stage_layers: expected positive layer counts, one per stage (e.g. 12/12/11/13)";
      return std::nullopt;
    }
  }
  return s;
}

std::optional<Strategy> Strategy::parse(const std::string &text, std::string &error,
                                        std::set<std::string> *keys) {
  Json::Object object;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (item.empty())
      continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      error = "strategy: expected key=value, got '" + item + "'";
      return std::nullopt;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    static const char *known[] = {"dp", "tp", "tp_mode", "sp", "sp_mode", "pp", "microbatches",
                                  "schedule", "virtual_stages", "zero", "offload", "recompute",
                                  "tp_depth", "stage_layers"};
    if (std::find(std::begin(known), std::end(known), key) == std::end(known)) {
      error = "strategy: unknown key '" + key + "'";
      return std::nullopt;
    }
    if (keys)
      keys->insert(key);
    char *endp = nullptr;
    double number = std::strtod(value.c_str(), &endp);
    if (!value.empty() && endp == value.c_str() + value.size() && key != "stage_layers")
      object[key] = number;
    else
      object[key] = value;
  }
  std::optional<Strategy> strategy = fromJson(Json(object), error);
  if (strategy && object.count("offload") && object["offload"].isString() &&
      object["offload"].asString() != "optimizer" && object["offload"].asString() != "none") {
    error = "strategy.offload: expected optimizer or none";
    return std::nullopt;
  }
  return strategy;
}

int Mesh::axisIndex(const std::string &name) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == name)
      return int(i);
  return -1;
}

const MeshAxis *Mesh::axis(const std::string &name) const {
  int i = axisIndex(name);
  return i < 0 ? nullptr : &axes[i];
}

Json Mesh::toJson() const {
  Json::Array list;
  for (const MeshAxis &a : axes)
    list.push_back(Json::Object{{"name", a.name}, {"size", a.size}, {"per_node", a.perNode}});
  return list;
}

/// The side q of the tensor grid and its depth d, or {0, 0} when `tp` does
/// not have the mode's shape (q*q for 2D, q*q*d for 2.5D, q*q*q for 3D).
std::pair<int, int> tensorGrid(const Strategy &strategy) {
  int tp = strategy.tp, d = strategy.tpMode == TensorMode::TwoPointFiveD ? strategy.tpDepth : 1;
  for (int q = 1; q * q <= tp; ++q) {
    if (strategy.tpMode == TensorMode::ThreeD && q * q * q == tp)
      return {q, q};
    if (strategy.tpMode != TensorMode::ThreeD && q * q * d == tp)
      return {q, d};
  }
  return {0, 0};
}

Mesh buildMesh(const Strategy &strategy, const Cluster &cluster) {
  Mesh mesh;
  int inner = 1;
  std::vector<std::pair<const char *, int>> axes;
  if (strategy.tpMode == TensorMode::OneD) {
    axes.push_back({"tp", strategy.tp});
  } else {
    auto [q, d] = tensorGrid(strategy);
    // An impossible grid keeps unit axes; checkSharding reports it.
    q = std::max(q, 1);
    d = std::max(d, 1);
    axes.push_back({"tp_row", q});
    axes.push_back({"tp_col", q});
    if (strategy.tpMode != TensorMode::TwoD)
      axes.push_back({"tp_depth", d});
  }
  axes.push_back({"sp", strategy.sp});
  axes.push_back({"dp", strategy.dp});
  axes.push_back({"pp", strategy.pp});
  for (auto [name, size] : axes) {
    MeshAxis axis{name, size, 1};
    if (inner < cluster.gpusPerNode)
      axis.perNode = std::max(1, std::min(size, cluster.gpusPerNode / inner));
    if (size == 1)
      axis.perNode = 1;
    mesh.axes.push_back(axis);
    inner *= size;
  }
  return mesh;
}

/// Whether the grid's blocks divide every op's split dimensions, as the
/// papers lay them out (Colossal-AI's documentation): a linear layer's X
/// [m, k] in q x q blocks (2D), in q d x q (2.5D) or q^2 x q (3D), its weight
/// [k, n] in q x q blocks (2D, 2.5D) or q x q^2 (3D); attention by heads
/// along the q columns. The graph's factors: the features (hidden, MLP
/// width, vocabulary) split q ways (q^2 under 3D, where each is some layer's
/// output), the heads q ways, a microbatch's tokens (batch x sequence) q,
/// q d or q^2 ways.
static bool gridDivides(const Graph &graph, const Strategy &strategy, std::string &error) {
  auto [q, d] = tensorGrid(strategy);
  int64_t features = strategy.tpMode == TensorMode::ThreeD ? int64_t(q) * q : q;
  int64_t tokens = strategy.tpMode == TensorMode::TwoD            ? q
                   : strategy.tpMode == TensorMode::TwoPointFiveD ? int64_t(q) * d
                                                                  : int64_t(q) * q;
  std::string grid = std::to_string(q) + " x " + std::to_string(q) +
                     (strategy.tpMode == TensorMode::TwoD ? "" : " x " + std::to_string(d));
  auto refuse = [&](const Op &op, const std::string &what, int64_t size, int64_t ways) {
    error = "op " + op.name + ": " + what + " of size " + std::to_string(size) + " does not divide " +
            std::to_string(ways) + " ways over the " + grid + " grid of tp_mode " + nameOf(strategy.tpMode);
    return false;
  };
  for (const Op &op : graph.ops) {
    int64_t batch = 0, seq = 0;
    for (const Factor &f : op.factors) {
      int64_t ways = f.name == "hidden" || f.name == "ffn" || f.name == "vocab" ? features
                     : f.name == "heads" || f.name == "kv_heads"                ? q
                                                                                : 1;
      if (f.size % ways != 0)
        return refuse(op, "factor " + f.name, f.size, ways);
      batch = f.name == "batch" ? f.size : batch;
      seq = f.name == "seq" ? f.size : seq;
    }
    if (batch > 0 && seq > 0 && (batch * seq) % tokens != 0)
      return refuse(op, "its batch x sequence tokens", batch * seq, tokens);
  }
  return true;
}

static bool hasFactor(const Op &op, const std::string &name) {
  return std::any_of(op.factors.begin(), op.factors.end(),
                     [&](const Factor &f) { return f.name == name; });
}

GraphSharding replicatedSharding(const Graph &graph) {
  GraphSharding sharding;
  sharding.reserve(graph.ops.size());
  for (const Op &op : graph.ops)
    sharding.emplace_back(op.factors.size());
  return sharding;
}

GraphSharding shardGraph(const Graph &graph, const Strategy &strategy, const Mesh &mesh) {
  int tp = strategy.tp > 1 ? mesh.axisIndex("tp") : -1;
  int sp = strategy.sp > 1 ? mesh.axisIndex("sp") : -1;
  GraphSharding sharding;
  for (const Op &op : graph.ops) {
    OpSharding s(op.factors.size());
    // Tensor-parallel regions split heads, the MLP width or the vocabulary;
    // everything else (norms, residuals, dropout on the hidden state) is
    // replicated over the tensor axis unless Megatron sequence parallelism
    // splits it along the sequence.
    // Grouped-query attention splits its key heads (and the query heads
    // that share them).
    bool tensorRegion =
        hasFactor(op, "heads") || hasFactor(op, "kv_heads") || hasFactor(op, "ffn") || hasFactor(op, "vocab");
    for (size_t f = 0; f < op.factors.size(); ++f) {
      const std::string &name = op.factors[f].name;
      bool heads = name == "heads" || name == "kv_heads";
      if (tp >= 0 && (heads || name == "ffn" || name == "vocab"))
        s[f].push_back(tp);
      if (tp >= 0 && strategy.spMode == SequenceMode::Megatron && !tensorRegion && name == "seq")
        s[f].push_back(tp);
      if (sp >= 0 && name == "seq" &&
          !(strategy.spMode == SequenceMode::AllToAll && op.attentionCore))
        s[f].push_back(sp);
      if (sp >= 0 && heads && strategy.spMode == SequenceMode::AllToAll && op.attentionCore)
        s[f].push_back(sp);
    }
    sharding.push_back(std::move(s));
  }
  return sharding;
}

bool checkSharding(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                   const Strategy &strategy, std::string &error, SplitLayouts layouts) {
  if (strategy.tpMode != TensorMode::OneD && tensorGrid(strategy).first == 0) {
    error = "tp=" + std::to_string(strategy.tp) + " is not a " +
            (strategy.tpMode == TensorMode::TwoD              ? std::string("square q*q")
             : strategy.tpMode == TensorMode::TwoPointFiveD ? "q*q*tp_depth"
                                                            : std::string("cube q*q*q")) +
            " grid for tp_mode " + nameOf(strategy.tpMode);
    return false;
  }
  if (strategy.tpMode != TensorMode::OneD && strategy.spMode == SequenceMode::Megatron) {
    error = "megatron sequence parallelism needs tp_mode 1d";
    return false;
  }
  if (strategy.tpMode != TensorMode::OneD && strategy.tp > 1 && !gridDivides(graph, strategy, error))
    return false;
  if (strategy.sp > 1 && (strategy.spMode == SequenceMode::None ||
                          strategy.spMode == SequenceMode::Megatron)) {
    error = "sp > 1 needs sp_mode all-to-all or ring (megatron uses the tensor axis)";
    return false;
  }
  int stages = strategy.pp * strategy.virtualStages;
  if (!strategy.stageLayers.empty()) {
    int64_t total = 0;
    for (int64_t n : strategy.stageLayers)
      total += n;
    if (int(strategy.stageLayers.size()) != stages || total != graph.realLayers()) {
      error = "stage_layers lists " + std::to_string(strategy.stageLayers.size()) + " stages holding " +
              std::to_string(total) + " layers; the plan has " + std::to_string(stages) + " stages and the model " +
              std::to_string(graph.realLayers()) + " layers";
      return false;
    }
  } else if (strategy.pp > 1 && graph.realLayers() % stages != 0) {
    error = std::to_string(graph.realLayers()) + " layers do not divide into " + std::to_string(stages) +
            " pipeline stages (give stage_layers=... for an uneven split)";
    return false;
  }
  for (size_t o = 0; o < graph.ops.size(); ++o) {
    const Op &op = graph.ops[o];
    if (o >= sharding.size() || sharding[o].size() != op.factors.size()) {
      error = "op " + std::to_string(o) + " (" + op.name + ") has " + std::to_string(op.factors.size()) +
              " factors; the sharding gives " +
              (o < sharding.size() ? std::to_string(sharding[o].size()) : std::string("none"));
      return false;
    }
    for (size_t f = 0; f < op.factors.size(); ++f) {
      int64_t ways = 1;
      for (int a : sharding[o][f])
        ways *= mesh.axes[a].size;
      if (layouts == SplitLayouts::Built)
        continue;
      if (op.factors[f].size % ways != 0) {
        error = "op " + op.name + ": factor " + op.factors[f].name + " of size " +
                std::to_string(op.factors[f].size) + " does not divide " + std::to_string(ways) +
                " ways";
        return false;
      }
      // Vocabulary-parallel cross-entropy (the estimator's loss rule).
      bool special = op.kind == OpKind::Loss;
      if (ways > 1 && op.factors[f].kind == FactorKind::Whole && !special) {
        error = "op " + op.name + ": factor " + op.factors[f].name +
                " must stay whole, but is split " + std::to_string(ways) + " ways";
        return false;
      }
    }
  }
  return true;
}

} // namespace colossal::cost

namespace colossal::cost {

Json shardingToJson(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh) {
  Json::Array ops, values;
  auto axisNames = [&](const std::vector<int> &axes) {
    Json::Array names;
    for (int a : axes)
      if (mesh.axes[size_t(a)].size > 1)
        names.push_back(mesh.axes[size_t(a)].name);
    return names;
  };
  for (size_t o = 0; o < graph.ops.size() && o < sharding.size(); ++o) {
    const Op &op = graph.ops[o];
    if (sharding[o].size() != op.factors.size())
      continue;
    Json::Object splits;
    for (size_t f = 0; f < op.factors.size(); ++f)
      if (Json::Array names = axisNames(sharding[o][f]); !names.empty())
        splits[op.factors[f].name] = names;
    if (splits.empty())
      continue;
    ops.push_back(Json::Object{{"index", int64_t(o)}, {"op", op.name}, {"splits", splits}});
    for (const TensorUse &out : op.outputs) {
      Json::Array dims;
      bool split = false;
      for (const std::vector<int> &dim : out.dims) {
        std::vector<int> axes;
        for (int f : dim)
          axes.insert(axes.end(), sharding[o][size_t(f)].begin(), sharding[o][size_t(f)].end());
        Json::Array names = axisNames(axes);
        split |= !names.empty();
        dims.push_back(names);
      }
      std::vector<int> partial;
      for (size_t f = 0; f < op.factors.size(); ++f) {
        bool indexed = false;
        for (const std::vector<int> &dim : out.dims)
          indexed |= std::find(dim.begin(), dim.end(), int(f)) != dim.end();
        if (!indexed && op.factors[f].kind == FactorKind::Reduction)
          partial.insert(partial.end(), sharding[o][f].begin(), sharding[o][f].end());
      }
      Json::Array partialNames = axisNames(partial);
      if (split || !partialNames.empty())
        values.push_back(Json::Object{{"value", graph.values[size_t(out.value)].name.empty()
                                                    ? Json(int64_t(out.value))
                                                    : Json(graph.values[size_t(out.value)].name)},
                                      {"producer", int64_t(o)},
                                      {"dims", dims},
                                      {"partial", partialNames}});
    }
  }
  return Json::Object{{"op_count", int64_t(graph.ops.size())}, {"ops", ops}, {"values", values}};
}

std::optional<GraphSharding> shardingFromJson(const Json &json, const Graph &graph, const Mesh &mesh,
                                              std::string &error) {
  const Json *count = json.find("op_count");
  const Json *ops = json.find("ops");
  if (!count || !count->isNumber() || !ops || !ops->isArray()) {
    error = "the sharding section needs op_count and ops";
    return std::nullopt;
  }
  if (int64_t(count->asNumber()) != int64_t(graph.ops.size())) {
    error = "the plan's shardings are for a graph of " + std::to_string(int64_t(count->asNumber())) +
            " ops; this model has " + std::to_string(graph.ops.size()) + " (another model or batch size?)";
    return std::nullopt;
  }
  GraphSharding sharding = replicatedSharding(graph);
  for (const Json &entry : ops->asArray()) {
    const Json *index = entry.find("index");
    const Json *name = entry.find("op");
    const Json *splits = entry.find("splits");
    if (!index || !index->isNumber() || !splits || !splits->isObject()) {
      error = "an ops entry needs index and splits";
      return std::nullopt;
    }
    int64_t o = int64_t(index->asNumber());
    if (o < 0 || o >= int64_t(graph.ops.size()) ||
        (name && name->isString() && name->asString() != graph.ops[size_t(o)].name)) {
      error = "ops entry " + std::to_string(o) + " does not name an op of this model" +
              (o >= 0 && o < int64_t(graph.ops.size()) ? " (it is " + graph.ops[size_t(o)].name + ")" : "");
      return std::nullopt;
    }
    const Op &op = graph.ops[size_t(o)];
    for (const auto &[factor, axes] : splits->asObject()) {
      auto f = std::find_if(op.factors.begin(), op.factors.end(),
                            [&](const Factor &x) { return x.name == factor; });
      if (f == op.factors.end() || !axes.isArray()) {
        error = "op " + std::to_string(o) + " (" + op.name + ") has no factor " + factor;
        return std::nullopt;
      }
      for (const Json &axis : axes.asArray()) {
        int a = axis.isString() ? mesh.axisIndex(axis.asString()) : -1;
        if (a < 0) {
          error = "op " + std::to_string(o) + " (" + op.name + "): no mesh axis " +
                  (axis.isString() ? axis.asString() : std::string("(not a name)"));
          return std::nullopt;
        }
        sharding[size_t(o)][size_t(f - op.factors.begin())].push_back(a);
      }
    }
  }
  return sharding;
}

} // namespace colossal::cost
