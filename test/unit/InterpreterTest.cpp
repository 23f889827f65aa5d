//===- InterpreterTest.cpp - fixtures' forward passes against PyTorch ------===//
//
// Every fixture model, imported and raised, runs through the host
// interpreter (the runtime's host kernels) on the fixture's feed with the
// ONNX file's initial weights; its loss must equal the loss PyTorch computed
// for the same batch (reference.json) to 1e-5 relative. The imported but
// unraised program must give the same loss too (raising preserves meaning).
//
//===----------------------------------------------------------------------===//

#include "OnnxModel.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Execute/HostInterpreter.h"
#include "colossal/Import/OnnxImporter.h"
#include "colossal/cost/Json.h"
#include "colossal/runtime/Npy.h"
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
  std::vector<HostValue> arguments;
  for (unsigned a = 0; a < function.getNumArguments(); ++a) {
    std::string name = function.getArgAttrOfType<mlir::StringAttr>(a, "train.name").str();
    colossal::rt::NpyArray array = colossal::rt::readNpy(dir + "/feed/" + name + ".npy");
    HostValue v;
    v.shape = array.shape;
    for (int64_t i = 0; i < array.elements(); ++i)
      v.data.push_back(array.dtype == colossal::rt::DType::I64 ? double(array.as<int64_t>()[i])
                                                               : double(array.as<float>()[i]));
    arguments.push_back(std::move(v));
  }
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
  std::optional<colossal::cost::Json> reference = colossal::cost::Json::parse(readText(dir + "/reference.json"), error);
  ASSERT_TRUE(reference) << error;
  double expected = reference->find("loss")->asNumber();

  // Initial weights from the ONNX file's initializers.
  onnx::ModelProto proto;
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(proto.ParseFromIstream(&in));
  std::map<std::string, HostValue> parameters;
  for (const onnx::TensorProto &init : proto.graph().initializer()) {
    std::optional<colossal::import::HostTensor> t = colossal::import::readTensor(init, dir, error);
    ASSERT_TRUE(t) << init.name() << ": " << error;
    HostValue v;
    v.shape = t->shape;
    for (int64_t i = 0; i < t->numElements(); ++i)
      v.data.push_back(t->asDouble(i));
    parameters[init.name()] = std::move(v);
  }

  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  colossal::ImportOptions options;
  options.batch = 2;
  options.seq = 8;
  auto imported = colossal::importOnnxFile(context, path, options);
  ASSERT_TRUE(imported);
  double unraised = runLoss(*imported, dir, parameters);

  mlir::PassManager pm(&context);
  colossal::train::buildRaisePipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*imported)));
  double raised = runLoss(*imported, dir, parameters);

  EXPECT_NEAR(raised, expected, 1e-5 * std::fabs(expected)) << model << " raised";
  EXPECT_NEAR(unraised, expected, 1e-5 * std::fabs(expected)) << model << " as imported";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureForward,
                         ::testing::Values("mlp", "cnn", "gpt2", "bert", "vit", "llama"),
                         [](const ::testing::TestParamInfo<const char *> &info) { return std::string(info.param); });

} // namespace
