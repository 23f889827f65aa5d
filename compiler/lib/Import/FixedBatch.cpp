//===- FixedBatch.cpp - the batch size a model file fixes -----------------===//

#include "FixedBatch.h"

#include "llvm/ADT/StringExtras.h"

#include <set>
#include <sstream>

namespace colossal::import {

std::optional<FixedBatch> fixedBatchOf(const onnx::ModelProto &model, const ImportOptions &options) {
  const onnx::GraphProto &graph = model.graph();
  // Parameters and constants are not data: initializers, shape-only
  // parameters (the trainable list or the file's metadata) and inputs fixed
  // at compile time.
  std::set<std::string> notData;
  for (const auto &init : graph.initializer())
    notData.insert(init.name());
  if (options.trainable)
    notData.insert(options.trainable->begin(), options.trainable->end());
  for (const auto &entry : model.metadata_props())
    if (entry.key() == "colossal.shape_only_parameters")
      for (llvm::StringRef name : llvm::split(entry.value(), '\n'))
        notData.insert(name.str());
  for (const auto &[name, value] : options.constantInputs)
    notData.insert(name);

  std::optional<FixedBatch> fixed;
  for (const auto &input : graph.input()) {
    if (notData.count(input.name()) || !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const auto &dims = input.type().tensor_type().shape().dim();
    for (const auto &dim : dims)
      if (dim.has_dim_param() && llvm::StringRef(dim.dim_param()).contains_insensitive("batch"))
        return std::nullopt; // --batch binds it
    if (dims.empty())
      continue; // a scalar input has no batch
    if (!dims[0].has_dim_value())
      return std::nullopt; // dynamic under another name: bound by --bind
    int64_t size = dims[0].dim_value();
    if (fixed && fixed->size != size)
      return std::nullopt;
    if (!fixed) {
      std::ostringstream shape;
      shape << "[";
      for (int d = 0; d < dims.size(); ++d)
        shape << (d ? ", " : "") << (dims[d].has_dim_value() ? std::to_string(dims[d].dim_value()) : dims[d].dim_param());
      shape << "]";
      fixed = FixedBatch{size, input.name(), shape.str()};
    }
  }
  return fixed;
}

} // namespace colossal::import
