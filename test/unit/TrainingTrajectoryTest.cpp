//===- TrainingTrajectoryTest.cpp - ten optimizer steps against PyTorch ----===//
//
// The reference training loop: @forward_backward through the host
// interpreter, then the runtime's fused host optimizers (the ones emitted
// programs call) on fp32 weights, repeated ten times on the fixture's batch.
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
#include "colossal/cost/Json.h"
#include "colossal/runtime/Npy.h"
#include "colossal/runtime/OptimizerStep.h"
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
  std::optional<colossal::cost::Json> reference = colossal::cost::Json::parse(text.str(), error);
  ASSERT_TRUE(reference) << error;
  const colossal::cost::Json &hyper = *reference->find("hyper_parameters")->find(c.optimizer);
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

  // Weights from the ONNX file; fp32 masters for the trainable ones.
  std::map<std::string, HostValue> parameters = colossal::test::loadInitializers(path, dir);
  std::vector<HostValue> arguments = colossal::test::loadFeeds(function, dir);
  struct Slot {
    std::string name;
    std::vector<float> w, g, m, v, u;
    size_t rank;
  };
  std::vector<Slot> slots;
  for (unsigned r = 1; r < function.getNumResults(); ++r) {
    Slot s;
    s.name = function.getResultAttrOfType<mlir::StringAttr>(r, "train.name").str().substr(5);
    const HostValue &p = parameters.at(s.name);
    s.w.assign(p.data.begin(), p.data.end());
    s.g.assign(s.w.size(), 0), s.m.assign(s.w.size(), 0), s.v.assign(s.w.size(), 0), s.u.assign(s.w.size(), 0);
    s.rank = p.shape.size();
    slots.push_back(std::move(s));
  }

  rt::OptimizerConfig config;
  config.kind = *rt::parseOptimizer(c.optimizer);
  auto number = [&](const char *key, double otherwise) {
    const colossal::cost::Json *v = hyper.find(key);
    return v ? v->asNumber() : otherwise;
  };
  config.lr = number("lr", 0), config.eps = number("eps", 0), config.weightDecay = number("weight_decay", 0);
  config.momentum = number("momentum", 0), config.eta = number("eta", 0);
  if (const colossal::cost::Json *betas = hyper.find("betas"))
    config.beta1 = betas->asArray()[0].asNumber(), config.beta2 = betas->asArray()[1].asNumber();
  if (const colossal::cost::Json *nesterov = hyper.find("nesterov"))
    config.nesterov = nesterov->asBool();
  for (int step = 1; step <= int(expected.size()); ++step) {
    for (Slot &s : slots)
      parameters[s.name].data.assign(s.w.begin(), s.w.end());
    std::vector<HostValue> results;
    ASSERT_TRUE(colossal::execute::interpret(function, arguments, parameters, results, error)) << error;
    double loss = results[0].data[0], want = expected[size_t(step - 1)].asNumber();
    EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << c.model << " " << c.optimizer << " step " << step;
    std::vector<rt::OptimizerTensor> tensors;
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot &s = slots[i];
      s.g.assign(results[i + 1].data.begin(), results[i + 1].data.end());
      rt::OptimizerTensor t{s.w.data(), s.g.data(), s.m.data(), s.v.data(), s.u.data(), int64_t(s.w.size())};
      rt::applyConventions(config.kind, s.rank, t);
      tensors.push_back(t);
    }
    rt::optimizerStep(config, config.lr, step, tensors);
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const char *model : {"mlp", "cnn", "gpt2", "bert", "vit", "llama"})
    for (const char *optimizer : {"sgd", "adamw", "lamb", "lars"})
      cases.push_back({model, optimizer});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TrainingTrajectory, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.model) + "_" + info.param.optimizer;
                         });

} // namespace
