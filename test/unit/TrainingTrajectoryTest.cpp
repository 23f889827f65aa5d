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
#include "colossal/runtime/Optimizers.h"
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
    bool matrix;
  };
  std::vector<Slot> slots;
  for (unsigned r = 1; r < function.getNumResults(); ++r) {
    Slot s;
    s.name = function.getResultAttrOfType<mlir::StringAttr>(r, "train.name").str().substr(5);
    const HostValue &p = parameters.at(s.name);
    s.w.assign(p.data.begin(), p.data.end());
    s.g.assign(s.w.size(), 0), s.m.assign(s.w.size(), 0), s.v.assign(s.w.size(), 0), s.u.assign(s.w.size(), 0);
    s.matrix = p.shape.size() > 1;
    slots.push_back(std::move(s));
  }

  std::string kind = c.optimizer;
  auto number = [&](const char *key) { return float(hyper.find(key)->asNumber()); };
  for (int step = 1; step <= int(expected.size()); ++step) {
    for (Slot &s : slots)
      parameters[s.name].data.assign(s.w.begin(), s.w.end());
    std::vector<HostValue> results;
    ASSERT_TRUE(colossal::execute::interpret(function, arguments, parameters, results, error)) << error;
    double loss = results[0].data[0], want = expected[size_t(step - 1)].asNumber();
    EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << c.model << " " << kind << " step " << step;
    std::vector<rt::OptimizerTensor> tensors;
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot &s = slots[i];
      s.g.assign(results[i + 1].data.begin(), results[i + 1].data.end());
      // AdamW and SGD decay everything (torch.optim); LAMB and LARS exclude
      // rank-1 tensors, and LARS gives them no trust ratio.
      bool decay = kind == "adamw" || kind == "sgd" || s.matrix;
      tensors.push_back({s.w.data(), s.g.data(), s.m.data(), s.v.data(), s.u.data(), int64_t(s.w.size()), decay,
                         s.matrix});
    }
    std::vector<float> squares(2 * tensors.size());
    if (kind == "sgd") {
      rt::SgdSettings sgd;
      sgd.lr = number("lr"), sgd.momentum = number("momentum"), sgd.weightDecay = number("weight_decay");
      sgd.nesterov = hyper.find("nesterov")->asBool(), sgd.step = step;
      rt::cpu::sgdStep(rt::Stream{}, tensors.data(), int64_t(tensors.size()), sgd, 1.0f);
    } else if (kind == "adamw" || kind == "lamb") {
      rt::AdamSettings adam;
      adam.lr = number("lr"), adam.eps = number("eps"), adam.weightDecay = number("weight_decay"), adam.step = step;
      adam.beta1 = float(hyper.find("betas")->asArray()[0].asNumber());
      adam.beta2 = float(hyper.find("betas")->asArray()[1].asNumber());
      if (kind == "adamw") {
        rt::cpu::adamwStep(rt::Stream{}, tensors.data(), int64_t(tensors.size()), adam, 1.0f);
      } else {
        rt::cpu::lambStage1(rt::Stream{}, tensors.data(), int64_t(tensors.size()), adam, 1.0f, squares.data());
        rt::cpu::lambStage2(rt::Stream{}, tensors.data(), int64_t(tensors.size()), adam.lr, squares.data());
      }
    } else {
      rt::LarsSettings lars;
      lars.lr = number("lr"), lars.momentum = number("momentum"), lars.eta = number("eta");
      lars.weightDecay = number("weight_decay");
      rt::cpu::tensorSquares(rt::Stream{}, tensors.data(), int64_t(tensors.size()), 1.0f, squares.data());
      rt::cpu::larsStep(rt::Stream{}, tensors.data(), int64_t(tensors.size()), lars, 1.0f, squares.data());
    }
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
