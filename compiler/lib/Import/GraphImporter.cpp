//===- GraphImporter.cpp - ONNX graph to a train function --------*- C++ -*-===//
//
// The import runs in checked stages, each of which reports every problem it
// finds before failing: opsets, unsupported ops (all of them, with counts),
// graph inputs and their dynamic dimensions, parameters and their data, the
// nodes in order, and the loss output.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "FixedBatch.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

using namespace mlir;

namespace colossal::import {

/// Initializers smaller than this that do not reach the loss (masks, rotary
/// frequencies, position tables) are read as constants and folded; larger
/// ones stay frozen parameters so that their bytes never enter the IR.
constexpr int64_t kMaxBufferConstantElements = 1 << 20;

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;

Type elementTypeOf(MLIRContext *context, int32_t onnxType) {
  Builder b(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT: return b.getF32Type();
  case onnx::TensorProto::DOUBLE: return b.getF64Type();
  case onnx::TensorProto::FLOAT16: return b.getF16Type();
  case onnx::TensorProto::BFLOAT16: return b.getBF16Type();
  case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64: return b.getI64Type();
  case onnx::TensorProto::INT32: case onnx::TensorProto::UINT32: return b.getI32Type();
  case onnx::TensorProto::INT16: case onnx::TensorProto::UINT16: return b.getIntegerType(16);
  case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: return b.getIntegerType(8);
  case onnx::TensorProto::BOOL: return b.getI1Type();
  default: return {};
  }
}

ElementKind elementKindOf(Type type) {
  if (type.isF32()) return ElementKind::Float;
  if (type.isF64()) return ElementKind::Double;
  if (type.isF16()) return ElementKind::Float16;
  if (type.isBF16()) return ElementKind::BFloat16;
  if (type.isInteger(1)) return ElementKind::Bool;
  if (type.isInteger(8)) return ElementKind::Int8;
  if (type.isInteger(16)) return ElementKind::Int16;
  if (type.isInteger(32)) return ElementKind::Int32;
  return ElementKind::Int64;
}

/// The elements of `constant` converted to T, as the attribute's storage.
template <typename T, typename Read>
DenseElementsAttr denseAttrFrom(RankedTensorType type, int64_t n, Read read) {
  std::vector<T> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[size_t(i)] = T(read(i));
  return DenseElementsAttr::get(type, llvm::ArrayRef<T>(values));
}

DenseElementsAttr denseAttrOf(const HostTensor &constant, RankedTensorType type) {
  Type element = type.getElementType();
  int64_t n = constant.numElements();
  // The common types directly (a causal mask of a long sequence has millions
  // of elements); the rest through APFloat and APInt.
  auto asInt = [&](int64_t i) { return constant.asInt(i); };
  if (element.isF32())
    return denseAttrFrom<float>(type, n, [&](int64_t i) { return constant.asDouble(i); });
  if (element.isF64())
    return denseAttrFrom<double>(type, n, [&](int64_t i) { return constant.asDouble(i); });
  if (element.isInteger(1)) {
    std::vector<char> bits(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      bits[size_t(i)] = constant.asInt(i) != 0;
    return DenseElementsAttr::get(type, llvm::ArrayRef<bool>(reinterpret_cast<const bool *>(bits.data()), bits.size()));
  }
  if (element.isInteger(64))
    return denseAttrFrom<int64_t>(type, n, asInt);
  if (element.isInteger(32))
    return denseAttrFrom<int32_t>(type, n, asInt);
  if (auto floatType = llvm::dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> values;
    values.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      bool lostInfo;
      APFloat value(constant.asDouble(i));
      value.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lostInfo);
      values.push_back(value);
    }
    return DenseElementsAttr::get(type, values);
  }
  unsigned width = element.getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  values.reserve(n);
  for (int64_t i = 0; i < n; ++i)
    values.push_back(APInt(width, uint64_t(constant.asInt(i)), /*isSigned=*/true,
                           /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, values);
}

GraphImporter::GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                             std::string displayName, std::string baseDir,
                             const ImportOptions &options)
    : context(context), builder(&context), displayName(std::move(displayName)), model(model),
      baseDir(std::move(baseDir)), options(options),
      fileLoc(FileLineColLoc::get(&context, this->displayName, 0, 0)) {}

