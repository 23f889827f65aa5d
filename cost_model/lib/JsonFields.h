//===- JsonFields.h - reading a description's fields with paths -*- C++ -*-===//
//
// Cluster descriptions are written by hand as often as by colossal-bench:
// every field is read through one reader that names the offending path
// ("intra_node.latency_s: expected a number") and keeps the first problem.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_JSONFIELDS_H
#define COLOSSAL_COST_LIB_JSONFIELDS_H

#include "colossal/cost/Cluster.h"

#include <algorithm>
#include <string>
#include <vector>

namespace colossal::cost {

/// Reads fields of one object, remembering the first problem.
struct FieldReader {
  const Json &object;
  std::string path;
  std::string &error;

  const Json *get(const std::string &key, bool required) {
    const Json *value = object.find(key);
    if (!value && required && error.empty())
      error = path + key + ": missing";
    return value;
  }
  double number(const std::string &key, bool required = true, double fallback = 0, bool positive = true) {
    const Json *value = get(key, required);
    if (!value)
      return fallback;
    if (!value->isNumber() || (positive && !(value->asNumber() > 0))) {
      if (error.empty())
        error = path + key + ": expected a " + (positive ? "positive " : "") + "number";
      return fallback;
    }
    return value->asNumber();
  }
  std::string string(const std::string &key, bool required = false) {
    const Json *value = get(key, required);
    if (!value)
      return "";
    if (!value->isString()) {
      if (error.empty())
        error = path + key + ": expected a string";
      return "";
    }
    return value->asString();
  }
  std::vector<CurvePoint> curve(const std::string &key, const char *sizeKey, const char *valueKey) {
    std::vector<CurvePoint> points;
    const Json *value = get(key, false);
    if (!value)
      return points;
    if (!value->isArray()) {
      if (error.empty())
        error = path + key + ": expected an array";
      return points;
    }
    for (size_t i = 0; i < value->asArray().size(); ++i) {
      const Json &item = value->asArray()[i];
      if (!item.isObject()) {
        if (error.empty())
          error = path + key + "[" + std::to_string(i) + "]: expected an object";
        return points;
      }
      FieldReader reader{item, path + key + "[" + std::to_string(i) + "].", error};
      points.push_back({reader.number(sizeKey), reader.number(valueKey)});
    }
    std::sort(points.begin(), points.end(), [](const CurvePoint &a, const CurvePoint &b) { return a.size < b.size; });
    return points;
  }
  Link link(const std::string &key) {
    Link link;
    const Json *value = get(key, true);
    if (!value)
      return link;
    if (!value->isObject()) {
      if (error.empty())
        error = path + key + ": expected an object";
      return link;
    }
    FieldReader reader{*value, path + key + ".", error};
    link.bandwidth = reader.number("bandwidth_bytes_per_s");
    link.latency = reader.number("latency_s", false, 0, /*positive=*/false);
    link.efficiency = reader.number("efficiency", false, 1.0);
    link.busBandwidth = reader.curve("bus_bandwidth", "bytes", "bytes_per_s");
    return link;
  }
};

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_JSONFIELDS_H
