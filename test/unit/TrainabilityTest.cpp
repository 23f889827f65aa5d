//===- TrainabilityTest.cpp - default trainable set vs PyTorch -----------===//
//
// PyTorch knows which tensors are parameters; the ONNX file does not. The
// importer's rule (a differentiable path to the loss) must recover
// `named_parameters()` (the fixtures' trainable.txt) on every fixture, with
// one documented exception: a float buffer that reaches the loss through
// differentiable arithmetic (LLaMA's rotary `inv_freq`).
//
//===----------------------------------------------------------------------===//

#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>

namespace {

struct Case {
  const char *model;
  std::set<std::string> extraTrainable;
};

class DefaultTrainability : public testing::TestWithParam<Case> {};

TEST_P(DefaultTrainability, MatchesPyTorchParameters) {
  const Case &c = GetParam();
  std::string dir = std::string(COLOSSAL_FIXTURES_DIR) + "/" + c.model;
  std::string error;
  auto expected = colossal::readNameList(dir + "/trainable.txt", error);
  ASSERT_TRUE(expected) << error;

  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  colossal::ImportOptions options;
  options.seq = 8;
  // Batch 2, unless the file fixes its own (the MLP's is 4).
  if (!colossal::fixedBatchOfFile(dir + "/" + c.model + "_opset17.onnx", options))
    options.batch = 2;
  auto module = colossal::importOnnxFile(context, dir + "/" + c.model + "_opset17.onnx", options);
  ASSERT_TRUE(module);

  std::set<std::string> trainable, frozen;
  for (auto parameter : module->getOps<colossal::train::ParameterOp>())
    (parameter.getTrainable() ? trainable : frozen).insert(parameter.getSymName().str());
  std::set<std::string> want(expected->begin(), expected->end());
  want.insert(c.extraTrainable.begin(), c.extraTrainable.end());
  EXPECT_EQ(trainable, want);
  EXPECT_TRUE(frozen.empty());

  // The exact list restores PyTorch's view; the extras become frozen.
  options.trainable = *expected;
  auto listed = colossal::importOnnxFile(context, dir + "/" + c.model + "_opset17.onnx", options);
  ASSERT_TRUE(listed);
  std::set<std::string> listedTrainable;
  for (auto parameter : listed->getOps<colossal::train::ParameterOp>())
    if (parameter.getTrainable())
      listedTrainable.insert(parameter.getSymName().str());
  EXPECT_EQ(listedTrainable, std::set<std::string>(expected->begin(), expected->end()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DefaultTrainability,
                         testing::Values(Case{"mlp", {}}, Case{"cnn", {}}, Case{"gpt2", {}},
                                         Case{"bert", {}}, Case{"vit", {}},
                                         Case{"llama", {"inv_freq"}}),
                         [](const testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.model);
                         });

} // namespace