LogicalResult GraphImporter::modelError(const Twine &reason) {
  return emitError(fileLoc) << displayName << ": " << reason;
}

LogicalResult GraphImporter::nodeError(const onnx::NodeProto &node, const Twine &reason) {
  return emitError(fileLoc) << displayName << ": node '" << node.name() << "' ("
                            << node.op_type() << "): " << reason;
}

LogicalResult GraphImporter::checkOpsets() {
  bool found = false;
  for (const auto &opset : model.opset_import()) {
    if (!opset.domain().empty() && opset.domain() != "ai.onnx")
      continue;
    found = true;
    opsetVersion = opset.version();
  }
  if (!found)
    return modelError("declares no default-domain opset (opset_import is empty)");
  if (opsetVersion < kMinOpset || opsetVersion > kMaxOpset)
    return modelError(llvm::formatv("opset {0} is not supported; export with opset_version "
                                    "between {1} and {2}",
                                    opsetVersion, kMinOpset, kMaxOpset));
  return success();
}

LogicalResult GraphImporter::checkSupportedOps() {
  std::map<std::string, int> unsupported;
  std::map<std::string, std::string> example;
  const auto &table = nodeImporters();
  for (const auto &node : model.graph().node()) {
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    std::string key = defaultDomain ? node.op_type() : node.domain() + "::" + node.op_type();
    if (defaultDomain && table.count(node.op_type()))
      continue;
    ++unsupported[key];
    example.emplace(key, node.name());
  }
  if (unsupported.empty())
    return success();
  std::string list;
  for (const auto &[op, count] : unsupported)
    list += llvm::formatv("\n  {0} x{1} (first: node '{2}')", op, count, example[op]).str();
  return modelError(llvm::formatv("{0} unsupported op type{1}:{2}", unsupported.size(),
                                  unsupported.size() == 1 ? "" : "s", list));
}

static bool containsIgnoreCase(StringRef haystack, StringRef needle) {
  return haystack.lower().find(needle.lower()) != std::string::npos;
}

FailureOr<RankedTensorType> GraphImporter::graphInputType(const onnx::ValueInfoProto &input) {
  if (!input.type().has_tensor_type())
    return modelError("graph input '" + input.name() + "' is not a tensor");
  const auto &tensorType = input.type().tensor_type();
  Type element = elementTypeOf(&context, tensorType.elem_type());
  if (!element)
    return modelError(llvm::formatv("graph input '{0}' has unsupported element type {1}",
                                    input.name(), tensorType.elem_type()));
  if (!tensorType.has_shape())
    return modelError("graph input '" + input.name() + "' has no shape");
  SmallVector<int64_t> shape;
  bool ok = true;
  for (auto [axis, dim] : llvm::enumerate(tensorType.shape().dim())) {
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0) {
        ok = false;
        (void)modelError(llvm::formatv("graph input '{0}' dimension {1} is negative",
                                       input.name(), axis));
      }
      shape.push_back(dim.dim_value());
      continue;
    }
    const std::string &name = dim.dim_param();
    std::optional<int64_t> bound;
    if (auto it = options.bindings.find(name); !name.empty() && it != options.bindings.end())
      bound = it->second;
    else if (options.batch && containsIgnoreCase(name, "batch"))
      bound = options.batch;
    else if (options.seq && containsIgnoreCase(name, "seq"))
      bound = options.seq;
    if (!bound) {
      ok = false;
      if (name.empty())
        (void)modelError(llvm::formatv("graph input '{0}' dimension {1} is dynamic and unnamed; "
                                       "re-export with a named dynamic axis or a fixed size",
                                       input.name(), axis));
      else
        (void)modelError(llvm::formatv(
            "graph input '{0}' dimension {1} ('{2}') is dynamic and unbound; bind it with {3}",
            input.name(), axis, name,
            containsIgnoreCase(name, "batch") ? "--batch B"
            : containsIgnoreCase(name, "seq") ? "--seq S"
                                              : "--bind " + name + "=VALUE"));
      continue;
    }
    if (*bound <= 0) {
      ok = false;
      (void)modelError(llvm::formatv("dimension '{0}' is bound to {1}; sizes must be positive",
                                     name, *bound));
    }
    shape.push_back(*bound);
  }
  if (!ok)
    return failure();
  auto type = RankedTensorType::get(shape, element);
  if (!isReasonableType(type))
    return modelError("graph input '" + input.name() + "' would hold more than 2^48 elements");
  return type;
}

