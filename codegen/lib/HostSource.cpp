//===- HostSource.cpp - the training step as host C++ ---------------------===//
//
// The program around the step: its settings, parameters and inputs, the
// pipeline's stage functions and calls, and the entry point. Each function's
// body comes from StepEmitter (HostStepEmitter.h).
//
//===----------------------------------------------------------------------===//

#include "colossal/Codegen/HostSource.h"

#include "HostStepEmitter.h"

#include "colossal/Codegen/CompiledOptimizer.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <limits>
#include <map>
#include <set>

namespace colossal::codegen {

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

/// The smallest table an integer value indexes or class count it labels
/// (the largest int64 when it does neither).
int64_t rangeOfUses(Value input, int64_t tensorRanks) {
  int64_t range = std::numeric_limits<int64_t>::max();
  for (Operation *user : input.getUsers()) {
    // Labels flattened for the loss (labels.view(-1)) label what the
    // flattened ones do; the rank's slice of the tokens (sequence
    // parallelism) what the whole do.
    if (isa<ReshapeOp, ReshardOp, RankSliceOp>(user)) {
      range = std::min(range, rangeOfUses(user->getResult(0), tensorRanks));
      continue;
    }
    // A table or logits split by vocabulary hold 1 / (their axis's ranks)
    // of it: all of the tensor axis in 1D, one axis of a grid.
    int64_t slices = 1;
    if (auto axis = user->getAttrOfType<StringAttr>("mesh_axis")) {
      slices = tensorRanks;
      if (auto module = user->getParentOfType<ModuleOp>())
        for (MeshOp mesh : module.getOps<MeshOp>())
          if (int64_t size = mesh.sizeOf(axis.getValue()); size > 0)
            slices = size;
    }
    if (auto g = dyn_cast<GatherOp>(user); g && g.getIndices() == input) {
      auto data = cast<ShapedType>(g.getData().getType());
      int64_t axis = int64_t(g.getAxis());
      axis = axis < 0 ? axis + data.getRank() : axis;
      int64_t rows = data.getDimSize(axis) * slices;
      // A padded vocabulary: the model's rows, not the padding's.
      if (auto read = g.getData().getDefiningOp<ParamOp>())
        if (auto p = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(read, read.getNameAttr()))
          rows -= slices > 1 ? int64_t(p.getPadding()) : 0;
      range = std::min(range, rows);
    }
    if (auto c = dyn_cast<CrossEntropyOp>(user); c && c.getLabels() == input)
      range = std::min(range, c.getClasses() ? int64_t(*c.getClasses())
                                             : cast<ShapedType>(c.getLogits().getType()).getDimSize(1) * slices);
    if (auto n = dyn_cast<NegativeLogLikelihoodLossOp>(user); n && n.getLabels() == input)
      range = std::min(range, cast<ShapedType>(n.getLogProbs().getType()).getDimSize(1));
  }
  return range;
}

/// The range of synthetic values for an integer input: its uses' range; 2
/// when it neither indexes nor labels.
int64_t integerRange(Value input, int64_t tensorRanks) {
  int64_t range = rangeOfUses(input, tensorRanks);
  return range == std::numeric_limits<int64_t>::max() ? 2 : range;
}

/// The emitted name of a ParameterInit kind.
const char *initKindName(rt::ParameterInit::Kind kind) {
  switch (kind) {
  case rt::ParameterInit::Normal:
    return "Normal";
  case rt::ParameterInit::Ones:
    return "Ones";
  case rt::ParameterInit::Zeros:
    return "Zeros";
  default:
    return "File";
  }
}

} // namespace

// As Hugging Face's models initialize: a norm's scale at 1, a norm's bias
// and any other vector at 0, the rest (matrices, embeddings) from N(0, std^2).
std::map<std::string, rt::ParameterInit::Kind> initKinds(ModuleOp module) {
  std::set<std::string> scales, biases;
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    forward.walk([&](ParamOp read) {
      SmallVector<Value> values{read.getResult()};
      // Mixed precision casts a read before its use.
      for (Operation *user : read->getUsers())
        if (auto cast = dyn_cast<CastOp>(user))
          values.push_back(cast.getResult());
      for (Value v : values)
        for (Operation *user : v.getUsers()) {
          if (auto n = dyn_cast<LayerNormOp>(user)) {
            if (n.getScale() == v)
              scales.insert(read.getName().str());
            if (n.getBias() == v)
              biases.insert(read.getName().str());
          }
          if (auto n = dyn_cast<RmsNormOp>(user); n && n.getScale() == v)
            scales.insert(read.getName().str());
        }
    });
  std::map<std::string, rt::ParameterInit::Kind> kinds;
  for (ParameterOp p : module.getOps<ParameterOp>()) {
    std::string name = p.getSymName().str();
    if (!p.getTrainable())
      kinds[name] = rt::ParameterInit::File;
    else if (scales.count(name))
      kinds[name] = rt::ParameterInit::Ones;
    else if (biases.count(name) || cast<ShapedType>(p.getType()).getRank() <= 1)
      kinds[name] = rt::ParameterInit::Zeros;
    else
      kinds[name] = rt::ParameterInit::Normal;
  }
  return kinds;
}

