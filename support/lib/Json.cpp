//===- Json.cpp - a small JSON value, parser and writer -------------------===//

#include "colossal/support/Json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace colossal::support {

const Json *Json::find(const std::string &key) const {
  if (!isObject())
    return nullptr;
  auto it = asObject().find(key);
  return it == asObject().end() ? nullptr : &it->second;
}

static void writeString(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (c < 0x20) {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
        out += buffer;
      } else {
        out += char(c);
      }
    }
  }
  out += '"';
}

static void writeNumber(std::string &out, double d) {
  if (!std::isfinite(d)) {
    out += "null"; // JSON has no infinities; readers see a missing value
    return;
  }
  if (d == std::floor(d) && std::fabs(d) < 1e15) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.0f", d);
    out += buffer;
    return;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", d);
  // Prefer the shortest form that reads back exactly.
  for (int precision = 6; precision < 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, d);
    if (std::strtod(shorter, nullptr) == d) {
      out += shorter;
      return;
    }
  }
  out += buffer;
}

static void write(const Json &json, std::string &out, int indent, int depth) {
  auto newline = [&](int level) {
    if (indent == 0)
      return;
    out += '\n';
    out.append(size_t(indent * level), ' ');
  };
  if (json.isNull())
    out += "null";
  else if (json.isBool())
    out += json.asBool() ? "true" : "false";
  else if (json.isNumber())
    writeNumber(out, json.asNumber());
  else if (json.isString())
    writeString(out, json.asString());
  else if (json.isArray()) {
    const auto &array = json.asArray();
    out += '[';
    for (size_t i = 0; i < array.size(); ++i) {
      if (i)
        out += ',';
      newline(depth + 1);
      write(array[i], out, indent, depth + 1);
    }
    if (!array.empty())
      newline(depth);
    out += ']';
  } else {
    const auto &object = json.asObject();
    out += '{';
    bool first = true;
    for (const auto &[key, member] : object) {
      if (!first)
        out += ',';
      first = false;
      newline(depth + 1);
      writeString(out, key);
      out += indent ? ": " : ":";
      write(member, out, indent, depth + 1);
    }
    if (!object.empty())
      newline(depth);
    out += '}';
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  write(*this, out, indent, 0);
  return out;
}

namespace {

class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  std::optional<Json> document(std::string &error) {
    std::optional<Json> value = parseValue(0);
    skipSpace();
    if (value && pos != text.size())
      fail("unexpected text after the document");
    if (!message.empty()) {
      error = where() + ": " + message;
      return std::nullopt;
    }
    return value;
  }

private:
  static constexpr int kMaxDepth = 256;

  std::string where() const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < failPos && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }

  std::nullopt_t fail(const std::string &why) {
    if (message.empty()) {
      message = why;
      failPos = pos;
    }
    return std::nullopt;
  }

  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }

  bool consume(const char *literal) {
    size_t n = std::char_traits<char>::length(literal);
    if (text.compare(pos, n, literal) != 0)
      return false;
    pos += n;
    return true;
  }

  std::optional<Json> parseValue(int depth) {
    if (depth > kMaxDepth)
      return fail("nesting deeper than 256 levels");
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end of input");
    char c = text[pos];
    if (c == '{')
      return parseObject(depth);
    if (c == '[')
      return parseArray(depth);
    if (c == '"') {
      auto s = parseString();
      if (!s)
        return std::nullopt;
      return Json(std::move(*s));
    }
    if (consume("true"))
      return Json(true);
    if (consume("false"))
      return Json(false);
    if (consume("null"))
      return Json(nullptr);
    return parseNumber();
  }

  std::optional<Json> parseNumber() {
    size_t start = pos;
    if (pos < text.size() && text[pos] == '-')
      ++pos;
    bool digits = false;
    while (pos < text.size() && (isdigit((unsigned char)text[pos]) || text[pos] == '.' ||
                                 text[pos] == 'e' || text[pos] == 'E' || text[pos] == '+' ||
                                 text[pos] == '-')) {
      digits |= isdigit((unsigned char)text[pos]) != 0;
      ++pos;
    }
    if (!digits)
      return fail("expected a value");
    std::string number = text.substr(start, pos - start);
    char *end = nullptr;
    double d = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size()) {
      pos = start;
      return fail("malformed number '" + number + "'");
    }
    return Json(d);
  }

  std::optional<std::string> parseString() {
    ++pos; // opening quote
    std::string out;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        break;
      char e = text[pos++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        if (pos + 4 > text.size())
          return fail("truncated \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
          char h = text[pos++];
          int digit = isdigit((unsigned char)h) ? h - '0'
                      : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                      : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                               : -1;
          if (digit < 0)
            return fail("malformed \\u escape");
          code = code * 16 + unsigned(digit);
        }
        // Basic multilingual plane only; enough for names and paths.
        if (code < 0x80) {
          out += char(code);
        } else if (code < 0x800) {
          out += char(0xc0 | (code >> 6));
          out += char(0x80 | (code & 0x3f));
        } else {
          out += char(0xe0 | (code >> 12));
          out += char(0x80 | ((code >> 6) & 0x3f));
          out += char(0x80 | (code & 0x3f));
        }
        break;
      }
      default:
        return fail(std::string("unknown escape \\") + e);
      }
    }
    if (pos >= text.size())
      return fail("unterminated string");
    ++pos;
    return out;
  }

  std::optional<Json> parseArray(int depth) {
    ++pos;
    Json::Array array;
    skipSpace();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      return Json(std::move(array));
    }
    while (true) {
      auto value = parseValue(depth + 1);
      if (!value)
        return std::nullopt;
      array.push_back(std::move(*value));
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return Json(std::move(array));
      }
      return fail("expected ',' or ']'");
    }
  }

  std::optional<Json> parseObject(int depth) {
    ++pos;
    Json::Object object;
    skipSpace();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      return Json(std::move(object));
    }
    while (true) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a string key");
      auto key = parseString();
      if (!key)
        return std::nullopt;
      skipSpace();
      if (pos >= text.size() || text[pos] != ':')
        return fail("expected ':'");
      ++pos;
      auto value = parseValue(depth + 1);
      if (!value)
        return std::nullopt;
      object[*key] = std::move(*value);
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return Json(std::move(object));
      }
      return fail("expected ',' or '}'");
    }
  }

  const std::string &text;
  size_t pos = 0, failPos = 0;
  std::string message;
};

} // namespace

std::optional<Json> Json::parse(const std::string &text, std::string &error) {
  return Parser(text).document(error);
}

} // namespace colossal::support