LogicalResult GraphImporter::declareInputsAndParameters(ModuleOp module,
                                                        SmallVectorImpl<Type> &argTypes,
                                                        SmallVectorImpl<std::string> &argNames) {
  const onnx::GraphProto &graph = model.graph();
  std::set<std::string> reachesLoss = initializersReachingLoss(graph);
  std::set<std::string> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());

  std::set<std::string> trainable;
  if (options.trainable) {
    std::set<std::string> known = initializerNames;
    for (const auto &input : graph.input())
      known.insert(input.name());
    std::vector<std::string> unknown;
    for (const std::string &name : *options.trainable) {
      if (!known.count(name))
        unknown.push_back(name);
      trainable.insert(name);
    }
    if (!unknown.empty())
      return modelError("the trainable list names what the graph does not hold: " +
                        llvm::join(unknown, ", "));
  } else {
    for (const std::string &name : reachesLoss)
      trainable.insert(name);
    // A shape-only model lists its parameters (graph inputs without data)
    // in its metadata, as colossal-model writes them.
    std::set<std::string> inputNames;
    for (const auto &input : graph.input())
      inputNames.insert(input.name());
    for (const auto &entry : model.metadata_props())
      if (entry.key() == "colossal.shape_only_parameters")
        for (llvm::StringRef name : llvm::split(entry.value(), '\n')) {
          if (name.empty())
            continue;
          if (!inputNames.count(name.str()))
            return modelError("the metadata's shape-only parameter '" + name.str() +
                              "' is not a graph input");
          trainable.insert(name.str());
        }
  }
  for (const std::string &name : options.frozen) {
    if (!initializerNames.count(name))
      return modelError("--frozen names '" + name + "', which is not a parameter of the model");
    trainable.erase(name);
  }

  OpBuilder moduleBuilder = OpBuilder::atBlockEnd(module.getBody());
  bool ok = true;
  for (const auto &init : graph.initializer()) {
    if (init.name().empty() || values.count(init.name())) {
      ok = false;
      (void)modelError("initializer '" + init.name() + "' is unnamed or declared twice");
      continue;
    }
    std::string error;
    TensorDataLocation location;
    if (!checkTensorData(init, baseDir, location, error)) {
      ok = false;
      (void)modelError("initializer '" + init.name() + "' " + error);
      continue;
    }
    Type element = elementTypeOf(&context, init.data_type());
    std::vector<int64_t> shape = *tensorShape(init, error);
    auto type = RankedTensorType::get(shape, element);
    if (!isReasonableType(type)) {
      ok = false;
      (void)modelError("initializer '" + init.name() + "' would hold more than 2^48 elements");
      continue;
    }
    bool isTrainable = trainable.count(init.name()) > 0;
    bool isFrozenWeight = !isTrainable && reachesLoss.count(init.name());
    if (isTrainable && !llvm::isa<FloatType>(element)) {
      ok = false;
      (void)modelError("initializer '" + init.name() + "' is listed as trainable but holds " +
                       elementKindName(ElementKind(init.data_type())) + " values");
      continue;
    }
    if (!isTrainable && !isFrozenWeight && numElementsOf(shape) <= kMaxBufferConstantElements) {
      auto constant = readTensor(init, baseDir, error);
      if (!constant) {
        ok = false;
        (void)modelError("initializer '" + init.name() + "' " + error);
        continue;
      }
      values[init.name()].constant = std::move(*constant);
      continue;
    }
    std::string data =
        location.external && !location.inModelFile
            ? llvm::formatv("external:{0}:{1}:{2}", location.file, location.offset, location.length).str()
            : "initializer";
    train::ParameterOp::create(
        moduleBuilder, fileLoc, moduleBuilder.getStringAttr(init.name()), TypeAttr::get(type),
        isTrainable ? moduleBuilder.getUnitAttr() : UnitAttr(), moduleBuilder.getStringAttr(data),
        /*split_dim=*/IntegerAttr(), /*splits=*/moduleBuilder.getI64IntegerAttr(1),
        /*split_groups=*/moduleBuilder.getI64IntegerAttr(1), /*padding=*/moduleBuilder.getI64IntegerAttr(0),
        /*block_splits=*/DenseI64ArrayAttr(), /*block_groups=*/DenseI64ArrayAttr());
    values[init.name()].parameterType = type;
  }

  for (const auto &input : graph.input()) {
    if (initializerNames.count(input.name()))
      continue; // an exporter that lists initializers as inputs too
    if (auto it = options.constantInputs.find(input.name()); it != options.constantInputs.end()) {
      onnx::TensorProto tensor;
      std::string error;
      std::optional<HostTensor> value;
      if (!tensor.ParseFromString(it->second))
        error = "is not a serialized tensor";
      else
        value = readTensor(tensor, baseDir, error);
      if (!value) {
        ok = false;
        (void)modelError("constant value for graph input '" + input.name() + "' " + error);
        continue;
      }
      values[input.name()].constant = std::move(*value);
      continue;
    }
    FailureOr<RankedTensorType> type = graphInputType(input);
    if (failed(type)) {
      ok = false;
      continue;
    }
    if (trainable.count(input.name())) {
      // A shape-only model: the parameter is declared without data.
      if (!llvm::isa<FloatType>(type->getElementType())) {
        ok = false;
        (void)modelError("graph input '" + input.name() +
                         "' is listed as trainable but is not floating point");
        continue;
      }
      train::ParameterOp::create(moduleBuilder, fileLoc, moduleBuilder.getStringAttr(input.name()),
                                 TypeAttr::get(*type), moduleBuilder.getUnitAttr(), moduleBuilder.getStringAttr("none"),
                                 /*split_dim=*/IntegerAttr(),
                                 /*splits=*/moduleBuilder.getI64IntegerAttr(1),
                                 /*split_groups=*/moduleBuilder.getI64IntegerAttr(1),
                                 /*padding=*/moduleBuilder.getI64IntegerAttr(0),
                                 /*block_splits=*/DenseI64ArrayAttr(), /*block_groups=*/DenseI64ArrayAttr());
      values[input.name()].parameterType = *type;
      continue;
    }
    argTypes.push_back(*type);
    argNames.push_back(input.name());
  }
  // --batch with nothing to bind: the file's batch is the one trained on,
  // so it must be the one asked for.
  if (ok && options.batch)
    if (std::optional<FixedBatch> fixed = fixedBatchOf(model, options); fixed && fixed->size != *options.batch)
      return modelError(llvm::formatv(
          "the file fixes the batch at {0} (graph input '{1}' is {2}, no dimension named like 'batch'), but the "
          "program is compiled for {3} sample(s) per microbatch of each rank; export the model with a dynamic "
          "batch dimension (torch.onnx.export(..., dynamic_axes={{'{1}': {{0: 'batch'}})), or choose --batch so "
          "that each rank's microbatch holds {0}",
          fixed->size, fixed->input, fixed->shape, *options.batch));
  return success(ok);
}