namespace {

/// The pipeline's stage functions in order (stage s's forward at 2s, its
/// backward at 2s + 1); empty when the step is one function.
std::vector<func::FuncOp> stageFunctionsOf(ModuleOp module) {
  std::vector<func::FuncOp> functions;
  for (int64_t s = 0;; ++s) {
    auto forward = module.lookupSymbol<func::FuncOp>("stage" + std::to_string(s) + "_forward");
    auto backward = module.lookupSymbol<func::FuncOp>("stage" + std::to_string(s) + "_backward");
    if (!forward || !backward)
      return functions;
    functions.push_back(forward);
    functions.push_back(backward);
  }
}

std::string cppStageName(int64_t stage, bool backward) {
  return "stage" + std::to_string(stage) + (backward ? "Backward" : "Forward");
}

/// The C++ initializer of a StageValue for argument or result `i` of
/// `function`.
FailureOr<std::string> stageValueOf(func::FuncOp function, unsigned i, bool result,
                                    const std::map<std::string, size_t> &inputIndex,
                                    const std::map<std::string, size_t> &trainableIndex) {
  auto label = result ? function.getResultAttrOfType<StringAttr>(i, "train.name")
                      : function.getArgAttrOfType<StringAttr>(i, "train.name");
  auto peer = result ? function.getResultAttrOfType<IntegerAttr>(i, "dist.to")
                     : function.getArgAttrOfType<IntegerAttr>(i, "dist.from");
  auto type = cast<ShapedType>(result ? function.getResultTypes()[i] : function.getArgumentTypes()[i]);
  StringRef name = label ? label.getValue() : StringRef();
  std::string kind;
  int64_t index = 0;
  auto number = [&](StringRef text) {
    int64_t n = 0;
    return text.getAsInteger(10, n) ? int64_t(-1) : n;
  };
  if (name == "loss")
    kind = "Loss";
  else if (name == "loss_scale")
    kind = "LossScale";
  else if (name.consume_front("grad:")) {
    auto it = trainableIndex.find(name.str());
    if (it == trainableIndex.end())
      return function.emitError() << "returns the gradient of '" << name << "', which is no trainable parameter";
    kind = "Gradient", index = int64_t(it->second);
  } else if (name.consume_front("send:"))
    kind = "Sent", index = number(name);
  else if (name.consume_front("recv:"))
    kind = "Received", index = number(name);
  else if (name.consume_front("save:"))
    kind = "Saved", index = number(name);
  else if (auto it = inputIndex.find(name.str()); it != inputIndex.end())
    kind = "Input", index = int64_t(it->second);
  if (kind.empty() || index < 0 || ((kind == "Sent" || kind == "Received") && !peer))
    return function.emitError() << (result ? "result " : "argument ") << i << " ('" << name
                                << "') is no pipeline value (loss, grad:, send:, recv:, save: or a program input)";
  return "{colossal::rt::StageValue::" + kind + ", " + std::to_string(index) + ", " +
         std::to_string(peer ? peer.getInt() : int64_t(-1)) + ", " + shapeLiteral(type.getShape()) + ", " +
         (isa<IntegerType>(type.getElementType()) ? "true" : "false") + "}";
}

} // namespace

