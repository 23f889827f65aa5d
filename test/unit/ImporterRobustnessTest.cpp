//===- ImporterRobustnessTest.cpp - hostile bytes never crash the importer ===//
//
// Deterministic corruption of a real export: every truncation point of the
// MLP fixture and a few thousand seeded byte flips must each either import
// or fail with a diagnostic, never crash, hang or leak (the sanitizer build
// runs this too). The libFuzzer target explores further in CI.
//
//===----------------------------------------------------------------------===//

#include "colossal/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace {

std::string readFixture(const std::string &relative) {
  std::ifstream in(std::string(COLOSSAL_FIXTURES_DIR) + "/" + relative, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Imports `bytes`; returns whether it succeeded and checks that a failure
/// came with at least one error naming the model.
bool importChecked(const std::string &bytes) {
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
  auto module = colossal::importOnnxBytes(context, bytes.data(), bytes.size(), "model.onnx",
                                          COLOSSAL_FIXTURES_DIR, colossal::ImportOptions());
  if (!module) {
    EXPECT_GT(errors, 0) << "a failed import must say why";
    EXPECT_TRUE(named);
  }
  return bool(module);
}

TEST(ImporterRobustness, TheIntactFixtureImports) {
  std::string bytes = readFixture("mlp/mlp_opset14.onnx");
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(importChecked(bytes));
}

TEST(ImporterRobustness, EveryTruncationFailsCleanly) {
  std::string bytes = readFixture("mlp/mlp_opset14.onnx");
  ASSERT_FALSE(bytes.empty());
  int imported = 0;
  for (size_t size = 0; size < bytes.size(); size += 7)
    imported += importChecked(bytes.substr(0, size));
  // A prefix can be a valid but smaller protobuf; none may crash, and almost
  // all must be refused.
  EXPECT_LT(imported, 5);
}

TEST(ImporterRobustness, SeededByteFlipsNeverCrash) {
  std::string original = readFixture("gpt2/gpt2_opset17.onnx");
  ASSERT_FALSE(original.empty());
  std::mt19937 random(12345);
  // Flip bytes in the graph structure, which sits after the weights in a
  // torch export; flips inside raw weights only change numbers.
  size_t structure = original.size() / 2;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = original;
    for (int flips = 0; flips < 4; ++flips) {
      size_t at = structure + random() % (bytes.size() - structure);
      bytes[at] = char(random() & 0xff);
    }
    importChecked(bytes);
  }
}

} // namespace
