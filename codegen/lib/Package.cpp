//===- Package.cpp - an output directory with a ready executable ----------===//

#include "colossal/Codegen/Package.h"
#include "colossal/cost/AppliedSharding.h"

#include "colossal/Codegen/CompiledOptimizer.h"

#include "BuildCache.h"
#include "BuildPaths.h"
#include "ModelAxisTraffic.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Import/OnnxImporter.h"
#include "colossal/cost/Estimator.h"
#include "colossal/cost/GraphSearch.h"
#include "colossal/cost/TensorGrid.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/Safetensors.h"
#include "colossal/support/Json.h"
#include "passes/memory/RereadParameters.h"
#include "passes/plan/CostGraphBridge.h"
#include "passes/plan/ModulePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unistd.h>

namespace colossal::codegen {

using namespace mlir;
using support::Json;

namespace {

LogicalResult writeText(ModuleOp module, const std::string &path, const std::string &text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return module.emitError() << "cannot write " << path << ": " << ec.message();
  os << text;
  os.close();
  if (os.has_error())
    return module.emitError() << "cannot write " << path << ": " << os.error().message();
  return success();
}

Json shapeJson(ArrayRef<int64_t> shape) {
  Json::Array dims;
  for (int64_t d : shape)
    dims.push_back(Json(d));
  return Json(dims);
}

/// The parameters whose initial values come from the model file: all, or
/// under --init the frozen ones.
std::vector<train::ParameterOp> fromTheFile(ModuleOp module, const PackageOptions &options) {
  std::map<std::string, rt::ParameterInit::Kind> kinds;
  if (options.settings.initStd >= 0)
    kinds = initKinds(module);
  std::vector<train::ParameterOp> params;
  for (train::ParameterOp p : module.getOps<train::ParameterOp>())
    if (kinds.empty() || kinds[p.getSymName().str()] == rt::ParameterInit::File)
      params.push_back(p);
  return params;
}

/// The weights file of the parameters the model file initializes; none (and
/// a stale one removed) when the program draws them all.
LogicalResult writeWeights(ModuleOp module, const PackageOptions &options, const std::string &path) {
  std::vector<train::ParameterOp> params = fromTheFile(module, options);
  if (params.empty()) {
    llvm::sys::fs::remove(path);
    return success();
  }
  std::vector<std::string> names;
  for (train::ParameterOp p : params)
    names.push_back(p.getSymName().str());
  std::string error;
  std::optional<std::map<std::string, InitialValue>> values = readInitialValues(options.onnxPath, names, error);
  if (!values)
    return module.emitError() << error;
  std::vector<rt::TensorView> views;
  for (train::ParameterOp p : params) {
    InitialValue &v = values->at(p.getSymName().str());
    auto type = cast<ShapedType>(p.getType());
    // A tensor-parallel slice's file holds the whole tensor (each rank
    // loads its slice).
    SmallVector<int64_t> model = p.getModelShape();
    if (v.shape != std::vector<int64_t>(model.begin(), model.end()))
      return module.emitError() << options.onnxPath << ": initializer '" << p.getSymName() << "' has another shape "
                                << "than the parameter " << type;
    // A padded vocabulary: rows of zeros appended along the split dimension.
    if (int64_t padding = int64_t(p.getPadding()); padding > 0 && !v.integer) {
      size_t dim = size_t(*p.getSplitDim());
      int64_t outer = 1, inner = 1;
      for (size_t d = 0; d < dim; ++d)
        outer *= v.shape[d];
      for (size_t d = dim + 1; d < v.shape.size(); ++d)
        inner *= v.shape[d];
      int64_t run = v.shape[dim] * inner, paddedRun = (v.shape[dim] + padding) * inner;
      std::vector<float> padded(size_t(outer * paddedRun), 0.0f);
      for (int64_t o = 0; o < outer; ++o)
        std::copy_n(v.floats.begin() + o * run, run, padded.begin() + o * paddedRun);
      v.floats = std::move(padded);
      v.shape[dim] += padding;
    }
    if (!v.integer && !type.getElementType().isF32())
      return module.emitError() << "parameter @" << p.getSymName() << " is " << type.getElementType()
                                << "; emitted programs keep float32 weights (16-bit precisions cast them where used)";
    rt::TensorView view;
    view.name = p.getSymName().str();
    view.shape = v.shape;
    if (v.integer) {
      view.dtype = rt::DType::I64, view.data = v.ints.data(), view.bytes = int64_t(v.ints.size() * sizeof(int64_t));
    } else {
      view.dtype = rt::DType::F32, view.data = v.floats.data(), view.bytes = int64_t(v.floats.size() * sizeof(float));
    }
    views.push_back(view);
  }
  try {
    rt::writeSafetensors(path, views, {{"source", options.onnxPath}});
  } catch (const rt::Error &e) {
    return module.emitError() << e.what();
  }
  return success();
}

/// The constants the source reads by name (none: no file, and any stale one
/// removed so it cannot be mistaken for this program's).
LogicalResult writeConstants(ModuleOp module, const std::vector<ExternalConstant> &constants, const std::string &path) {
  if (constants.empty()) {
    llvm::sys::fs::remove(path);
    return success();
  }
  std::deque<std::vector<float>> floats;
  std::deque<std::vector<int64_t>> ints;
  std::vector<rt::TensorView> views;
  for (const ExternalConstant &c : constants) {
    rt::TensorView view;
    view.name = c.name;
    view.shape = {c.value.getNumElements()};
    if (llvm::isa<FloatType>(c.value.getElementType())) {
      std::vector<float> &values = floats.emplace_back();
      for (APFloat v : c.value.getValues<APFloat>())
        values.push_back(float(v.convertToDouble()));
      view.dtype = rt::DType::F32, view.data = values.data(), view.bytes = int64_t(values.size() * sizeof(float));
    } else {
      bool boolean = c.value.getElementType().isInteger(1);
      std::vector<int64_t> &values = ints.emplace_back();
      for (APInt v : c.value.getValues<APInt>())
        values.push_back(boolean ? int64_t(v.getBoolValue()) : v.getSExtValue());
      view.dtype = rt::DType::I64, view.data = values.data(), view.bytes = int64_t(values.size() * sizeof(int64_t));
    }
    views.push_back(view);
  }
  try {
    rt::writeSafetensors(path, views);
  } catch (const rt::Error &e) {
    return module.emitError() << e.what();
  }
  return success();
}

/// The settings the module's plan (dist.plan) makes: the ranks of each axis,
/// the model axis's algorithm, microbatches, ZeRO, offload and
/// recomputation.
LogicalResult readPlan(ModuleOp module, ProgramSettings &s) {
  dist::PlanAttr plan = dist::PlanAttr::on(module);
  if (!plan)
    return module.emitError() << "the module has no dist.plan (run dist-apply-plan)";
  if (plan.getPp() > 1) {
    // What the pipeline trainer does not run yet, refused with the reason.
    if (plan.getZero() > 1)
      return module.emitError() << "the plan has pp=" << plan.getPp() << " with ZeRO-" << plan.getZero()
                                << ": pipelines run with ZeRO-1 at most";
    s.pipelineRanks = plan.getPp(), s.virtualStages = plan.getVirtualStages();
    s.pipelineSchedule = plan.getSchedule().str();
  }
  s.ranks = plan.getDp(), s.microbatches = plan.getMicrobatches();
  s.tensorRanks = plan.getTp();
  if (plan.getTp() > 1 && plan.getTpMode() != "1d" && !module->hasAttr("train.tensor_grid"))
    return module.emitError() << "the plan has tp_mode=" << plan.getTpMode()
                              << " and the module is not split on a grid";
  s.sequenceRanks = plan.hasSequenceAxis() ? plan.getSp() : 1;
  s.sequenceMode = plan::strategyOf(plan).spMode;
  s.zero = plan.getZero(), s.offloadOptimizer = plan.getOffload() == "optimizer";
  s.recompute = plan.getRecompute().str();
  return success();
}

/// The cost model's estimate of this program's strategy with `optimizer`:
/// what the program's counters and memory tracker must report, the plan that
/// a user can check against the run.
FailureOr<cost::Estimate> estimateOf(ModuleOp module, const ProgramSettings &s, const std::string &optimizer) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitWarning() << "no prediction: the module has no @forward";
  // A grid's rank holds the blocks its reshardings gather and slice.
  plan::CostGraphOptions graphOptions;
  graphOptions.reshardingsAsOps = module->hasAttr("train.tensor_grid");
  FailureOr<cost::Graph> graph = plan::buildCostGraph(forward, graphOptions);
  if (failed(graph))
    return failure();
  // Which weights the backward pass reads (ZeRO-3 gathers those again).
  if (auto step = module.lookupSymbol<func::FuncOp>("forward_backward")) {
    llvm::StringSet<> readByBackward = memory::parametersReadByBackward(step);
    for (cost::Value &value : graph->values)
      if (value.isParameter)
        value.readByBackward = readByBackward.contains(value.name);
  }
  // The data axis alone first; the model axis's collectives come from the
  // split the partitioner made (below).
  dist::PlanAttr plan = dist::PlanAttr::on(module);
  std::string error;
  std::optional<cost::Cluster> cluster = plan::clusterOf(plan, error);
  if (!cluster)
    return module.emitWarning() << "no prediction: " << error;
  cost::Strategy planned = plan::strategyOf(plan);
  cost::Strategy dataAxis = planned;
  dataAxis.tp = dataAxis.sp = 1, dataAxis.spMode = cost::SequenceMode::None;
  dataAxis.tpMode = cost::TensorMode::OneD, dataAxis.tpDepth = 1;
  if (s.ranks == 1)
    dataAxis.zero = 0;
  // The program completes per-tensor norms across ZeRO shards once for the
  // gradient norm, and once more for LAMB's trust ratios; SGD and LARS keep
  // one moment per weight.
  cost::EstimateOptions options;
  options.bucketBytes = double(s.gradientBucketBytes);
  options.shardedNormReductions = optimizer == "lamb" ? 2 : 1;
  options.optimizerMoments = optimizer == "lamb" || optimizer == "adamw" ? 2 : 1;
  // The data axis overlapped as this program's trainer overlaps it.
  cost::EstimateOptions program =
      cost::evaluationOf(planned, cost::Placement::Partitioner,
                         s.target == "cuda" ? cost::ProgramTarget::Cuda : cost::ProgramTarget::Host);
  options.overlapGradientBuckets = program.overlapGradientBuckets;
  options.prefetchGathers = program.prefetchGathers;
  std::optional<cost::Estimate> estimate = cost::estimate(*graph, dataAxis, *cluster, error, nullptr, options);
  if (!estimate)
    return module.emitWarning() << "no prediction: the cost model cannot evaluate dp=" << s.ranks << ": " << error;
  if (s.unsplitGraph && s.splitGraph) {
    // The model axes (tensor, sequence or both): the whole model under the
    // split the partitioner applied, read back; the cost model's resharding
    // rules derive their collectives, which the program's counters must
    // show.
    cost::Strategy split = dataAxis;
    split.tp = planned.tp, split.sp = planned.sp, split.spMode = planned.spMode;
    cost::Mesh mesh = cost::buildMesh(split, *cluster);
    std::string axes = s.tensorRanks > 1 && s.sequenceRanks > 1 ? "tp and sp axes"
                       : s.tensorRanks > 1                      ? "tp axis"
                                                                : "sp axis";
    std::optional<cost::GraphSharding> sharding =
        cost::appliedModelAxes(*s.unsplitGraph, s.tensorSplitGraph ? &*s.tensorSplitGraph : nullptr, *s.splitGraph,
                               mesh, s.tensorRanks, s.sequenceRanks, error);
    options.layouts = cost::SplitLayouts::Built;
    options.recomputeCollectives = false;
    std::optional<cost::Estimate> whole =
        sharding ? cost::estimate(*s.unsplitGraph, split, *cluster, error, &*sharding, options) : std::nullopt;
    if (!whole)
      return module.emitWarning() << "no prediction of the " << axes << ": " << error;
    // The model axes' collectives, and the pipeline's transfers as the
    // split made them (a token split sends the rank's tokens).
    std::vector<cost::CommTotal> &comm = estimate->stages.front().comm;
    llvm::erase_if(comm, [](const cost::CommTotal &c) { return c.axis == "pp"; });
    for (const cost::CommTotal &c : whole->stages.front().comm)
      if (c.axis == "tp" || c.axis == "sp" || c.axis == "pp")
        comm.push_back(c);
    // The activations as the search sees the plan: the whole model under
    // the split, with the model axis's algorithm (what it keeps, what its
    // collectives hold).
    estimate->memory.activations = whole->memory.activations;
    for (size_t r = 0; r < estimate->stages.size() && r < whole->stages.size(); ++r)
      estimate->stages[r].memory.activations = whole->stages[r].memory.activations;
  }
  if (auto side = module->getAttrOfType<IntegerAttr>("train.tensor_grid"))
    addGridComm(module, s, side.getInt(), gridDepthOf(module), optimizer, estimate->stages.front().comm);
  return *estimate;
}

/// Optimizer offload: bytes per step each way between device and host.
Json offloadOf(const cost::Estimate &estimate) {
  const cost::StageEstimate &rank = estimate.stages.front();
  return Json(Json::Object{{"to_host", Json(rank.offloadToHost)}, {"to_device", Json(rank.offloadToDevice)}});
}

/// Optimizer offload: what the host keeps per rank, in the memory tracker's
/// category names (its pinned space).
Json pinnedStatesOf(const cost::Estimate &estimate) {
  return Json(Json::Object{{"parameters", Json(estimate.memory.hostParameters)},
                           {"gradients", Json(estimate.memory.hostGradients)},
                           {"optimizer_state", Json(estimate.memory.hostOptimizer)}});
}

/// Bytes (or calls) per step by collective and axis.
Json communicationOf(const cost::Estimate &estimate, bool calls = false) {
  Json::Object byCollective;
  for (const cost::CommTotal &c : estimate.stages.front().comm) {
    Json &entry = byCollective[cost::nameOf(c.collective)];
    if (!entry.isObject())
      entry = Json(Json::Object{});
    entry.asObject()[c.axis] = calls ? Json(int64_t(c.calls)) : Json(c.bytes);
  }
  return Json(byCollective);
}

/// The model states per rank, in the memory tracker's category names.
Json modelStatesOf(const cost::MemoryBreakdown &memory) {
  return Json(Json::Object{{"parameters", Json(memory.parameters)},
                           {"gradients", Json(memory.gradients)},
                           {"optimizer_state", Json(memory.optimizer)}});
}

/// A pipeline: each pipeline rank's own memory (its stages' weights, their
/// states, the microbatches it holds in flight) by optimizer, as the
/// manifest's whole-rank predictions are (those are the fullest rank's).
Json pipelineRanksOf(const cost::Estimate &planned, const std::map<std::string, cost::Estimate> &byOptimizer) {
  Json::Array ranks;
  for (size_t r = 0; r < planned.stages.size(); ++r) {
    Json::Object states;
    for (const auto &[name, other] : byOptimizer)
      if (r < other.stages.size())
        states[name] = modelStatesOf(other.stages[r].memory);
    ranks.push_back(Json(Json::Object{{"pipeline_rank", Json(int64_t(r))},
                                      {"model_state_bytes_by_optimizer", Json(states)},
                                      {"activation_bytes", Json(planned.stages[r].memory.activations)}}));
  }
  return Json(ranks);
}

Json manifestOf(ModuleOp module, const PackageOptions &options, const StepMemoryPlan &memory) {
  const ProgramSettings &s = options.settings;
  Json::Object m;
  m["format"] = "colossal-package/1";
  m["model"] = s.model;
  m["source"] = options.onnxPath;
  m["target"] = options.target;
  m["precision"] = options.precision;
  m["gpus"] = Json(s.ranks * s.tensorRanks * s.sequenceRanks * s.pipelineRanks);
  // The model axes: the tensor axis, a sequence axis of its own, or both.
  auto sequence = module->getAttrOfType<StringAttr>("train.sequence_parallel");
  m["strategy"] = Json(Json::Object{{"dp", Json(s.ranks)},
                                    {"tp", Json(s.tensorRanks)},
                                    {"pp", Json(s.pipelineRanks)},
                                    {"sp", Json(s.sequenceRanks)},
                                    {"sp_mode", sequence ? sequence.getValue().str() : std::string("none")},
                                    {"microbatches", Json(s.microbatches)},
                                    {"zero", Json(s.zero)},
                                    {"offload", s.offloadOptimizer ? "optimizer" : "none"},
                                    {"recompute", s.recompute}});
  // Without ZeRO or under ZeRO-1, one gradient all-reduce per bucket.
  m["gradient_bucket_bytes"] = Json(s.gradientBucketBytes);
  m["zero3_prefetch_bytes"] = Json(s.prefetchBytes);
  m["executable"] = "model_train";
  if (!fromTheFile(module, options).empty())
    m["weights"] = "weights.safetensors";
  if (s.initStd >= 0)
    m["init"] = Json(Json::Object{{"kind", "normal"}, {"std", Json(s.initStd)}});
  Json::Array inputs, parameters;
  // The program's inputs: @forward's (the step adds the loss scale).
  if (auto step = module.lookupSymbol<func::FuncOp>("forward"))
    for (BlockArgument arg : step.getArguments()) {
      auto type = cast<ShapedType>(arg.getType());
      auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name");
      std::string element;
      llvm::raw_string_ostream(element) << type.getElementType();
      inputs.push_back(Json(Json::Object{{"name", name ? name.getValue().str() : std::string("input")},
                                         {"shape", shapeJson(type.getShape())},
                                         {"dtype", element}}));
    }
  for (train::ParameterOp p : module.getOps<train::ParameterOp>()) {
    Json::Object parameter{{"name", p.getSymName().str()},
                           {"shape", shapeJson(cast<ShapedType>(p.getType()).getShape())},
                           {"split_dim", Json(p.getSplitDim() ? int64_t(*p.getSplitDim()) : int64_t(-1))},
                           {"split_groups", Json(int64_t(p.getSplitGroups()))},
                           {"padding", Json(int64_t(p.getPadding()))},
                           {"trainable", Json(bool(p.getTrainable()))}};
    // A block of a tensor grid: the mesh axes splitting each dimension.
    if (auto layout = p->getAttrOfType<dist::ShardingAttr>("dist.sharding")) {
      Json::Array dims;
      for (const std::vector<std::string> &axes : layout.getLayout().dims) {
        Json::Array names;
        for (const std::string &axis : axes)
          names.push_back(Json(axis));
        dims.push_back(Json(names));
      }
      parameter["grid_split"] = Json(dims);
      if (std::optional<ArrayRef<int64_t>> groups = p.getBlockGroups())
        parameter["grid_groups"] = shapeJson(*groups);
    }
    parameters.push_back(Json(parameter));
  }
  FailureOr<CompiledOptimizer> optimizer = readCompiledOptimizer(module);
  if (failed(optimizer))
    return Json();
  if (FailureOr<cost::Estimate> predicted = estimateOf(module, s, optimizer->kind); succeeded(predicted)) {
    m["predicted_comm_bytes_per_step"] = communicationOf(*predicted);
    m["predicted_model_state_bytes_per_rank"] = modelStatesOf(predicted->memory);
    // The cost model's activation peak for one rank's step, to set beside
    // the measured one (planned_step_peak_bytes is the compiler's own).
    m["predicted_activation_bytes_per_rank"] = Json(predicted->memory.activations);
    // `model_train --optimizer` may choose another optimizer at run time;
    // under ZeRO that changes the norm completions (LAMB makes two), and the
    // state it keeps (SGD and LARS one moment).
    Json::Object comm, calls, states, pinned;
    std::map<std::string, cost::Estimate> byOptimizer;
    for (const char *name : {"lamb", "adamw", "sgd", "lars"})
      if (FailureOr<cost::Estimate> other = estimateOf(module, s, name); succeeded(other)) {
        comm[name] = communicationOf(*other);
        calls[name] = communicationOf(*other, /*calls=*/true);
        states[name] = modelStatesOf(other->memory);
        pinned[name] = pinnedStatesOf(*other);
        byOptimizer[name] = *other;
      }
    m["predicted_comm_bytes_per_step_by_optimizer"] = Json(comm);
    m["predicted_comm_calls_per_step_by_optimizer"] = Json(calls);
    m["predicted_model_state_bytes_per_rank_by_optimizer"] = Json(states);
    if (s.pipelineRanks > 1)
      m["predicted_pipeline_ranks"] = pipelineRanksOf(*predicted, byOptimizer);
    if (s.offloadOptimizer) {
      m["predicted_offload_bytes_per_step"] = offloadOf(*predicted);
      m["predicted_pinned_model_state_bytes_per_rank_by_optimizer"] = Json(pinned);
    }
  }
  if (auto side = module->getAttrOfType<IntegerAttr>("train.tensor_grid")) {
    m["tensor_grid"] = gridManifestOf(module, s, side.getInt());
  } else if (s.tensorRanks > 1) {
    m["tensor_parallel"] = modelAxisOf(module, s, "tp", s.tensorRanks);
  }
  if (s.sequenceRanks > 1)
    m["sequence_parallel"] = modelAxisOf(module, s, "sp", s.sequenceRanks);
  // The step's own values on one rank, held from definition to last use.
  m["planned_step_peak_bytes"] = Json(memory.peakBytes);
  m["step_value_bytes"] = Json(memory.valueBytes);
  m["inputs"] = Json(inputs);
  m["parameters"] = Json(parameters);
  m["training"] = Json(Json::Object{
      {"optimizer", optimizer->kind}, {"lr", s.lr}, {"beta1", optimizer->beta1}, {"beta2", optimizer->beta2},
      {"eps", optimizer->eps}, {"weight_decay", optimizer->weightDecay}, {"momentum", optimizer->momentum},
      {"nesterov", Json(optimizer->nesterov)}, {"eta", optimizer->eta},
      {"clip_grad_norm", s.clipGradNorm}, {"warmup_steps", Json(s.warmupSteps)}, {"schedule", s.schedule},
      {"steps", Json(s.steps)}, {"microbatches", Json(s.microbatches)}});
  return Json(m);
}

/// Splits a CMake list (';'-separated) into its items.
std::vector<std::string> cmakeList(const char *list) {
  std::vector<std::string> items;
  std::string item;
  for (const char *c = list; *c; ++c) {
    if (*c == ';') {
      if (!item.empty())
        items.push_back(item);
      item.clear();
    } else {
      item += *c;
    }
  }
  if (!item.empty())
    items.push_back(item);
  return items;
}

/// The host target: the system C++ compiler (with this build's sanitizers);
/// the CUDA target: nvcc, linking the CUDA runtime library, cuBLAS and NCCL.
LogicalResult buildExecutable(ModuleOp module, const std::string &dir, bool cuda,
                              const std::function<void(const std::string &)> &onPhase) {
  std::vector<std::string> args;
  std::string source = dir + "/train_step.cpp";
  if (cuda) {
    // The step is host code calling the runtime's device ops, whose kernels
    // the runtime's build compiled for this build's architectures; nvcc
    // compiles it with the host compiler and links the CUDA libraries.
    args = {kNvcc, "-O0", "-std=c++17"};
  } else {
    // The step is a sequence of calls into the runtime, whose kernels were
    // compiled once with full optimization; optimizing the one long function
    // costs minutes for no measurable run time (a 24-layer GPT's 7,900-line
    // step: 120 s at -O1, 10 s at -O0, the same losses and step times,
    // docs/benchmarks.md).
    args = {kCxxCompiler, "-O0", "-std=c++17"};
    for (const std::string &flag : cmakeList(kSanitizerFlags))
      args.push_back(flag);
  }
  for (const std::string &include : cmakeList(kRuntimeIncludes))
    args.push_back("-I" + include);
  args.insert(args.end(), {source, "-o", dir + "/model_train"});
  if (cuda)
    args.push_back(kRuntimeCudaLibrary);
  args.insert(args.end(), {kRuntimeLibrary, kJsonLibrary});
  for (const std::string &library : cmakeList(kRuntimeLinkLibraries))
    args.push_back(library);
  if (cuda)
    for (const std::string &library : cmakeList(kCudaLinkLibraries))
      args.push_back(library);
  args.push_back("-lpthread");
  std::string output = dir + "/model_train";
  std::optional<std::string> cached = buildCacheEntry(args, source, output);
  if (cached && restoreBuild(*cached, output)) {
    if (onPhase)
      onPhase("");
    llvm::errs() << "colossal-compile: " << output << " is an earlier build of the same step (" << *cached << ")\n";
    return success();
  }
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::string log = dir + "/build.log";
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
  std::string command;
  for (const std::string &a : args)
    command += (command.empty() ? "" : " ") + a;
  // A terminal's progress line (onPhase) counts the build's seconds; a log
  // gets the line once.
  if (onPhase)
    onPhase("building " + output);
  if (!isatty(2))
    llvm::errs() << "colossal-compile: building " << output << "\n";
  std::string error;
  llvm::sys::fs::remove(log);
  int status = llvm::sys::ExecuteAndWait(args[0], argv, std::nullopt, redirects, 0, 0, &error);
  if (status != 0) {
    std::string tail;
    if (auto text = llvm::MemoryBuffer::getFile(log))
      tail = (*text)->getBuffer().take_back(2000).str();
    return module.emitError() << "building " << dir << "/model_train failed"
                              << (error.empty() ? "" : " (" + error + ")") << "; the command was:\n  " << command
                              << "\nits output (" << log << ") ends:\n"
                              << tail;
  }
  // The compiler's output is kept only when the build fails.
  llvm::sys::fs::remove(log);
  if (cached)
    storeBuild(output, *cached);
  return success();
}

/// ZeRO-3's prefetch budget: the largest layer's trainable weights (float32
/// on the host), as the cost model's ZeRO-3 gathers a layer ahead.
FailureOr<int64_t> prefetchBytesOf(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "ZeRO-3 prefetching: the module has no @forward";
  FailureOr<cost::Graph> graph = plan::buildCostGraph(forward);
  if (failed(graph))
    return failure();
  return graph->largestLayerTrainableElements() * int64_t(sizeof(float));
}

} // namespace

