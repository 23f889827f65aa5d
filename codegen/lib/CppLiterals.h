//===- CppLiterals.h - values written as C++ source ----------------*- C++ -*-===//

#ifndef COLOSSAL_CODEGEN_CPPLITERALS_H
#define COLOSSAL_CODEGEN_CPPLITERALS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace colossal::codegen {

/// A float as a C++ float literal (NaN and infinities included).
std::string floatLiteral(double value);
/// "Shape{2, 3}".
std::string shapeLiteral(llvm::ArrayRef<int64_t> shape);
/// A C++ string literal of `text`.
std::string quoted(llvm::StringRef text);

} // namespace colossal::codegen

#endif // COLOSSAL_CODEGEN_CPPLITERALS_H
