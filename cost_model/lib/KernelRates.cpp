//===- KernelRates.cpp - measured kernel rates by shape and kind ----------===//

#include "colossal/cost/KernelRates.h"
#include "JsonFields.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace colossal::cost {

const char *nameOf(KernelKind kind) {
  switch (kind) {
  case KernelKind::Elementwise:
    return "elementwise";
  case KernelKind::Transcendental:
    return "transcendental";
  case KernelKind::Norm:
    return "norm";
  case KernelKind::Softmax:
    return "softmax";
  case KernelKind::Loss:
    return "loss";
  case KernelKind::Embedding:
    return "embedding";
  }
  return "?";
}

const std::vector<KernelKind> &allKernelKinds() {
  static const std::vector<KernelKind> kinds = {KernelKind::Elementwise, KernelKind::Transcendental,
                                                KernelKind::Norm,        KernelKind::Softmax,
                                                KernelKind::Loss,        KernelKind::Embedding};
  return kinds;
}

namespace {

bool lessShape(const GemmShapePoint &a, const GemmShapePoint &b) {
  return std::array<double, 3>{a.m, a.n, a.k} < std::array<double, 3>{b.m, b.n, b.k};
}

/// The grid values bracketing `x` and the weight of the upper one, in logs.
struct Bracket {
  double low, high, t;
};

Bracket bracket(const std::vector<double> &values, double x) {
  if (x <= values.front())
    return {values.front(), values.front(), 0};
  if (x >= values.back())
    return {values.back(), values.back(), 0};
  size_t i = size_t(std::upper_bound(values.begin(), values.end(), x) - values.begin());
  double lo = values[i - 1], hi = values[i];
  return {lo, hi, (std::log(x) - std::log(lo)) / (std::log(hi) - std::log(lo))};
}

} // namespace

