//===- TrainingTrajectoryTest.cpp - ten optimizer steps against PyTorch ----===//
//
// The reference training loop, all of it from the IR: @forward_backward and
// @optimizer_step (train-optimizer with the fixture's settings; its update
// runs the runtime's fused host optimizers, the ones emitted programs call)
// through the host interpreter on fp32 weights, ten times on the fixture's
// batch.
// The loss at every step must equal PyTorch's (reference.json, produced by
// torch.optim.SGD and AdamW and by the fixture generator's LAMB and LARS,
// written from the papers) to 1e-5 relative.
//
//===----------------------------------------------------------------------===//

#include "FixtureData.h"
#include "OnnxModel.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Execute/HostInterpreter.h"
#include "colossal/Import/OnnxImporter.h"
#include "colossal/support/Json.h"
#include "colossal/runtime/io/Npy.h"
#include "colossal/runtime/train/OptimizerStep.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/autodiff/Optimizer.h"
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
namespace rt = colossal::rt;

struct Case {
  const char *model;
  const char *optimizer;
};

class TrainingTrajectory : public ::testing::TestWithParam<Case> {};

TEST_P(TrainingTrajectory, LossesMatchPyTorch) {
  const Case &c = GetParam();
  std::string dir = std::string(COLOSSAL_FIXTURES_DIR) + "/" + c.model;
  std::string path = dir + "/" + c.model + "_opset17.onnx";
  std::string error;
  std::ifstream referenceFile(dir + "/reference.json");
  std::stringstream text;
  text << referenceFile.rdbuf();
  std::optional<colossal::support::Json> reference = colossal::support::Json::parse(text.str(), error);
  ASSERT_TRUE(reference) << error;
  const colossal::support::Json &hyper = *reference->find("hyper_parameters")->find(c.optimizer);
  const auto &expected = reference->find("losses")->find(c.optimizer)->asArray();

  // PyTorch's parameter list exactly (LLaMA's rotary buffer stays frozen).
  std::optional<std::vector<std::string>> trainable = colossal::readNameList(dir + "/trainable.txt", error);
  ASSERT_TRUE(trainable) << error;
  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  auto module = colossal::test::importFixture(context, path, /*raise=*/true, /*differentiate=*/true, trainable);
  ASSERT_TRUE(module);
  auto function = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  ASSERT_TRUE(function);

  // The fixture's optimizer as train-optimizer builds it: the op's settings
  // and its per-tensor conventions are what is checked, with the step.
  colossal::autodiff::OptimizerOptions options;
  options.kind = c.optimizer;
  auto number = [&](const char *key, double otherwise) {
    const colossal::support::Json *v = hyper.find(key);
    return v ? v->asNumber() : otherwise;
  };
  double lr = number("lr", 0);
  options.eps = number("eps", -1), options.weightDecay = number("weight_decay", 0);
  options.momentum = number("momentum", 0), options.eta = number("eta", 1e-3);
  if (const colossal::support::Json *betas = hyper.find("betas"))
    options.beta1 = betas->asArray()[0].asNumber(), options.beta2 = betas->asArray()[1].asNumber();
  if (const colossal::support::Json *nesterov = hyper.find("nesterov"))
    options.nesterov = nesterov->asBool();
  ASSERT_TRUE(mlir::succeeded(colossal::autodiff::buildOptimizerStep(*module, options)));
  auto update = module->lookupSymbol<mlir::func::FuncOp>("optimizer_step");
  ASSERT_TRUE(update);

  // Weights from the ONNX file; fp32 masters for the trainable ones.
  std::map<std::string, HostValue> parameters = colossal::test::loadInitializers(path, dir);
  std::vector<HostValue> arguments = colossal::test::loadFeeds(function, dir);
  // @optimizer_step's arguments: lr, step, grad_scale, then the gradients
  // and moments (zero at first) of the trainable parameters.
  std::vector<HostValue> state;
  for (mlir::BlockArgument arg : update.getArguments()) {
    auto type = mlir::cast<mlir::ShapedType>(arg.getType());
    state.push_back(HostValue{std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                              type.getElementType(), std::vector<double>(size_t(type.getNumElements()), 0.0)});
  }
  size_t trainableCount = function.getNumResults() - 1;
  ASSERT_EQ(update.getNumResults(), state.size() - 3);
  for (int step = 1; step <= int(expected.size()); ++step) {
    std::vector<HostValue> results;
    ASSERT_TRUE(colossal::execute::interpret(function, arguments, parameters, results, error)) << error;
    double loss = results[0].data[0], want = expected[size_t(step - 1)].asNumber();
    EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << c.model << " " << c.optimizer << " step " << step;
    state[0].data = {lr}, state[1].data = {double(step)}, state[2].data = {1.0};
    for (size_t t = 0; t < trainableCount; ++t)
      state[3 + t].data = results[t + 1].data;
    std::vector<HostValue> updated;
    ASSERT_TRUE(colossal::execute::interpret(update, state, parameters, updated, error)) << error;
    // Results: the new weights (named after their parameters), then the
    // moments, which are the next step's arguments after the gradients.
    for (unsigned r = 0; r < update.getNumResults(); ++r) {
      std::string name = update.getResultAttrOfType<mlir::StringAttr>(r, "train.name").str();
      if (r < trainableCount)
        parameters.at(name).data = updated[r].data;
      else
        state[3 + trainableCount + (r - trainableCount)].data = updated[r].data;
    }
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const char *model : {"mlp", "cnn", "gpt2", "bert", "vit", "llama", "nll", "hf_gpt2", "hf_bert", "hf_t5"})
    for (const char *optimizer : {"sgd", "adamw", "lamb", "lars"})
      cases.push_back({model, optimizer});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TrainingTrajectory, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.model) + "_" + info.param.optimizer;
                         });

} // namespace
