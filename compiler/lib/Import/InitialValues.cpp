//===- InitialValues.cpp - a model's initial weights ----------------------===//
//
// The values of the initializers named by the module's parameters, read
// with the same checks as the importer (external data within its file,
// sizes that agree with the shape), for the weights an emitted program
// starts from.
//
//===----------------------------------------------------------------------===//

#include "OnnxModel.h"
#include "colossal/Import/OnnxImporter.h"

#include <filesystem>
#include <fstream>
#include <set>

namespace colossal {

std::optional<std::map<std::string, InitialValue>> readInitialValues(const std::string &path,
                                                                     const std::vector<std::string> &names,
                                                                     std::string &error) {
  // Each weight is read from its place in the file, once.
  onnx::ModelProto model;
  if (!import::readModelFile(path, model, error)) {
    error = path + ": " + error;
    return std::nullopt;
  }
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  std::set<std::string> wanted(names.begin(), names.end());
  std::map<std::string, InitialValue> values;
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    if (!wanted.count(init.name()))
      continue;
    std::optional<import::HostTensor> t =
        import::readTensor(init, baseDir.empty() ? "." : baseDir, error, import::kMaxTensorElements);
    if (!t) {
      error = path + ": initializer '" + init.name() + "' " + error;
      return std::nullopt;
    }
    InitialValue v;
    v.shape = t->shape;
    v.integer = !t->isFloat();
    if (v.integer)
      v.ints = std::move(t->ints);
    else
      v.floats.assign(t->floats.begin(), t->floats.end());
    values[init.name()] = std::move(v);
  }
  for (const std::string &name : names)
    if (!values.count(name)) {
      error = path + ": parameter '" + name +
              "' has no initial value in the file (a shape-only parameter); compile with --init normal:0.02 to draw "
              "the weights, or export the model with its weights";
      return std::nullopt;
    }
  return values;
}

bool writeGraphWithoutWeights(const std::string &path, const std::vector<std::string> &names,
                              const std::string &outPath, std::string &error) {
  onnx::ModelProto model;
  if (!import::readModelFile(path, model, error)) {
    error = path + ": " + error;
    return false;
  }
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  std::set<std::string> weights(names.begin(), names.end());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (onnx::TensorProto &init : *model.mutable_graph()->mutable_initializer()) {
    if (!weights.count(init.name())) {
      // The graph is written elsewhere: bytes left in the model file go back
      // inline, and a constant's external file would not be found from there.
      if (!import::inlineRawDataLeftInPlace(init, baseDir.empty() ? "." : baseDir, error)) {
        error = path + ": constant '" + init.name() + "' " + error;
        return false;
      }
      if (init.data_location() == onnx::TensorProto::EXTERNAL) {
        error = path + ": constant '" + init.name() + "' is stored in an external file";
        return false;
      }
      *kept.Add() = init;
      continue;
    }
    // The trained weights are written back as float32 or int64.
    if (init.data_type() != onnx::TensorProto::FLOAT && init.data_type() != onnx::TensorProto::INT64) {
      error = path + ": weight '" + init.name() + "' is not float32 or int64";
      return false;
    }
  }
  model.mutable_graph()->mutable_initializer()->Swap(&kept);
  std::ofstream out(outPath, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out) || !out.flush()) {
    error = outPath + ": cannot write the file";
    return false;
  }
  return true;
}

} // namespace colossal
