//===- PipelineStagesTest.cpp - the stage functions compute the step ------===//
//
// The step cut into per-stage forward and backward functions
// (train-pipeline-stages, train-split-stages), run through the host
// interpreter as a pipeline runs them: each stage's forward on the inputs
// and what earlier stages sent it, then each stage's backward on what its
// forward saved and what later stages sent back, every transfer matched by
// its name. The loss and every weight's gradient (the sum of the stages'
// parts) must equal the undivided step's bit for bit, and PyTorch's
// gradients (the fixture's) to 1e-5.
//
//===----------------------------------------------------------------------===//

#include "FixtureData.h"
#include "OnnxModel.h"
#include "colossal/Dialect/Dist/Stages.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Execute/HostInterpreter.h"
#include "passes/pipeline/TrainingPipeline.h"
#include "passes/plan/CostGraphBridge.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace {

using colossal::execute::HostValue;
namespace rt = colossal::rt;

struct Case {
  const char *model;
  const char *strategy;
  /// Layers (attention ops) on each virtual stage.
  std::vector<int64_t> layers;
};

std::string nameOf(mlir::func::FuncOp function, unsigned i, bool result) {
  auto attr = result ? function.getResultAttrOfType<mlir::StringAttr>(i, "train.name")
                     : function.getArgAttrOfType<mlir::StringAttr>(i, "train.name");
  return attr ? attr.str() : "";
}

/// The fixture, raised, then the training pipeline under `strategy`.
mlir::OwningOpRef<mlir::ModuleOp> compile(mlir::MLIRContext &context, const std::string &model,
                                          const std::string &strategy) {
  std::string dir = std::string(COLOSSAL_FIXTURES_DIR) + "/" + model, error;
  std::optional<std::vector<std::string>> trainable = colossal::readNameList(dir + "/trainable.txt", error);
  EXPECT_TRUE(trainable) << error;
  auto module = colossal::test::importFixture(context, dir + "/" + model + "_opset17.onnx", /*raise=*/true,
                                              /*differentiate=*/false, trainable);
  if (!module)
    return nullptr;
  mlir::PassManager pm(&context);
  colossal::pipeline::TrainingPipelineOptions options;
  options.strategy = strategy;
  options.optimizer = "sgd";
  colossal::pipeline::buildTrainingPipeline(pm, options, colossal::pipeline::Stage::Train,
                                            colossal::pipeline::Stage::Raised);
  if (mlir::failed(pm.run(*module)))
    return nullptr;
  return module;
}

class PipelineStages : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineStages, StageFunctionsComputeTheStep) {
  const Case &c = GetParam();
  std::string dir = std::string(COLOSSAL_FIXTURES_DIR) + "/" + c.model, error;
  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  auto whole = compile(context, c.model, "");
  auto staged = compile(context, c.model, c.strategy);
  ASSERT_TRUE(whole && staged);
  auto step = whole->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  ASSERT_TRUE(step);
  EXPECT_FALSE(staged->lookupSymbol("forward_backward"));
  // The ops a pipeline repeats on another stage are its own, not the
  // model's: the cost model sees the same graph.
  auto graphOf = [](mlir::ModuleOp module) {
    return colossal::plan::buildCostGraph(module.lookupSymbol<mlir::func::FuncOp>("forward"));
  };
  mlir::FailureOr<colossal::cost::Graph> wholeGraph = graphOf(*whole), stagedGraph = graphOf(*staged);
  ASSERT_TRUE(mlir::succeeded(wholeGraph) && mlir::succeeded(stagedGraph));
  EXPECT_EQ(stagedGraph->ops.size(), wholeGraph->ops.size());
  EXPECT_EQ(stagedGraph->values.size(), wholeGraph->values.size());
  EXPECT_EQ(stagedGraph->numLayers, wholeGraph->numLayers);

  std::map<std::string, HostValue> parameters =
      colossal::test::loadInitializers(dir + "/" + c.model + "_opset17.onnx", dir);
  std::vector<HostValue> inputs = colossal::test::loadFeeds(step, dir);
  std::map<std::string, HostValue> byName;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    byName[nameOf(step, i, false)] = inputs[i];
  std::vector<HostValue> expected;
  ASSERT_TRUE(colossal::execute::interpret(step, inputs, parameters, expected, error)) << error;

