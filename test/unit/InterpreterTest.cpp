//===- InterpreterTest.cpp - fixtures' forward passes against PyTorch ------===//
//
// Every fixture model, imported and raised, runs through the host
// interpreter (the runtime's host kernels) on the fixture's feed with the
// ONNX file's initial weights; its loss must equal the loss PyTorch computed
// for the same batch (reference.json; numpy's for composed_ops) to 1e-5
// relative. The imported but
// unraised program must give the same loss too (raising preserves meaning).
//
//===----------------------------------------------------------------------===//

#include "FixtureData.h"
#include "OnnxModel.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Execute/HostInterpreter.h"
#include "colossal/Import/OnnxImporter.h"
#include "colossal/support/Json.h"
#include "colossal/runtime/io/Npy.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace {

using colossal::execute::HostValue;

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class FixtureForward : public ::testing::TestWithParam<const char *> {};

double runLoss(mlir::ModuleOp module, const std::string &dir, const std::map<std::string, HostValue> &parameters) {
  auto function = module.lookupSymbol<mlir::func::FuncOp>("forward");
  EXPECT_TRUE(function);
  std::vector<HostValue> arguments = colossal::test::loadFeeds(function, dir);
  std::vector<HostValue> results;
  std::string error;
  EXPECT_TRUE(colossal::execute::interpret(function, arguments, parameters, results, error)) << error;
  if (results.empty())
    return std::nan("");
  return results[0].data[0];
}

TEST_P(FixtureForward, LossMatchesPyTorch) {
  std::string model = GetParam();
  std::string dir = std::string(COLOSSAL_FIXTURES_DIR) + "/" + model;
  std::string path = dir + "/" + model + "_opset17.onnx";
  std::string error;
  std::optional<colossal::support::Json> reference = colossal::support::Json::parse(readText(dir + "/reference.json"), error);
  ASSERT_TRUE(reference) << error;
  double expected = reference->find("loss")->asNumber();

  // Initial weights from the ONNX file's initializers.
  std::map<std::string, HostValue> parameters = colossal::test::loadInitializers(path, dir);

  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  auto imported = colossal::test::importFixture(context, path, /*raise=*/false, /*differentiate=*/false);
  ASSERT_TRUE(imported);
  double unraised = runLoss(*imported, dir, parameters);
  auto raisedModule = colossal::test::importFixture(context, path, /*raise=*/true, /*differentiate=*/false);
  ASSERT_TRUE(raisedModule);
  double raised = runLoss(*raisedModule, dir, parameters);

  EXPECT_NEAR(raised, expected, 1e-5 * std::fabs(expected)) << model << " raised";
  EXPECT_NEAR(unraised, expected, 1e-5 * std::fabs(expected)) << model << " as imported";
}

class FixtureGradients : public ::testing::TestWithParam<const char *> {};

/// train-autodiff's @forward_backward, run through the interpreter, gives
/// PyTorch's first-step gradients: for every parameter with a reference,
/// ||g - g_torch|| <= 1e-4 ||g_torch||.
TEST_P(FixtureGradients, MatchPyTorch) {
  std::string model = GetParam();
  std::string dir = std::string(COLOSSAL_FIXTURES_DIR) + "/" + model;
  std::string path = dir + "/" + model + "_opset17.onnx";
  std::string error;
  std::map<std::string, HostValue> parameters = colossal::test::loadInitializers(path, dir);
  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  auto module = colossal::test::importFixture(context, path, /*raise=*/true, /*differentiate=*/true);
  ASSERT_TRUE(module);
  auto function = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  ASSERT_TRUE(function);
  std::vector<HostValue> arguments = colossal::test::loadFeeds(function, dir);
  std::vector<HostValue> results;
  ASSERT_TRUE(colossal::execute::interpret(function, arguments, parameters, results, error)) << error;
  int compared = 0;
  double worst = 0;
  for (unsigned r = 1; r < function.getNumResults(); ++r) {
    std::string name = function.getResultAttrOfType<mlir::StringAttr>(r, "train.name").str().substr(5);
    std::string file = dir + "/grads/" + name + ".npy";
    if (!std::ifstream(file))
      continue; // a buffer PyTorch does not train (LLaMA's rotary inv_freq)
    colossal::rt::NpyArray want = colossal::rt::readNpy(file);
    ASSERT_EQ(want.shape, results[r].shape) << name;
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < want.elements(); ++i) {
      double w = want.as<float>()[i], g = results[r].data[size_t(i)];
      diff += (g - w) * (g - w);
      norm += w * w;
    }
    EXPECT_LE(std::sqrt(diff), 1e-4 * std::sqrt(norm) + 1e-9) << model << " " << name << ": relative error "
                                                               << std::sqrt(diff / std::max(norm, 1e-300));
    if (std::sqrt(diff / std::max(norm, 1e-300)) > 1e-4)
      std::printf("  %s: |g - ref| %.3e, |ref| %.3e\n", name.c_str(), std::sqrt(diff), std::sqrt(norm));
    ++compared;
    worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-300)));
  }
  EXPECT_GT(compared, 0);
  std::printf("%s: %d gradients compared, worst relative error %.2e\n", model.c_str(), compared, worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureGradients,
                         ::testing::Values("mlp", "cnn", "gpt2", "bert", "vit", "llama", "nll", "llama_gqa", "hf_gpt2",
                                           "hf_bert", "hf_t5"),
                         [](const ::testing::TestParamInfo<const char *> &info) { return std::string(info.param); });

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureForward,
                         ::testing::Values("mlp", "cnn", "gpt2", "bert", "vit", "llama", "nll", "llama_gqa", "hf_gpt2",
                                           "hf_bert", "hf_t5", "composed_ops"),
                         [](const ::testing::TestParamInfo<const char *> &info) { return std::string(info.param); });

} // namespace
