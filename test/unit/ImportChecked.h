//===- ImportChecked.h - import hostile bytes and check the answer -*- C++ -*-===//
//
// Shared by the importer robustness tests: a corrupted or mutated model must
// either import or fail with an error that names where; crashes, hangs and
// sanitizer reports are what the tests (and the sanitizer build) catch.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TEST_UNIT_IMPORTCHECKED_H
#define COLOSSAL_TEST_UNIT_IMPORTCHECKED_H

#include "colossal/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

namespace colossal::test {

inline std::string readFixtureBytes(const std::string &relative) {
  std::ifstream in(std::string(COLOSSAL_FIXTURES_DIR) + "/" + relative, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// The options the fuzzer imports with: the fixtures' dynamic batch and
/// sequence dimensions bound, so that mutations reach the graph's nodes.
inline ImportOptions boundDimensions() {
  ImportOptions options;
  options.batch = 2;
  options.seq = 8;
  return options;
}

/// Imports `bytes`; returns whether it succeeded and checks that a failure
/// came with at least one error naming the model or the op.
inline bool importChecked(const std::string &bytes, const ImportOptions &options = {}) {
  mlir::MLIRContext context;
  int errors = 0;
  bool named = true;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error) {
      ++errors;
      named &= diag.str().find("model.onnx") != std::string::npos ||
               diag.str().find("op") != std::string::npos;
    }
    return mlir::success();
  });
  auto module = importOnnxBytes(context, bytes.data(), bytes.size(), "model.onnx",
                                COLOSSAL_FIXTURES_DIR, options);
  if (!module) {
    EXPECT_GT(errors, 0) << "a failed import must say why";
    EXPECT_TRUE(named);
  }
  return bool(module);
}

/// The first error importing `bytes` reports; empty when it imports.
inline std::string firstImportError(const std::string &bytes, const ImportOptions &options) {
  mlir::MLIRContext context;
  std::string first;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error && first.empty())
      first = diag.str();
    return mlir::success();
  });
  auto module = importOnnxBytes(context, bytes.data(), bytes.size(), "model.onnx",
                                COLOSSAL_FIXTURES_DIR, options);
  return module ? std::string() : first;
}

} // namespace colossal::test

#endif // COLOSSAL_TEST_UNIT_IMPORTCHECKED_H
