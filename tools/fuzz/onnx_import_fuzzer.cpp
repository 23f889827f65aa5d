//===- onnx_import_fuzzer.cpp - libFuzzer entry for the ONNX importer ----===//
//
// Feeds arbitrary bytes to the importer as if they were a model file. Any
// crash, sanitizer report, or unbounded allocation is a bug; a diagnostic
// is the expected answer to garbage. Seed it with test/fixtures.
//
//===----------------------------------------------------------------------===//

#include "RawDataInPlace.h"
#include "colossal/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    auto *ctx = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    // Diagnostics are the expected outcome; keep the fuzzer's output quiet.
    ctx->getDiagEngine().registerHandler([](mlir::Diagnostic &) { return mlir::success(); });
    return ctx;
  }();
  colossal::ImportOptions options;
  options.batch = 2;
  options.seq = 8;
  // External-data references resolve inside a folder that holds nothing.
  auto module = colossal::importOnnxBytes(*context, data, size, "fuzz.onnx", "/nonexistent",
                                          options);
  (void)module;
  // The framing rewrite that model files are read through when planning; a
  // small threshold so that most tensors are rewritten.
  (void)colossal::import::withRawDataInPlace(llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.onnx",
                                             16);
  return 0;
}
