//===- Json.h - a small JSON value, parser and writer ------------*- C++ -*-===//
//
// Cluster descriptions, plans, manifests, step logs and safetensors headers
// are JSON documents. The cost model and the runtime may depend on nothing
// but the C++ standard library (and the runtime on MPI and CUDA), so both
// use this small implementation: RFC 8259 values, a parser that reports the
// line and column of the first error, and a writer with stable (sorted) key
// order.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_SUPPORT_JSON_H
#define COLOSSAL_SUPPORT_JSON_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace colossal::support {

class Json {
public:
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : value(b) {}
  Json(double d) : value(d) {}
  Json(int i) : value(double(i)) {}
  Json(int64_t i) : value(double(i)) {}
  Json(const char *s) : value(std::string(s)) {}
  Json(std::string s) : value(std::move(s)) {}
  Json(Array a) : value(std::make_shared<Array>(std::move(a))) {}
  Json(Object o) : value(std::make_shared<Object>(std::move(o))) {}

  bool isNull() const { return std::holds_alternative<std::monostate>(value); }
  bool isBool() const { return std::holds_alternative<bool>(value); }
  bool isNumber() const { return std::holds_alternative<double>(value); }
  bool isString() const { return std::holds_alternative<std::string>(value); }
  bool isArray() const { return std::holds_alternative<std::shared_ptr<Array>>(value); }
  bool isObject() const { return std::holds_alternative<std::shared_ptr<Object>>(value); }

  bool asBool() const { return std::get<bool>(value); }
  double asNumber() const { return std::get<double>(value); }
  const std::string &asString() const { return std::get<std::string>(value); }
  const Array &asArray() const { return *std::get<std::shared_ptr<Array>>(value); }
  const Object &asObject() const { return *std::get<std::shared_ptr<Object>>(value); }
  Array &asArray() { return *std::get<std::shared_ptr<Array>>(value); }
  Object &asObject() { return *std::get<std::shared_ptr<Object>>(value); }

  /// The member `key` of an object, or nullptr.
  const Json *find(const std::string &key) const;

  /// Serialises with `indent` spaces per level (0: one line).
  std::string dump(int indent = 2) const;

  /// Parses a document; on failure returns nullopt and sets `error` to
  /// "line L, column C: reason".
  static std::optional<Json> parse(const std::string &text, std::string &error);

private:
  std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      value;
};

} // namespace colossal::support

#endif // COLOSSAL_SUPPORT_JSON_H
