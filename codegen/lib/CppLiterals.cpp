//===- CppLiterals.cpp ------------------------------------------------------===//

#include "CppLiterals.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace colossal::codegen {

using llvm::ArrayRef;
using llvm::StringRef;

std::string floatLiteral(double value) {
  if (std::isnan(value))
    return "std::numeric_limits<float>::quiet_NaN()";
  if (std::isinf(value))
    return value > 0 ? "std::numeric_limits<float>::infinity()" : "-std::numeric_limits<float>::infinity()";
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.9g", value);
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  return text + "f";
}

std::string shapeLiteral(ArrayRef<int64_t> shape) {
  std::string text = "Shape{";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "}";
}

std::string quoted(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "\"";
}

} // namespace colossal::codegen