Value GraphImporter::materialize(StringRef name, Location loc) {
  auto it = values.find(name);
  if (it == values.end())
    return {};
  GraphValue &entry = it->second;
  if (entry.value)
    return entry.value;
  if (entry.parameterType) {
    entry.value = train::ParamOp::create(builder, 
        loc, entry.parameterType, FlatSymbolRefAttr::get(&context, name));
    return entry.value;
  }
  if (entry.constant) {
    auto type = RankedTensorType::get(entry.constant->shape,
                                      elementTypeOf(&context, int32_t(entry.constant->kind)));
    entry.value = train::ConstantOp::create(builder, loc, denseAttrOf(*entry.constant, type));
    return entry.value;
  }
  return {};
}

LogicalResult GraphImporter::checkInputCount(const onnx::NodeProto &node,
                                             const NodeImporter &importer) {
  int count = node.input_size();
  if (count < importer.minInputs || count > importer.maxInputs) {
    std::string expected =
        importer.maxInputs == kVariadic
            ? llvm::formatv("at least {0}", importer.minInputs).str()
        : importer.minInputs == importer.maxInputs
            ? std::to_string(importer.minInputs)
            : llvm::formatv("{0} to {1}", importer.minInputs, importer.maxInputs).str();
    int largestShown = importer.maxInputs == kVariadic ? importer.minInputs : importer.maxInputs;
    return nodeError(node, llvm::formatv("takes {0} input{1}, has {2}", expected,
                                         largestShown == 1 ? "" : "s", count));
  }
  // Only optional inputs (after the required ones) may be left unnamed; a
  // variadic op's inputs are all required.
  int required = importer.maxInputs == kVariadic ? count : importer.minInputs;
  for (int i = 0; i < required; ++i)
    if (node.input(i).empty())
      return nodeError(node, llvm::formatv("required input {0} is unnamed", i));
  return success();
}

