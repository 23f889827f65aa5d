//===- onnx_node_conformance.cpp - ONNX backend node tests, imported -----===//
//
// Walks the ONNX backend node tests (Debian's libonnx-testdata), imports and
// verifies every test whose ops are all supported at a supported opset, and
// runs each imported test numerically through the host interpreter (the
// runtime's host kernels for fp32, float64 loops otherwise) on every data
// set, comparing with the expected outputs as ONNX's own runner does
// (|actual - expected| <= 1e-7 + 1e-3 |expected|). Tests whose expected
// outputs come from a random generator (training-mode dropout with a nonzero
// ratio) are counted apart, as are two tests whose data contradicts their
// own model (checked each run). Prints the counts and every failure; exits
// non-zero when a supported test fails to import, fails to run or
// disagrees with its expectation.
//
//   onnx-node-conformance [DIR] [--verbose]
//
//===----------------------------------------------------------------------===//

#include "OnnxModel.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Execute/HostInterpreter.h"
#include "colossal/Import/OnnxImporter.h"
#include "colossal/runtime/DType.h"

#include "mlir/IR/BuiltinOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cmath>
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

/// A TensorProto file as a host value (element type set by the caller).
bool readProto(const fs::path &file, onnx::TensorProto &proto) {
  std::ifstream in(file, std::ios::binary);
  return in && proto.ParseFromIstream(&in);
}

/// A TensorProto as a host value. `declared` is the ONNX element type the
/// model gives the tensor: NumPy has no bfloat16, so the test data stores
/// bfloat16 tensors as their uint16 bit patterns.
bool toHostValue(const onnx::TensorProto &proto, colossal::execute::HostValue &value, std::string &error,
                 int32_t declared = 0) {
  std::optional<colossal::import::HostTensor> tensor = colossal::import::readTensor(proto, "", error);
  if (!tensor)
    return false;
  bool bitsOfBf16 = declared == onnx::TensorProto::BFLOAT16 && proto.data_type() == onnx::TensorProto::UINT16;
  value.shape = tensor->shape;
  value.data.resize(size_t(tensor->numElements()));
  for (int64_t i = 0; i < tensor->numElements(); ++i)
    value.data[size_t(i)] =
        bitsOfBf16 ? colossal::rt::bf16ToFloat(uint16_t(tensor->asInt(i))) : tensor->asDouble(i);
  return true;
}

enum class RunOutcome { Matched, Mismatched, NotRunnable, Random };

/// Tests whose expected outputs follow a different, documented choice.
const std::map<std::string, std::string> kDeviations = {
    {"test_cast_FLOAT_to_BFLOAT16",
     "the test data truncates to bfloat16; casts here round to nearest even, as PyTorch and CUDA do"},
};

/// Tests whose data contradicts their own model: an input's data has another
/// shape than the model declares. The runner checks that it still does
/// (otherwise the test runs like any other) and counts them apart; any
/// other failure to run an imported test is a failure.
const std::map<std::string, std::string> kInconsistentData = {
    {"test_castlike_BFLOAT16_to_FLOAT_expanded", "like"},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", "like"},
};

