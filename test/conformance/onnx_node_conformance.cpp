//===- onnx_node_conformance.cpp - ONNX backend node tests, imported -----===//
//
// Walks the ONNX backend node tests (Debian's libonnx-testdata) and imports
// and verifies every test whose ops are all supported at a supported opset.
// Prints the counts and every failure; exits non-zero when any supported
// test fails to import. Running the tests numerically comes with the
// executor.
//
//   onnx-node-conformance [DIR] [--verbose]
//
//===----------------------------------------------------------------------===//

#include "colossal/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;

/// Why a test is outside what the importer accepts, or "" when it is inside.
std::string unsupportedReason(const onnx::ModelProto &model) {
  static const std::set<std::string> supported(colossal::supportedOnnxOps().begin(),
                                               colossal::supportedOnnxOps().end());
  for (const auto &opset : model.opset_import())
    if ((opset.domain().empty() || opset.domain() == "ai.onnx") &&
        (opset.version() < kMinOpset || opset.version() > kMaxOpset))
      return "opset " + std::to_string(opset.version());
  for (const auto *values : {&model.graph().input(), &model.graph().output()})
    for (const auto &value : *values) {
      if (!value.type().has_tensor_type())
        return "non-tensor value (sequence, optional or map)";
      if (value.type().tensor_type().elem_type() == onnx::TensorProto::STRING)
        return "string tensors";
    }
  for (const auto &node : model.graph().node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return "domain " + node.domain();
    if (!supported.count(node.op_type()))
      return "op " + node.op_type();
  }
  return "";
}

/// The test's first data set, for inputs a node needs as compile-time
/// values: integer and boolean inputs (shapes, axes, sizes, k) and scalars
/// (a dropout ratio).
std::map<std::string, std::string> shapeArgumentInputs(const onnx::ModelProto &model,
                                                       const fs::path &test) {
  std::map<std::string, std::string> constants;
  for (int i = 0; i < model.graph().input_size(); ++i) {
    const auto &input = model.graph().input(i);
    const auto &type = input.type().tensor_type();
    bool floating = type.elem_type() == onnx::TensorProto::FLOAT ||
                    type.elem_type() == onnx::TensorProto::DOUBLE ||
                    type.elem_type() == onnx::TensorProto::FLOAT16 ||
                    type.elem_type() == onnx::TensorProto::BFLOAT16;
    bool scalar = type.has_shape() && type.shape().dim_size() == 0;
    if (floating && !scalar)
      continue;
    std::ifstream in(test / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"),
                     std::ios::binary);
    if (in)
      constants[input.name()] =
          std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return constants;
}

} // namespace

int main(int argc, char **argv) {
  std::string root = "/usr/share/libonnx-testdata/data/node";
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--verbose")
      verbose = true;
    else
      root = arg;
  }
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    std::cerr << "onnx-node-conformance: " << root
              << " is not a directory (install libonnx-testdata)\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto &entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx"))
      tests.push_back(entry.path());
  std::sort(tests.begin(), tests.end());

  int imported = 0, unsupported = 0, failed = 0, withConstants = 0;
  std::map<std::string, int> unsupportedBy;
  for (const fs::path &test : tests) {
    std::string path = (test / "model.onnx").string();
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    onnx::ModelProto model;
    if (!model.ParseFromString(bytes)) {
      std::cout << "FAILED   " << test.filename().string() << ": the model does not parse\n";
      ++failed;
      continue;
    }
    std::string reason = unsupportedReason(model);
    if (!reason.empty()) {
      ++unsupported;
      ++unsupportedBy[reason];
      if (verbose)
        std::cout << "SKIPPED  " << test.filename().string() << ": " << reason << "\n";
      continue;
    }
    mlir::MLIRContext context;
    std::string errors;
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
      errors += diag.str() + "\n";
      return mlir::success();
    });
    colossal::ImportOptions options;
    options.requireLoss = false;
    auto module = colossal::importOnnxBytes(context, bytes.data(), bytes.size(), path,
                                            test.string(), options);
    if (!module && errors.find("must be a constant") != std::string::npos) {
      // Shape arguments passed as graph inputs are compile-time values for
      // this compiler: import again with the test's own values fixed.
      options.constantInputs = shapeArgumentInputs(model, test);
      errors.clear();
      module = colossal::importOnnxBytes(context, bytes.data(), bytes.size(), path,
                                         test.string(), options);
      withConstants += module ? 1 : 0;
    }
    if (module) {
      ++imported;
      if (verbose)
        std::cout << "IMPORTED " << test.filename().string() << "\n";
      continue;
    }
    ++failed;
    std::cout << "FAILED   " << test.filename().string() << ": " << errors;
  }

  std::cout << "\nONNX backend node tests in " << root << ": " << tests.size() << "\n"
            << "  imported and verified: " << imported << " (" << withConstants
            << " with shape arguments fixed from the test's inputs)\n"
            << "  outside the supported set (op, domain or opset): " << unsupported << "\n"
            << "  failed: " << failed << "\n";
  if (verbose) {
    std::cout << "unsupported, by first reason:\n";
    for (const auto &[reason, count] : unsupportedBy)
      std::cout << "  " << reason << ": " << count << "\n";
  }
  std::cout << imported << " passed, " << failed << " failed, " << unsupported << " skipped\n";
  return failed == 0 ? 0 : 1;
}
