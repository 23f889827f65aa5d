//===- FixtureData.h - a fixture's weights and feed as interpreter values --===//

#ifndef COLOSSAL_TEST_UNIT_FIXTUREDATA_H
#define COLOSSAL_TEST_UNIT_FIXTUREDATA_H

#include "OnnxModel.h"
#include "colossal/Execute/HostInterpreter.h"
#include "colossal/Import/OnnxImporter.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/autodiff/Passes.h"
#include "passes/raise/Passes.h"
#include "colossal/runtime/io/Npy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace colossal::test {

/// The ONNX file's initializers (the initial weights) by name.
inline std::map<std::string, execute::HostValue> loadInitializers(const std::string &onnxPath,
                                                                  const std::string &dir) {
  std::map<std::string, execute::HostValue> values;
  onnx::ModelProto proto;
  std::ifstream in(onnxPath, std::ios::binary);
  if (!proto.ParseFromIstream(&in)) {
    ADD_FAILURE() << onnxPath << " does not parse";
    return values;
  }
  for (const onnx::TensorProto &init : proto.graph().initializer()) {
    std::string error;
    std::optional<import::HostTensor> t = import::readTensor(init, dir, error);
    if (!t) {
      ADD_FAILURE() << init.name() << ": " << error;
      continue;
    }
    execute::HostValue v;
    v.shape = t->shape;
    for (int64_t i = 0; i < t->numElements(); ++i)
      v.data.push_back(t->asDouble(i));
    values[init.name()] = std::move(v);
  }
  return values;
}

/// One value per argument of `function`, read from DIR/feed/NAME.npy.
inline std::vector<execute::HostValue> loadFeeds(mlir::func::FuncOp function, const std::string &dir) {
  std::vector<execute::HostValue> arguments;
  for (unsigned a = 0; a < function.getNumArguments(); ++a) {
    std::string name = function.getArgAttrOfType<mlir::StringAttr>(a, "train.name").str();
    rt::NpyArray array = rt::readNpy(dir + "/feed/" + name + ".npy");
    execute::HostValue v;
    v.shape = array.shape;
    for (int64_t i = 0; i < array.elements(); ++i)
      v.data.push_back(array.dtype == rt::DType::I64 ? double(array.as<int64_t>()[i]) : double(array.as<float>()[i]));
    arguments.push_back(std::move(v));
  }
  return arguments;
}

/// Imports the fixture at `path` with batch 2 and sequence 8 (and exactly
/// `trainable`, when given), raised and, with `differentiate`, with
/// @forward_backward added. Failures are test failures; null on failure.
inline mlir::OwningOpRef<mlir::ModuleOp>
importFixture(mlir::MLIRContext &context, const std::string &path, bool raise, bool differentiate,
              const std::optional<std::vector<std::string>> &trainable = std::nullopt) {
  ImportOptions options;
  options.seq = 8;
  options.trainable = trainable;
  // Batch 2, unless the file fixes its own (the MLP's is 4).
  if (!fixedBatchOfFile(path, options))
    options.batch = 2;
  mlir::OwningOpRef<mlir::ModuleOp> module = importOnnxFile(context, path, options);
  if (!module) {
    ADD_FAILURE() << "cannot import " << path;
    return nullptr;
  }
  mlir::PassManager pm(&context);
  if (raise)
    train::buildRaisePipeline(pm);
  if (differentiate)
    pm.addPass(autodiff::createAutodiffPass());
  if (mlir::failed(pm.run(*module))) {
    ADD_FAILURE() << "raising or differentiating " << path << " failed";
    return nullptr;
  }
  return module;
}

} // namespace colossal::test

#endif // COLOSSAL_TEST_UNIT_FIXTUREDATA_H