/// Whether the first data set gives input `name` another shape than the
/// model declares (a static shape).
bool dataContradictsModel(const onnx::ModelProto &model, const fs::path &test, const std::string &name) {
  for (int i = 0; i < model.graph().input_size(); ++i) {
    const auto &input = model.graph().input(i);
    if (input.name() != name || !input.type().tensor_type().has_shape())
      continue;
    onnx::TensorProto proto;
    std::ifstream in(test / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"), std::ios::binary);
    if (!in || !proto.ParseFromIstream(&in))
      return false;
    const auto &shape = input.type().tensor_type().shape();
    if (shape.dim_size() != proto.dims_size())
      return true;
    for (int d = 0; d < shape.dim_size(); ++d)
      if (shape.dim(d).has_dim_value() && shape.dim(d).dim_value() != proto.dims(d))
        return true;
    return false;
  }
  return false;
}

/// Runs every data set of `test` through the interpreter; `detail` says what
/// went wrong.
RunOutcome runNumerically(mlir::ModuleOp module, const onnx::ModelProto &model, const fs::path &test,
                          std::string &detail) {
  auto function = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!function) {
    detail = "no @forward function";
    return RunOutcome::NotRunnable;
  }
  // Only a nonzero ratio draws a mask; at ratio 0 dropout is the identity
  // with an all-true mask, which the test data states exactly.
  bool random = false;
  function.walk([&](colossal::train::DropoutOp op) { random |= op.getRatio().convertToFloat() != 0.0f; });
  if (random)
    return RunOutcome::Random;
  std::map<std::string, int> inputIndex, outputIndex;
  for (int i = 0; i < model.graph().input_size(); ++i)
    inputIndex[model.graph().input(i).name()] = i;
  for (int i = 0; i < model.graph().output_size(); ++i)
    outputIndex[model.graph().output(i).name()] = i;
  std::map<std::string, colossal::execute::HostValue> parameters;
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    colossal::execute::HostValue v;
    if (!toHostValue(init, v, detail))
      return RunOutcome::NotRunnable;
    parameters[init.name()] = v;
  }
  int sets = 0;
  for (const auto &entry : fs::directory_iterator(test)) {
    if (entry.path().filename().string().rfind("test_data_set_", 0) != 0)
      continue;
    ++sets;
    std::vector<colossal::execute::HostValue> arguments;
    for (unsigned a = 0; a < function.getNumArguments(); ++a) {
      auto name = function.getArgAttrOfType<mlir::StringAttr>(a, "train.name");
      if (!name || !inputIndex.count(name.str())) {
        detail = "argument " + std::to_string(a) + " has no graph input";
        return RunOutcome::NotRunnable;
      }
      onnx::TensorProto proto;
      colossal::execute::HostValue v;
      if (!readProto(entry.path() / ("input_" + std::to_string(inputIndex[name.str()]) + ".pb"), proto) ||
          !toHostValue(proto, v, detail,
                       model.graph().input(inputIndex[name.str()]).type().tensor_type().elem_type())) {
        detail = "cannot read input " + name.str() + (detail.empty() ? "" : ": " + detail);
        return RunOutcome::NotRunnable;
      }
      arguments.push_back(std::move(v));
    }
    std::vector<colossal::execute::HostValue> results;
    if (!colossal::execute::interpret(function, arguments, parameters, results, detail))
      return RunOutcome::NotRunnable;
    for (unsigned r = 0; r < function.getNumResults(); ++r) {
      auto name = function.getResultAttrOfType<mlir::StringAttr>(r, "train.name");
      if (!name || !outputIndex.count(name.str())) {
        detail = "result " + std::to_string(r) + " has no graph output";
        return RunOutcome::NotRunnable;
      }
      onnx::TensorProto proto;
      colossal::execute::HostValue expected;
      if (!readProto(entry.path() / ("output_" + std::to_string(outputIndex[name.str()]) + ".pb"), proto) ||
          !toHostValue(proto, expected, detail,
                       model.graph().output(outputIndex[name.str()]).type().tensor_type().elem_type())) {
        detail = "cannot read expected output " + name.str();
        return RunOutcome::NotRunnable;
      }
      const colossal::execute::HostValue &got = results[r];
      if (got.data.size() != expected.data.size()) {
        detail = "output " + name.str() + " has " + std::to_string(got.data.size()) + " elements, expected " +
                 std::to_string(expected.data.size());
        return RunOutcome::Mismatched;
      }
      for (size_t i = 0; i < got.data.size(); ++i) {
        double a = got.data[i], e = expected.data[i];
        bool same = (std::isnan(a) && std::isnan(e)) || a == e || std::fabs(a - e) <= 1e-7 + 1e-3 * std::fabs(e);
        if (!same) {
          detail = "output " + name.str() + " element " + std::to_string(i) + " is " + std::to_string(a) +
                   ", expected " + std::to_string(e) + " (" + entry.path().filename().string() + ")";
          return RunOutcome::Mismatched;
        }
      }
    }
  }
  if (sets == 0) {
    detail = "no data sets";
    return RunOutcome::NotRunnable;
  }
  return RunOutcome::Matched;
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
  int matched = 0, mismatched = 0, notRunnable = 0, random = 0, deviations = 0, inconsistent = 0;
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
      std::string detail;
      switch (runNumerically(*module, model, test, detail)) {
      case RunOutcome::Matched:
        ++matched;
        if (verbose)
          std::cout << "MATCHED  " << test.filename().string() << "\n";
        break;
      case RunOutcome::Mismatched:
        if (kDeviations.count(test.filename().string())) {
          ++deviations;
          std::cout << "DEVIATES " << test.filename().string() << ": " << kDeviations.at(test.filename().string())
                    << "\n";
          break;
        }
        ++mismatched;
        std::cout << "MISMATCH " << test.filename().string() << ": " << detail << "\n";
        break;
      case RunOutcome::Random:
        ++random;
        break;
      case RunOutcome::NotRunnable: {
        auto known = kInconsistentData.find(test.filename().string());
        if (known != kInconsistentData.end() && dataContradictsModel(model, test, known->second)) {
          ++inconsistent;
          std::cout << "BAD DATA " << test.filename().string() << ": input '" << known->second
                    << "' has another shape in the test data than in its model (" << detail << ")\n";
          break;
        }
        ++notRunnable;
        std::cout << "NOT RUN  " << test.filename().string() << ": " << detail << "\n";
        break;
      }
      }
      continue;
    }
    ++failed;
    std::cout << "FAILED   " << test.filename().string() << ": " << errors;
  }

  std::cout << "\nONNX backend node tests in " << root << ": " << tests.size() << "\n"
            << "  imported and verified: " << imported << " (" << withConstants
            << " with shape arguments fixed from the test's inputs)\n"
            << "  outside the supported set (op, domain or opset): " << unsupported << "\n"
            << "  failed: " << failed << "\n"
            << "run numerically through the host interpreter (" << imported << " imported):\n"
            << "  matched the expected outputs: " << matched << "\n"
            << "  disagreed: " << mismatched << "\n"
            << "  differ by a documented choice: " << deviations << "\n"
            << "  random by design (training-mode dropout, nonzero ratio): " << random << "\n"
            << "  test data contradicting its own model (checked): " << inconsistent << "\n"
            << "  failed to run: " << notRunnable << "\n";
  if (verbose) {
    std::cout << "unsupported, by first reason:\n";
    for (const auto &[reason, count] : unsupportedBy)
      std::cout << "  " << reason << ": " << count << "\n";
  }
  int bad = failed + mismatched + notRunnable;
  std::cout << imported - mismatched - notRunnable << " passed, " << bad << " failed, " << unsupported
            << " skipped\n";
  return bad == 0 ? 0 : 1;
}