LogicalResult emitHostSource(ModuleOp module, const ProgramSettings &settings, llvm::raw_ostream &os,
                             StepMemoryPlan *memory, std::vector<ExternalConstant> *external) {
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  std::vector<func::FuncOp> stages = stageFunctionsOf(module);
  if ((!step && stages.empty()) || !forward)
    return module.emitError() << "the module has no @forward_backward (run train-autodiff first)";
  FailureOr<CompiledOptimizer> compiled = readCompiledOptimizer(module);
  if (failed(compiled))
    return failure();
  CompiledOptimizer &optimizer = *compiled;
  std::map<std::string, size_t> parameterIndex;
  std::vector<ParameterOp> parameters;
  std::vector<std::string> trainableOrder;
  for (ParameterOp p : module.getOps<ParameterOp>()) {
    parameterIndex[p.getSymName().str()] = parameters.size();
    parameters.push_back(p);
    if (p.getTrainable())
      trainableOrder.push_back(p.getSymName().str());
  }

  bool device = settings.target == "cuda";
  auto precision = module->getAttrOfType<StringAttr>("train.precision");
  os << "// The training step of " << settings.model << ", emitted by colossal-compile for the "
     << (device ? "CUDA" : "host") << " target\n"
     << "// (" << (precision ? precision.getValue() : StringRef("fp32"))
     << ", one statement per op of @forward_backward; 16-bit values are float32\n"
     << "// rounded to their type after each op). Built against the runtime's public\n"
     << "// headers; main() hands the step to the runtime's trainer.\n\n"
     << "#include \"colossal/runtime/kernels/HostTensor.h\"\n"
     << "#include \"colossal/runtime/io/ProgramFiles.h\"\n"
     << "#include \"colossal/runtime/train/StepMemory.h\"\n"
     << "#include \"colossal/runtime/train/Trainer.h\"\n"
     << (device ? ""
                : "#include \"colossal/runtime/kernels/GridLinear.h\"\n"
                  "#include \"colossal/runtime/kernels/SequenceParallel.h\"\n"
                  "#include \"colossal/runtime/kernels/RingAttention.h\"\n"
                  "#include \"colossal/runtime/kernels/VocabularyParallel.h\"\n");
  if (device)
    os << "#include \"colossal/runtime/kernels/CudaDevice.h\"\n#include \"colossal/runtime/comm/DeviceCollectives.h\"\n"
       << "#include \"colossal/runtime/kernels/DeviceTensor.h\"\n"
       << "#include \"colossal/runtime/Error.h\"\n#include \"colossal/runtime/comm/Launch.h\"\n\n#include <cstdio>\n";
  os << "\n#include <limits>\n#include <optional>\n#include <string>\n#include <utility>\n#include <vector>\n\n"
     << "namespace {\n\nusing HostTensor = colossal::rt::host::Tensor;\n"
     << "using namespace colossal::rt::" << (device ? "device" : "host") << ";\n\n";
  std::map<std::string, size_t> inputIndex, trainableIndex;
  for (BlockArgument arg : forward.getArguments())
    if (auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name"))
      inputIndex[name.getValue().str()] = arg.getArgNumber();
  for (auto [t, name] : llvm::enumerate(trainableOrder))
    trainableIndex[name] = t;
  if (stages.empty()) {
    StepEmitter emitter(step, os, device, external);
    if (failed(emitter.emitStep(parameterIndex, trainableOrder)))
      return failure();
    if (memory)
      *memory = StepMemoryPlan{emitter.plannedPeakBytes(), emitter.valueBytes()};
  } else {
    // Each function holds its own values; the largest is what one call
    // holds at once (the values a stage keeps between calls are the
    // trainer's).
    StepMemoryPlan plan;
    for (func::FuncOp function : stages) {
      StepEmitter emitter(function, os, device, external);
      auto stage = function->getAttrOfType<IntegerAttr>("dist.stage");
      bool backward = function.getSymName().ends_with("_backward");
      if (!stage ||
          failed(emitter.emitStage(cppStageName(stage.getInt(), backward), inputIndex, parameterIndex, trainableIndex)))
        return failure();
      plan.peakBytes = std::max(plan.peakBytes, emitter.plannedPeakBytes());
      plan.valueBytes += emitter.valueBytes();
    }
    if (memory)
      *memory = plan;
  }

  os << "\ncolossal::rt::TrainingProgram program() {\n"
     << "  colossal::rt::TrainingProgram p;\n"
     << "  p.model = " << quoted(settings.model) << ";\n";
  bool scalesLoss = false;
  auto tensorParallel = module->getAttrOfType<IntegerAttr>("train.tensor_parallel");
  int64_t tensorRanks = tensorParallel ? tensorParallel.getInt() : 1;
  auto gridSide = module->getAttrOfType<IntegerAttr>("train.tensor_grid");
  auto gridDepth = module->getAttrOfType<IntegerAttr>("train.tensor_grid_depth");
  for (func::FuncOp function : stages)
    for (unsigned a = 0; a < function.getNumArguments(); ++a)
      if (auto name = function.getArgAttrOfType<StringAttr>(a, "train.name"); name && name.getValue() == "loss_scale")
        scalesLoss = true;
  // The program's inputs are @forward's (the step adds the loss scale).
  func::FuncOp inputsOf = step ? step : forward;
  for (BlockArgument arg : inputsOf.getArguments()) {
    auto name = inputsOf.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name");
    if (name && name.getValue() == "loss_scale") {
      scalesLoss = true;
      continue;
    }
    auto type = cast<ShapedType>(arg.getType());
    bool integer = isa<IntegerType>(type.getElementType());
    if (!integer && !type.getElementType().isF32())
      return inputsOf.emitError() << "graph input " << arg.getArgNumber() << " has type " << type
                                  << "; the host target takes float32 and integer inputs";
    os << "  p.inputs.push_back({" << quoted(name ? name.getValue() : "input") << ", "
       << shapeLiteral(type.getShape()) << ", " << (integer ? "true" : "false") << ", "
       << (integer ? integerRange(forward.getArgument(arg.getArgNumber()), tensorRanks) : 0) << "});\n";
  }
  // Frozen parameters keep the default conventions: no optimizer reads them.
  std::map<std::string, rt::ParameterInit::Kind> kinds;
  if (settings.initStd >= 0)
    kinds = initKinds(module);
  for (ParameterOp p : parameters) {
    CompiledOptimizer::Conventions conventions;
    if (auto it = optimizer.conventions.find(p.getSymName().str()); it != optimizer.conventions.end())
      conventions = it->second;
    os << "  p.parameters.push_back({" << quoted(p.getSymName()) << ", "
       << shapeLiteral(cast<ShapedType>(p.getType()).getShape()) << ", " << (p.getTrainable() ? "true" : "false")
       << ", {/*decay=*/" << (conventions.decay ? "true" : "false") << ", /*trustRatio=*/"
       << (conventions.trustRatio ? "true" : "false") << "}, /*splitDim=*/"
       << (p.getSplitDim() ? int64_t(*p.getSplitDim()) : int64_t(-1)) << ", /*splitGroups=*/"
       << int64_t(p.getSplitGroups()) << ", /*padding=*/" << int64_t(p.getPadding());
    if (settings.initStd >= 0)
      os << ", /*init=*/{colossal::rt::ParameterInit::" << initKindName(kinds[p.getSymName().str()]) << ", "
         << floatLiteral(settings.initStd) << "}";
    os << "});\n";
    // A block of a tensor grid: each dimension's axes (TensorSlices.h).
    if (auto layout = p->getAttrOfType<ShardingAttr>("dist.sharding")) {
      os << "  p.parameters.back().gridSplit = {";
      for (auto [d, axes] : llvm::enumerate(layout.getLayout().dims)) {
        os << (d ? ", {" : "{");
        for (auto [a, axis] : llvm::enumerate(axes))
          os << (a ? ", " : "") << quoted(axis);
        os << "}";
      }
      os << "};\n";
      if (std::optional<ArrayRef<int64_t>> groups = p.getBlockGroups())
        for (auto [d, count] : llvm::enumerate(*groups))
          if (count > 1)
            os << "  p.parameters.back().gridGroupDim = " << d << ", p.parameters.back().gridGroups = " << count
               << ";\n";
    }
  }
  // train.optimizer_update lowers to the runtime's fused optimizer: these are
  // its settings (defaults a flag may override), the masks above its
  // per-tensor conventions.
  std::string where;
  llvm::raw_string_ostream(where) << optimizer.op.getLoc();
  os << "  colossal::rt::TrainingSettings &s = p.settings;\n"
     << "  // train.optimizer_update {kind = " << quoted(optimizer.kind) << "} of @optimizer_step, " << where << "\n"
     << "  s.optimizer.kind = *colossal::rt::parseOptimizer(" << quoted(optimizer.kind) << ");\n"
     << "  s.optimizer.lr = " << llvm::format("%.9g", settings.lr) << ";\n"
     << "  s.optimizer.beta1 = " << llvm::format("%.17g", optimizer.beta1) << ";\n"
     << "  s.optimizer.beta2 = " << llvm::format("%.17g", optimizer.beta2) << ";\n"
     << "  s.optimizer.eps = " << llvm::format("%.17g", optimizer.eps) << ";\n"
     << "  s.optimizer.weightDecay = " << llvm::format("%.17g", optimizer.weightDecay) << ";\n"
     << "  s.optimizer.momentum = " << llvm::format("%.17g", optimizer.momentum) << ";\n"
     << "  s.optimizer.nesterov = " << (optimizer.nesterov ? "true" : "false") << ";\n"
     << "  s.optimizer.eta = " << llvm::format("%.17g", optimizer.eta) << ";\n"
     << "  s.optimizer.clipGradNorm = " << llvm::format("%.9g", settings.clipGradNorm) << ";\n"
     << "  s.warmupSteps = " << settings.warmupSteps << ";\n"
     << "  s.schedule = *colossal::rt::parseDecay(" << quoted(settings.schedule) << ");\n"
     << "  s.steps = " << settings.steps << ";\n"
     << "  s.microbatches = " << settings.microbatches << ";\n"
     << "  s.ranks = " << settings.ranks << ";\n"
     << "  s.tensorRanks = " << settings.tensorRanks << ";\n"
     << "  s.sequenceRanks = " << settings.sequenceRanks << ";\n"
     << (gridSide ? "  s.tensorGrid = " + std::to_string(gridSide.getInt()) + ";\n" : std::string())
     << (gridDepth ? "  s.tensorGridDepth = " + std::to_string(gridDepth.getInt()) + ";\n" : std::string())
     << (module->hasAttr("train.tensor_cube") ? "  s.tensorCube = true;\n" : "") << "  s.zero = " << settings.zero
     << ";\n"
     << (settings.offloadOptimizer ? "  s.offloadOptimizer = true;\n" : "")
     << "  s.gradientBucketBytes = " << settings.gradientBucketBytes << ";\n"
     << "  s.prefetchBytes = " << settings.prefetchBytes << ";\n"
     << "  s.lossScaling.dynamic = " << (scalesLoss ? "true" : "false") << ";\n";
  if (stages.empty()) {
    os << "  p.step = trainStep;\n";
  } else {
    os << "  s.pipelineRanks = " << settings.pipelineRanks << ";\n"
       << "  s.virtualStages = " << settings.virtualStages << ";\n"
       << "  s.pipelineSchedule = " << quoted(settings.pipelineSchedule) << ";\n";
    for (func::FuncOp function : stages) {
      int64_t stage = function->getAttrOfType<IntegerAttr>("dist.stage").getInt();
      bool backward = function.getSymName().ends_with("_backward");
      os << "  {\n    colossal::rt::StageFunction f;\n    f.stage = " << stage
         << ", f.backward = " << (backward ? "true" : "false") << ";\n";
      for (bool result : {false, true}) {
        unsigned n = result ? function.getNumResults() : function.getNumArguments();
        for (unsigned i = 0; i < n; ++i) {
          FailureOr<std::string> value = stageValueOf(function, i, result, inputIndex, trainableIndex);
          if (failed(value))
            return failure();
          os << "    f." << (result ? "results" : "arguments") << ".push_back(" << *value << ");\n";
        }
      }
      std::set<size_t> reads;
      function.walk([&](ParamOp read) { reads.insert(parameterIndex[read.getName().str()]); });
      os << "    f.parameters = {";
      for (auto [k, index] : llvm::enumerate(reads))
        os << (k ? ", " : "") << index;
      os << "};\n    f.run = " << cppStageName(stage, backward) << ";\n    p.stages.push_back(std::move(f));\n  }\n";
    }
  }
  os << "  return p;\n}\n\n} // namespace\n\n"
     << (device ? "int main(int argc, char **argv) {\n"
                  "  // --help needs no GPU.\n"
                  "  bool help = false;\n"
                  "  for (int i = 1; i < argc; ++i)\n"
                  "    help = help || std::string(argv[i]) == \"--help\" || std::string(argv[i]) == \"-h\";\n"
                  "  try {\n"
                  "    // One GPU per rank: the local rank picks it.\n"
                  "    if (!help)\n"
                  "      colossal::rt::cuda::initializeCudaDevice(colossal::rt::detectLaunch().localRank);\n"
                  "  } catch (const colossal::rt::Error &e) {\n"
                  "    std::fprintf(stderr, \"%s: error: %s: %s\\n\", argv[0], e.call().c_str(), e.reason().c_str());\n"
                  "    return 1;\n"
                  "  }\n"
                  "  return colossal::rt::trainerMain(argc, argv, program());\n}\n"
                : "int main(int argc, char **argv) { return colossal::rt::trainerMain(argc, argv, program()); }\n");
  return success();
}

} // namespace colossal::codegen