LogicalResult GraphImporter::importNodes() {
  const auto &table = nodeImporters();
  // A folded constant's values are released after the last node that reads
  // them: a 48-layer export folds a mask of a million elements per layer.
  llvm::StringMap<int> readsLeft;
  for (const auto &node : model.graph().node())
    for (const std::string &input : node.input())
      ++readsLeft[input];
  for (const auto &output : model.graph().output())
    ++readsLeft[output.name()];
  bool ok = true;
  for (const auto &node : model.graph().node()) {
    for (const std::string &input : node.input())
      if (!input.empty() && !values.count(input))
        return nodeError(node, "input '" + input +
                                   "' is not produced by any earlier node, initializer or "
                                   "graph input (the graph is not in topological order)");
    std::string label = node.name().empty() ? node.op_type() : node.name();
    Location loc = NameLoc::get(builder.getStringAttr(label), fileLoc);
    const NodeImporter &importer = table.find(node.op_type())->second;
    if (failed(checkInputCount(node, importer)))
      return failure();
    NodeContext ctx(*this, node, loc);
    if (failed(importer.import(ctx))) {
      ok = false;
      break; // later nodes would report the same missing value again
    }
    for (int i = 0; i < node.output_size(); ++i)
      if (!node.output(i).empty() && !values.count(node.output(i)))
        return nodeError(node, "produced no value for output '" + node.output(i) + "'");
    for (const std::string &input : node.input())
      if (auto it = values.find(input); it != values.end() && --readsLeft[input] == 0)
        it->second.constant.reset();
  }
  return success(ok);
}