  // Forwards in stage order, then backwards in reverse: values are matched
  // by name (recv:k takes send:k, save:k what the forward saved).
  std::map<std::string, HostValue> gradients;
  double loss = NAN;
  std::map<std::string, int64_t> sentTo;
  int64_t stages = int64_t(c.layers.size());
  for (int64_t s = 0; s < 2 * stages; ++s) {
    bool backward = s >= stages;
    int64_t stage = backward ? 2 * stages - 1 - s : s;
    std::string name = "stage" + std::to_string(stage) + (backward ? "_backward" : "_forward");
    auto function = staged->lookupSymbol<mlir::func::FuncOp>(name);
    ASSERT_TRUE(function) << name;
    if (!backward) {
      int64_t attention = 0;
      function.walk([&](colossal::train::AttentionOp) { ++attention; });
      EXPECT_EQ(attention, c.layers[size_t(stage)]) << name << " runs another stage's layers";
    }
    std::vector<HostValue> arguments, results;
    for (unsigned i = 0; i < function.getNumArguments(); ++i) {
      std::string arg = nameOf(function, i, false);
      ASSERT_TRUE(byName.count(arg)) << name << " reads " << arg << ", which nothing made before it";
      if (arg.rfind("recv:", 0) == 0) {
        auto from = function.getArgAttrOfType<mlir::IntegerAttr>(i, "dist.from");
        ASSERT_TRUE(from);
        EXPECT_LT(backward ? stage : from.getInt(), backward ? from.getInt() : stage) << name << " " << arg;
        EXPECT_EQ(sentTo[arg.substr(5)], stage) << arg;
      }
      arguments.push_back(byName[arg]);
    }
    ASSERT_TRUE(colossal::execute::interpret(function, arguments, parameters, results, error)) << name << ": " << error;
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      std::string result = nameOf(function, i, true);
      if (result == "loss") {
        EXPECT_EQ(stage, stages - 1);
        loss = results[i].data[0];
      } else if (result.rfind("grad:", 0) == 0) {
        EXPECT_TRUE(backward) << name << " returns " << result;
        HostValue &sum = gradients[result];
        if (sum.data.empty())
          sum = results[i];
        else
          for (size_t k = 0; k < sum.data.size(); ++k) // in float32, as the step adds
            sum.data[k] = double(float(sum.data[k]) + float(results[i].data[k]));
      } else {
        if (result.rfind("send:", 0) == 0)
          sentTo[result.substr(5)] = function.getResultAttrOfType<mlir::IntegerAttr>(i, "dist.to").getInt();
        byName[result.rfind("send:", 0) == 0 ? "recv:" + result.substr(5) : result] = results[i];
      }
    }
  }

  EXPECT_EQ(loss, expected[0].data[0]);
  ASSERT_EQ(gradients.size(), step.getNumResults() - 1);
  for (unsigned i = 1; i < step.getNumResults(); ++i) {
    std::string name = nameOf(step, i, true);
    ASSERT_TRUE(gradients.count(name)) << name << " has no stage's part";
    const HostValue &got = gradients[name];
    rt::NpyArray torch = rt::readNpy(dir + "/grads/" + name.substr(5) + ".npy");
    ASSERT_EQ(got.data.size(), expected[i].data.size());
    // Relative to the tensor's largest value, or to 1e-3 where it is noise
    // about zero (an attention key's bias has no gradient).
    double worst = 0, worstTorch = 0, scale = 1e-3;
    for (size_t k = 0; k < got.data.size(); ++k) {
      worst = std::max(worst, std::abs(got.data[k] - expected[i].data[k]));
      worstTorch = std::max(worstTorch, std::abs(got.data[k] - double(torch.as<float>()[k])));
      scale = std::max(scale, std::abs(double(torch.as<float>()[k])));
    }
    // A weight read on several stages sums its parts in the stage order,
    // the undivided step in its reads' order: equal for two parts.
    EXPECT_EQ(worst, 0.0) << name;
    EXPECT_LT(worstTorch / scale, 1e-5) << name;
  }
}

const Case kCases[] = {
    {"gpt2", "pp=2", {1, 1}},
    {"llama", "pp=2", {1, 1}},
    {"bert", "pp=2", {1, 1}},
    {"gpt2_4layers", "pp=4", {1, 1, 1, 1}},
    {"gpt2_4layers", "pp=2,stage_layers=1/3", {1, 3}},
    {"gpt2_4layers", "pp=2,schedule=interleaved,virtual_stages=2,microbatches=2", {1, 1, 1, 1}},
    {"gpt2_4layers", "pp=2,recompute=full", {2, 2}},
    {"gpt2_4layers", "pp=2,recompute=selective", {2, 2}},
    {"llama_4layers", "pp=4", {1, 1, 1, 1}},
    {"llama_4layers", "pp=2,stage_layers=3/1", {3, 1}},
};

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  std::string name = std::string(info.param.model) + "_" + info.param.strategy;
  for (char &ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return name;
}

} // namespace

INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineStages, ::testing::ValuesIn(kCases), caseName);