void KernelRates::indexGemmGrid() {
  std::sort(gemm.begin(), gemm.end(), lessShape);
  gridM.clear(), gridN.clear(), gridK.clear();
  for (const GemmShapePoint &p : gemm)
    gridM.push_back(p.m), gridN.push_back(p.n), gridK.push_back(p.k);
  for (std::vector<double> *v : {&gridM, &gridN, &gridK}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
}

double KernelRates::gemmEfficiency(double m, double n, double k) const {
  if (gemm.empty() || gridM.empty())
    return 1;
  Bracket bm = bracket(gridM, m), bn = bracket(gridN, n), bk = bracket(gridK, k);
  // The eight corners, weighted; a corner the grid lacks gives its weight
  // to the others.
  double sum = 0, weights = 0;
  for (int corner = 0; corner < 8; ++corner) {
    GemmShapePoint key{corner & 1 ? bm.high : bm.low, corner & 2 ? bn.high : bn.low, corner & 4 ? bk.high : bk.low, 0};
    double w = (corner & 1 ? bm.t : 1 - bm.t) * (corner & 2 ? bn.t : 1 - bn.t) * (corner & 4 ? bk.t : 1 - bk.t);
    auto it = std::lower_bound(gemm.begin(), gemm.end(), key, lessShape);
    if (w <= 0 || it == gemm.end() || it->m != key.m || it->n != key.n || it->k != key.k)
      continue;
    sum += w * it->efficiency;
    weights += w;
  }
  if (weights > 0)
    return sum / weights;
  // Off the grid: the nearest point in log distance.
  double best = 1e300, efficiency = 1;
  for (const GemmShapePoint &p : gemm) {
    double d = std::pow(std::log(p.m / m), 2) + std::pow(std::log(p.n / n), 2) + std::pow(std::log(p.k / k), 2);
    if (d < best)
      best = d, efficiency = p.efficiency;
  }
  return efficiency;
}

double KernelRates::speedupWhenBusy(double alone, int busy, int perNode) const {
  if (perNode <= 1 || busy >= perNode)
    return 1;
  double idle = double(perNode - std::max(1, busy)) / double(perNode - 1);
  return 1 + (alone - 1) * idle;
}

Json KernelRates::toJson() const {
  Json::Object o;
  if (!gemm.empty()) {
    Json::Array points;
    for (const GemmShapePoint &p : gemm)
      points.push_back(Json::Object{{"m", p.m}, {"n", p.n}, {"k", p.k}, {"efficiency", p.efficiency}});
    o["gemm_by_shape"] = points;
  }
  if (!attentionForward.empty() || !attentionBackward.empty())
    o["attention"] = Json::Object{{"forward", curveToJson(attentionForward, "keys", "efficiency")},
                                  {"backward", curveToJson(attentionBackward, "keys", "efficiency")}};
  if (!ringAttentionForward.empty() || !ringAttentionBackward.empty())
    o["ring_attention"] = Json::Object{{"forward", curveToJson(ringAttentionForward, "keys", "efficiency")},
                                       {"backward", curveToJson(ringAttentionBackward, "keys", "efficiency")}};
  if (!causalAttentionForward.empty() || !causalAttentionBackward.empty())
    o["causal_attention"] = Json::Object{{"forward", curveToJson(causalAttentionForward, "keys", "efficiency")},
                                         {"backward", curveToJson(causalAttentionBackward, "keys", "efficiency")}};
  if (!streaming.empty()) {
    Json::Object kinds;
    auto costJson = [](const StreamingCost &c) {
      return Json::Object{{"call_s", c.callSeconds}, {"bytes_per_s", c.bytesPerSecond}};
    };
    for (const auto &[kind, rate] : streaming)
      kinds[nameOf(kind)] = Json::Object{{"forward", costJson(rate.forward)}, {"backward", costJson(rate.backward)}};
    o["streaming"] = kinds;
  }
  if (optimizerBytesPerSecond > 0)
    o["optimizer_bytes_per_s"] = optimizerBytesPerSecond;
  if (hostOptimizerBytesPerSecond > 0)
    o["host_optimizer_bytes_per_s"] = hostOptimizerBytesPerSecond;
  o["alone_speedup"] = Json::Object{
      {"gemm", aloneSpeedupGemm}, {"streaming", aloneSpeedupStreaming}, {"optimizer", aloneSpeedupOptimizer}};
  return o;
}

KernelRates KernelRates::fromJson(const Json &json, const std::string &path, std::string &error) {
  KernelRates rates;
  if (!json.isObject()) {
    if (error.empty())
      error = path + ": expected an object";
    return rates;
  }
  FieldReader r{json, path + ".", error};
  if (const Json *points = r.get("gemm_by_shape", false)) {
    if (!points->isArray() && error.empty())
      error = path + ".gemm_by_shape: expected an array";
    else if (points->isArray())
      for (size_t i = 0; i < points->asArray().size(); ++i) {
        FieldReader p{points->asArray()[i], path + ".gemm_by_shape[" + std::to_string(i) + "].", error};
        GemmShapePoint point{p.number("m"), p.number("n"), p.number("k"), p.number("efficiency")};
        if (point.efficiency > 1 && error.empty())
          error = p.path + "efficiency: above 1 (" + std::to_string(point.efficiency) + ")";
        rates.gemm.push_back(point);
      }
    rates.indexGemmGrid();
  }
  auto attentionCurves = [&](const char *key, std::vector<CurvePoint> &forward, std::vector<CurvePoint> &backward) {
    if (const Json *attention = r.get(key, false)) {
      FieldReader a{*attention, path + "." + key + ".", error};
      forward = a.curve("forward", "keys", "efficiency");
      backward = a.curve("backward", "keys", "efficiency");
      if (forward.empty() != backward.empty() && error.empty())
        error = path + "." + key + ": needs both forward and backward";
    }
  };
  attentionCurves("attention", rates.attentionForward, rates.attentionBackward);
  attentionCurves("causal_attention", rates.causalAttentionForward, rates.causalAttentionBackward);
  attentionCurves("ring_attention", rates.ringAttentionForward, rates.ringAttentionBackward);
  if (const Json *kinds = r.get("streaming", false)) {
    if (!kinds->isObject() && error.empty())
      error = path + ".streaming: expected an object of kernel kinds";
    else if (kinds->isObject())
      for (const auto &[name, value] : kinds->asObject()) {
        auto kind = std::find_if(allKernelKinds().begin(), allKernelKinds().end(),
                                 [&](KernelKind k) { return name == nameOf(k); });
        if (kind == allKernelKinds().end()) {
          if (error.empty())
            error = path + ".streaming." + name +
                    ": not a kernel kind (elementwise, transcendental, norm, "
                    "softmax, loss, embedding)";
          continue;
        }
        std::string at = path + ".streaming." + name + ".";
        auto costOf = [&](const char *pass) {
          StreamingCost c;
          FieldReader s{value, at, error};
          if (const Json *object = s.get(pass, true)) {
            FieldReader p{*object, at + pass + ".", error};
            c.callSeconds = p.number("call_s", true, 0, /*positive=*/false);
            c.bytesPerSecond = p.number("bytes_per_s", true, 1);
          }
          return c;
        };
        StreamingRate rate{costOf("forward"), costOf("backward")};
        rates.streaming[*kind] = rate;
      }
  }
  rates.optimizerBytesPerSecond = r.number("optimizer_bytes_per_s", false, 0);
  rates.hostOptimizerBytesPerSecond = r.number("host_optimizer_bytes_per_s", false, 0);
  if (const Json *alone = r.get("alone_speedup", false)) {
    FieldReader a{*alone, path + ".alone_speedup.", error};
    rates.aloneSpeedupGemm = a.number("gemm", false, 1);
    rates.aloneSpeedupStreaming = a.number("streaming", false, 1);
    rates.aloneSpeedupOptimizer = a.number("optimizer", false, 1);
  }
  return rates;
}

} // namespace colossal::cost