LogicalResult GraphImporter::importOutputs(func::FuncOp function) {
  const onnx::GraphProto &graph = model.graph();
  if (graph.output_size() == 0)
    return modelError("the graph has no outputs; a training export returns its loss");
  SmallVector<Value> results;
  for (const auto &output : graph.output()) {
    Value value = materialize(output.name(), fileLoc);
    if (!value)
      return modelError("graph output '" + output.name() + "' is not produced by any node");
    results.push_back(value);
  }
  if (options.requireLoss) {
    auto lossType = llvm::cast<RankedTensorType>(results.front().getType());
    if (lossType.getRank() != 0 || !llvm::isa<FloatType>(lossType.getElementType())) {
      std::string shown;
      llvm::raw_string_ostream os(shown);
      os << lossType;
      return modelError("the first graph output '" + graph.output(0).name() +
                        "' must be the scalar floating-point loss, but it is " + shown +
                        "; export a module whose forward returns the loss");
    }
  }
  func::ReturnOp::create(builder, fileLoc, results);
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  function.setFunctionType(builder.getFunctionType(function.getArgumentTypes(), resultTypes));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    function.setResultAttr(i, "train.name", builder.getStringAttr(output.name()));
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  context.loadDialect<train::TrainDialect, func::FuncDialect>();
  if (failed(checkOpsets()) || failed(checkSupportedOps()))
    return {};
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  if (failed(declareInputsAndParameters(*module, argTypes, argNames)))
    return {};

  builder.setInsertionPointToEnd(module->getBody());
  auto function = func::FuncOp::create(builder, fileLoc, "forward",
                                               builder.getFunctionType(argTypes, {}));
  Block *entry = function.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    values[name].value = entry->getArgument(i);
    function.setArgAttr(i, "train.name", builder.getStringAttr(name));
  }
  builder.setInsertionPointToStart(entry);
  if (failed(importNodes()) || failed(importOutputs(function)))
    return {};
  if (failed(verify(*module)))
    return {};
  return module;
}

} // namespace colossal::import

namespace colossal {

OwningOpRef<ModuleOp> importOnnxBytes(MLIRContext &context, const void *data, size_t size,
                                      const std::string &displayName, const std::string &baseDir,
                                      const ImportOptions &options) {
  onnx::ModelProto model;
  std::string error;
  if (!import::parseModel(data, size, model, error)) {
    emitError(FileLineColLoc::get(&context, displayName, 0, 0)) << displayName << ": " << error;
    return {};
  }
  import::GraphImporter importer(context, model, displayName, baseDir, options);
  return importer.run();
}

std::optional<FixedBatch> fixedBatchOfFile(const std::string &path, const ImportOptions &options) {
  onnx::ModelProto model;
  std::string error;
  if (!import::readModelFile(path, model, error))
    return std::nullopt;
  return import::fixedBatchOf(model, options);
}

struct OnnxFile::Parsed {
  onnx::ModelProto model;
};

OnnxFile::OnnxFile() = default;
OnnxFile::~OnnxFile() = default;

std::shared_ptr<const OnnxFile> OnnxFile::read(MLIRContext &context, const std::string &path) {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    emitError(loc) << path << ": is a directory, not an ONNX file";
    return nullptr;
  }
  // The weights' bytes stay in the file: planning never reads them.
  std::shared_ptr<OnnxFile> file(new OnnxFile());
  file->parsed_ = std::make_unique<Parsed>();
  std::string error;
  if (!import::readModelFile(path, file->parsed_->model, error)) {
    emitError(loc) << path << ": " << error;
    return nullptr;
  }
  file->path_ = path;
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  file->baseDir_ = baseDir.empty() ? "." : baseDir;
  return file;
}

std::optional<FixedBatch> fixedBatchOf(const OnnxFile &file, const ImportOptions &options) {
  return import::fixedBatchOf(file.parsed_->model, options);
}

OwningOpRef<ModuleOp> importOnnxFile(MLIRContext &context, const OnnxFile &file, const ImportOptions &options) {
  import::GraphImporter importer(context, file.parsed_->model, file.path_, file.baseDir_, options);
  return importer.run();
}

OwningOpRef<ModuleOp> importOnnxFile(MLIRContext &context, const std::string &path, const ImportOptions &options) {
  std::shared_ptr<const OnnxFile> file = OnnxFile::read(context, path);
  return file ? importOnnxFile(context, *file, options) : OwningOpRef<ModuleOp>();
}

std::optional<std::vector<std::string>> readNameList(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open '" + path + "'";
    return std::nullopt;
  }
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    StringRef name = StringRef(line).split('#').first.trim();
    if (!name.empty())
      names.push_back(name.str());
  }
  return names;
}

} // namespace colossal