LogicalResult writePackage(ModuleOp module, const PackageOptions &given) {
  PackageOptions options = given;
  if (failed(readPlan(module, options.settings)))
    return failure();
  if (options.settings.zero == 3 && options.settings.ranks > 1) {
    FailureOr<int64_t> bytes = prefetchBytesOf(module);
    if (failed(bytes))
      return failure();
    options.settings.prefetchBytes = *bytes;
  }
  bool cuda = options.target == "cuda";
  if (!cuda && options.target != "cpu")
    return module.emitError() << "--target " << options.target << ": expected cpu or cuda";
  if (cuda && std::string(kNvcc).empty())
    return module.emitError() << "--target cuda: this colossal-compile was built without CUDA (configure with "
                              << "-DCOLOSSAL_CUDA=ON where /usr/local/cuda has nvcc)";
  const std::string &dir = options.directory;
  if (llvm::sys::fs::exists(dir) && !llvm::sys::fs::is_directory(dir))
    return module.emitError() << "-o " << dir << ": exists and is not a directory";
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return module.emitError() << "cannot create " << dir << ": " << ec.message();
  TimingScope unused;
  TimingScope &timing = options.timing ? *options.timing : unused;
  std::string source;
  llvm::raw_string_ostream os(source);
  StepMemoryPlan memory;
  std::vector<ExternalConstant> constants;
  auto phase = [&](const std::string &what) {
    if (options.onPhase)
      options.onPhase(what);
  };
  phase("writing " + dir + "/train_step.cpp");
  TimingScope sourceTimer = timing.nest("source");
  if (failed(emitHostSource(module, options.settings, os, &memory, &constants)) ||
      failed(writeText(module, dir + "/train_step.cpp", source)) ||
      failed(writeConstants(module, constants, dir + "/constants.safetensors")))
    return failure();
  sourceTimer.stop();
  phase("writing the weights and the graph");
  TimingScope weightsTimer = timing.nest("weights");
  if (failed(writeWeights(module, options, dir + "/weights.safetensors")))
    return failure();
  // The graph without its weights, for `model_train --export` to put the
  // trained ones back into; a model it cannot hold exports weights only.
  {
    std::vector<std::string> names;
    for (train::ParameterOp p : module.getOps<train::ParameterOp>())
      names.push_back(p.getSymName().str());
    std::string unused;
    if (!writeGraphWithoutWeights(options.onnxPath, names, dir + "/graph.onnx", unused))
      llvm::sys::fs::remove(dir + "/graph.onnx");
  }
  weightsTimer.stop();
  phase("predicting the step's memory and communication");
  TimingScope manifestTimer = timing.nest("manifest (predictions)");
  if (failed(writeText(module, dir + "/manifest.json", manifestOf(module, options, memory).dump() + "\n")))
    return failure();
  manifestTimer.stop();
  if (!options.build)
    return success();
  TimingScope buildTimer = timing.nest("build");
  if (failed(buildExecutable(module, dir, cuda, options.onPhase)))
    return failure();
  return success();
}

} // namespace colossal::codegen
