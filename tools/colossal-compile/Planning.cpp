//===- Planning.cpp - --emit=plan and --plan for colossal-compile ---------===//

#include "Planning.h"

#include "PartitionerSplits.h"
#include "RaisedModels.h"

#include "colossal/cost/AppliedSharding.h"
#include "colossal/cost/Estimator.h"
#include "colossal/cost/GraphScaling.h"
#include "colossal/cost/GraphSearch.h"
#include "passes/plan/CostGraphBridge.h"
#include "passes/plan/ModulePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace colossal {
namespace {

/// A plan file's tensor placement (`tensor_placement`; the solver's when
/// absent).
/// What the partitioner builds today, for the messages about plans it
/// cannot.
constexpr const char *kPartitionerRuns =
    "data parallelism, its own 1D tensor split (with Megatron's sequence parallelism) and 2D, 2.5D and 3D grids, "
    "sequence parallelism on its "
    "own axis (all-to-all, ring), pipelines (GPipe, 1F1B, interleaved), microbatches, ZeRO 1, 2 and 3, optimizer "
    "offload and recomputation";

cost::Placement placementOf(const support::Json &plan) {
  const support::Json *placement = plan.find("tensor_placement");
  return placement && placement->isString() && placement->asString() == "partitioner" ? cost::Placement::Partitioner
                                                                                      : cost::Placement::Solver;
}

int fail(const std::string &message) {
  llvm::WithColor::error(llvm::errs(), "colossal-compile") << message << "\n";
  return 1;
}

std::optional<support::Json> readJson(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot read the file";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::optional<support::Json> json = support::Json::parse(text.str(), error);
  if (!json)
    error = path + ": " + error;
  return json;
}

/// The model's cost graph with its batch dimension bound to `microbatch`.
std::optional<cost::Graph> graphAt(RaisedModels &models, const PlanRequest &request, int64_t microbatch,
                                   std::string &error) {
  mlir::ModuleOp module = models.at(microbatch, error);
  if (!module)
    return std::nullopt;
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  mlir::FailureOr<cost::Graph> graph = mlir::failure();
  if (forward)
    graph = plan::buildCostGraph(forward);
  if (mlir::failed(graph)) {
    error = "the cost model cannot represent " + request.inputPath + " (see the error above)";
    return std::nullopt;
  }
  graph->microbatch = microbatch;
  // Tokens per microbatch: the elements of the first integer input (token
  // ids), else one per sample.
  graph->tokensPerMicrobatch = microbatch;
  for (mlir::Type type : forward.getArgumentTypes())
    if (auto shaped = llvm::dyn_cast<mlir::RankedTensorType>(type); shaped && shaped.getElementType().isInteger()) {
      graph->tokensPerMicrobatch = shaped.getNumElements();
      break;
    }
  // Floating-point values take the planned precision.
  if (request.precision != "fp32") {
    cost::DType low = request.precision == "bf16" ? cost::DType::BF16 : cost::DType::F16;
    for (cost::Value &value : graph->values)
      if (value.dtype == cost::DType::F32)
        value.dtype = low;
    for (cost::Op &op : graph->ops)
      for (cost::SavedTensor &saved : op.saved)
        if (saved.dtype == cost::DType::F32)
          saved.dtype = low;
  }
  return std::move(*graph);
}

/// How the tensor axis splits each kind of op, in words: "train.linear x4:
/// result dimension 1".
std::vector<std::string> tensorSplitSummary(const cost::Graph &graph, const cost::GraphSharding &sharding,
                                            const cost::Mesh &mesh) {
  std::map<std::string, int> counts;
  for (size_t o = 0; o < graph.ops.size() && o < sharding.size(); ++o) {
    const cost::Op &op = graph.ops[o];
    std::string how;
    for (size_t f = 0; f < op.factors.size(); ++f) {
      if (sharding[o][f].empty())
        continue;
      std::string axes;
      for (int a : sharding[o][f])
        axes += (axes.empty() ? "" : "x") + mesh.axes[size_t(a)].name;
      std::string where;
      if (op.factors[f].kind == cost::FactorKind::Reduction) {
        where = "the contraction (partial sums)";
      } else {
        for (const cost::TensorUse &out : op.outputs)
          for (size_t d = 0; d < out.dims.size() && where.empty(); ++d)
            if (std::find(out.dims[d].begin(), out.dims[d].end(), int(f)) != out.dims[d].end())
              where = "result dimension " + std::to_string(d);
        // A factor the result lacks (a loss's classes): where it enters.
        for (size_t i = 0; i < op.inputs.size() && where.empty(); ++i)
          for (size_t d = 0; d < op.inputs[i].dims.size() && where.empty(); ++d)
            if (std::find(op.inputs[i].dims[d].begin(), op.inputs[i].dims[d].end(), int(f)) !=
                op.inputs[i].dims[d].end())
              where = "operand " + std::to_string(i) + " dimension " + std::to_string(d);
        if (where.empty())
          where = "factor " + op.factors[f].name;
      }
      how += (how.empty() ? "" : ", ") + where + " over " + axes;
    }
    ++counts[op.name + ": " + (how.empty() ? std::string("replicated") : how)];
  }
  std::vector<std::string> lines;
  for (const auto &[line, n] : counts)
    lines.push_back(line + " (" + std::to_string(n) + (n == 1 ? " op)" : " ops)"));
  return lines;
}

} // namespace

std::string partitionerLacks(const cost::Strategy &s, cost::Placement placement) {
  std::string lacks;
  auto add = [&](bool needed, const std::string &what) {
    if (needed)
      lacks += (lacks.empty() ? "" : ", ") + what;
  };
  // The partitioner builds its own split of a 1D tensor axis (Megatron's)
  // and the 2D, 2.5D and 3D grids, alone on the model axes.
  bool grid = s.tpMode != cost::TensorMode::OneD;
  bool builtSplit = placement == cost::Placement::Partitioner;
  add(s.tp > 1 && !builtSplit,
      "tp=" + std::to_string(s.tp) +
          (grid ? std::string(",tp_mode=") + cost::nameOf(s.tpMode) + " placed otherwise than the partitioner's grid"
                : std::string(" placed by the sharding solver")));
  add(grid && s.tp > 1 && (s.sp > 1 || s.spMode != cost::SequenceMode::None),
      std::string("a sequence split beside the tp_mode=") + cost::nameOf(s.tpMode) + " grid");
  // Pipelines run with ZeRO-1 at most (as DeepSpeed).
  add(s.pp > 1 && s.zero > 1, "pp=" + std::to_string(s.pp) + " with ZeRO-" + std::to_string(s.zero));
  // Sequence parallelism: Megatron's on the partitioner's tensor split, or
  // all-to-all and ring on a sequence axis of their own (beside the
  // partitioner's tensor split, if any).
  bool ownAxis = s.spMode == cost::SequenceMode::AllToAll || s.spMode == cost::SequenceMode::Ring;
  if (s.spMode == cost::SequenceMode::Megatron)
    add(s.sp > 1 || s.tp == 1 || !builtSplit, "Megatron's sequence parallelism off the partitioner's tensor split");
  else if (ownAxis)
    add(s.sp == 1 || placement != cost::Placement::Partitioner, "sp=" + std::to_string(s.sp) +
                                                                    ",sp_mode=" + cost::nameOf(s.spMode) +
                                                                    (s.sp > 1 ? " placed by the sharding solver" : ""));
  else
    add(s.sp > 1 || s.spMode != cost::SequenceMode::None, "sequence parallelism");
  add(s.zero > 3, "zero=" + std::to_string(s.zero));
  // Offload moves each rank's ZeRO shard of the optimizer to its host.
  add(s.offloadOptimizer && s.zero == 0 && s.dp > 1, "optimizer offload without ZeRO");
  return lacks;
}

namespace {

bool writeOutput(const std::string &path, const std::string &text) {
  if (path == "-") {
    llvm::outs() << text << "\n";
    return true;
  }
  std::ofstream out(path);
  out << text << "\n";
  return bool(out);
}

/// The plan's predicted step as Chrome-trace JSON at `path`: evaluated again
/// keeping the simulated pipeline's calls, with the names a pipelined
/// program's --trace gives the measured ones (F0, B0, ...).
/// `sharding` is what the plan was evaluated with (null: the strategy's).
bool writePredictedTrace(const std::string &path, const cost::Graph &graph, const cost::SearchCandidate &plan,
                         const cost::GraphSharding *sharding, const cost::Cluster &cluster, cost::ProgramTarget target,
                         std::string &error) {
  cost::EstimateOptions options = cost::evaluationOf(plan.strategy, plan.placement, target);
  options.recordPipelineTasks = true;
  std::optional<cost::Estimate> e = cost::estimate(graph, plan.strategy, cluster, error, sharding, options);
  if (!e)
    return false;
  if (std::abs(e->stepTime / plan.estimate.stepTime - 1) > 1e-9) {
    error = "the trace's step (" + std::to_string(e->stepTime) + " s) is not the plan's (" +
            std::to_string(plan.estimate.stepTime) + " s)";
    return false;
  }
  if (!writeOutput(path, e->chromeTrace().dump(0))) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

void printReport(const std::string &model, const std::string &precision, const cost::Cluster &cluster, const cost::SearchResult *search,
                 const cost::SearchCandidate &plan, const cost::Graph &graph) {
  llvm::raw_ostream &os = llvm::errs();
  os << "plan for " << model << " (" << precision << ") on " << plan.strategy.devices() << " device(s) of " << cluster.name
     << " (" << cluster.nodes << " node(s) of " << cluster.gpusPerNode << ")\n";
  if (!cluster.description.empty())
    os << "cluster    " << cluster.description << "\n";
  if (search) {
    char line[256];
    std::snprintf(line, sizeof line, "search     %lld candidates, %lld evaluated, %lld invalid, %.2f s\n",
                  (long long)search->candidates, (long long)search->evaluated, (long long)search->invalid,
                  search->seconds);
    os << line;
  }
  os << "strategy   " << plan.strategy.str() << ", microbatch size " << plan.microbatchSize << "\n";
  os << "mesh      ";
  bool any = false;
  for (const cost::MeshAxis &axis : plan.estimate.mesh.axes)
    if (axis.size > 1) {
      os << " " << axis.name << "=" << axis.size << " (" << (axis.spansNodes() ? "across nodes" : "inside a node")
         << ")";
      any = true;
    }
  os << (any ? "" : " one device") << "\n";
  // The last layer's ops: the first may also hold ops that read only the
  // step's data (a padding mask's scores, made once for all layers).
  int64_t layerOps = 0;
  for (const cost::Op &op : graph.ops)
    layerOps += graph.numLayers > 0 && op.layer == graph.numLayers - 1;
  if (graph.numLayers > 0) {
    os << "layers     " << graph.numLayers << " identical blocks of " << layerOps << " ops found";
    if (plan.strategy.pp > 1)
      os << "; " << plan.strategy.pp * plan.strategy.virtualStages << " pipeline stages of "
         << graph.numLayers / (plan.strategy.pp * plan.strategy.virtualStages)
         << " layer(s), the ops before them on the first stage and after them on the last";
    os << "\n";
  } else {
    os << "layers     none found (no repeated block): no pipeline or recomputation plans\n";
  }
  bool sequenceAxis = plan.strategy.sp > 1 && (plan.strategy.spMode == cost::SequenceMode::AllToAll ||
                                               plan.strategy.spMode == cost::SequenceMode::Ring);
  if (plan.strategy.tp > 1 && plan.strategy.tpMode != cost::TensorMode::OneD) {
    auto [q, depth] = cost::tensorGrid(plan.strategy);
    std::string shape = "a " + std::to_string(q) + " x " + std::to_string(q);
    if (plan.strategy.tpMode == cost::TensorMode::ThreeD)
      shape += " x " + std::to_string(q) + " cube";
    else if (depth > 1)
      shape = std::to_string(depth) + " layers of " + shape + " grid";
    else
      shape += " grid";
    os << "tensor grid " << cost::nameOf(plan.strategy.tpMode) << " on " << shape
       << (plan.placement == cost::Placement::Partitioner ? ", as the partitioner builds it" : "")
       << ": every op's work and activations split over the " << plan.strategy.tp
       << " ranks, the linear layers' weights in blocks, priced by the grid's algorithms (cost/TensorGrid.h); what "
          "the built grid computes whole (fused QKV projections, embeddings) is not seen here: the program's "
          "manifest predicts from its split\n";
  } else if (plan.strategy.tp > 1 || sequenceAxis) {
    bool splitsAny = false;
    for (const cost::OpSharding &op : plan.sharding)
      for (const std::vector<int> &axes : op)
        splitsAny |= !axes.empty();
    if (!splitsAny)
      os << "note: the model axis splits no op: its ranks repeat the whole model's work, which the cost "
            "model finds cheaper than any split's communication (a model this small is latency-bound)\n";
    std::string split = plan.strategy.tp > 1 ? "Megatron's pairs, heads and vocabulary over tp" : "";
    if (sequenceAxis)
      split += std::string(split.empty() ? "" : ", then ") + "the tokens over sp";
    os << (sequenceAxis ? "model axes" : "tensor axis") << ", op by op ("
       << (plan.placement == cost::Placement::Partitioner ? "the partitioner's split: " + split
                                                          : std::string("the sharding solver's choice"))
       << "):\n";
    for (const std::string &line : tensorSplitSummary(graph, plan.sharding, plan.estimate.mesh))
      os << "  " << line << "\n";
  }
  os << plan.estimate.summary();
  std::string lacks = partitionerLacks(plan.strategy, plan.placement);
  if (lacks.empty())
    os << "executable: yes: colossal-compile " << model << " -o DIR --plan PLAN.json builds it for mpirun -np "
       << plan.strategy.devices() << "\n";
  else {
    os << "executable: not yet: the partitioner runs " << kPartitionerRuns << "; this plan needs " << lacks << "\n";
  }
  if (search && search->best.size() > 1) {
    os << "alternatives:\n";
    for (size_t i = 1; i < search->best.size(); ++i)
      os << "  " << search->best[i].strategy.str() << ", microbatch size " << search->best[i].microbatchSize
         << ": " << cost::explainLoss(search->best[i], plan) << "\n";
  }
}

support::Json planJson(const std::string &model, const std::string &precision, int64_t globalBatch, const cost::SearchResult *search,
                    const cost::SearchCandidate &plan, const cost::Graph &graph) {
  support::Json json = plan.estimate.toJson();
  support::Json::Object &o = json.asObject();
  o["format"] = "colossal-plan/1";
  o["precision"] = precision;
  o["model"] = model;
  o["global_batch"] = globalBatch;
  o["microbatch_size"] = plan.microbatchSize;
  o["executable"] = partitionerLacks(plan.strategy, plan.placement).empty();
  o["tensor_placement"] = plan.placement == cost::Placement::Partitioner ? "partitioner" : "solver";
  o["shardings"] = cost::shardingToJson(graph, plan.sharding, plan.estimate.mesh);
  if (search) {
    support::Json::Array alternatives;
    for (size_t i = 1; i < search->best.size(); ++i)
      alternatives.push_back(support::Json::Object{{"strategy", search->best[i].strategy.toJson()},
                                                {"microbatch_size", search->best[i].microbatchSize},
                                                {"step_time_s", search->best[i].estimate.stepTime},
                                                {"why_slower", cost::explainLoss(search->best[i], plan)}});
    o["search"] = support::Json::Object{{"candidates", search->candidates},
                                     {"evaluated", search->evaluated},
                                     {"seconds", search->seconds},
                                     {"alternatives", alternatives}};
  }
  return json;
}

} // namespace

int runPlanning(mlir::MLIRContext &context, const PlanRequest &request) {
  std::string error;
  std::string model = llvm::sys::path::filename(request.inputPath).str();
  std::optional<int> nodes = plan::nodesFor(request.cluster, request.gpus, error);
  if (!nodes)
    return fail(error);
  std::optional<cost::Cluster> cluster = cost::Cluster::load(request.cluster, *nodes, error);
  if (!cluster)
    return fail(error);

  // Graphs at one and two samples per microbatch tell whether the batch
  // dimension is bound at all (two samples must do more work than one) and
  // which factors are the batch: every other size is derived from them (or
  // from two and four) rather than imported again.
  // The file is read and parsed once, its weights' bytes left in the file.
  mlir::TimingScope untimed;
  mlir::TimingScope &timing = request.timing ? *request.timing : untimed;
  mlir::TimingScope reading = timing.nest("read the model's graph");
  std::shared_ptr<const OnnxFile> file = OnnxFile::read(context, request.inputPath);
  if (!file)
    return 1;
  reading.stop();
  mlir::TimingScope searching = timing.nest("search");
  RaisedModels models(context, request.import, *file, request.inputPath);
  std::map<int64_t, std::optional<cost::Graph>> graphs;
  std::map<int64_t, std::string> graphErrors;
  auto importedAt = [&](int64_t b) {
    mlir::TimingScope importing = searching.nest("import and raise, per microbatch size");
    return graphAt(models, request, b, graphErrors[b]);
  };
  auto imported = [&](int64_t b) -> std::optional<cost::Graph> & {
    if (!graphs.count(b))
      graphs[b] = importedAt(b);
    return graphs[b];
  };
  auto build = [&](int64_t b) -> std::optional<cost::Graph> & {
    if (b <= 2 || graphs.count(b))
      return imported(b);
    std::optional<cost::Graph> &one = imported(1), &two = imported(2);
    std::optional<cost::Graph> scaled = one && two ? cost::graphAtBatch(*one, *two, b, graphErrors[b]) : std::nullopt;
    // At one sample the export may have another structure (a batch of one
    // reshaped away): the graphs at two and four serve the larger sizes.
    if (!scaled && b > 4 && two)
      if (std::optional<cost::Graph> &four = imported(4))
        scaled = cost::graphAtBatch(*two, *four, b, graphErrors[b]);
    graphs[b] = scaled ? std::move(scaled) : importedAt(b);
    return graphs[b];
  };
  // A file exported without a dynamic batch axis trains on its own batch:
  // that is the only microbatch size a plan may have.
  std::optional<FixedBatch> fixedBatch = fixedBatchOf(*file, request.import);
  auto graphFor = [&](int64_t b, std::string &why) -> std::optional<cost::Graph> {
    if (fixedBatch && b != fixedBatch->size) {
      why = "the model file fixes the batch at " + std::to_string(fixedBatch->size) + " (graph input '" +
            fixedBatch->input + "' is " + fixedBatch->shape + "), so every microbatch holds " +
            std::to_string(fixedBatch->size) + " sample(s), not " + std::to_string(b) +
            " (export it with a dynamic batch dimension to let the plan choose)";
      return std::nullopt;
    }
    if (fixedBatch) {
      std::optional<cost::Graph> &g = imported(b);
      if (!g)
        why = graphErrors[b];
      return g;
    }
    std::optional<cost::Graph> &g = build(b);
    if (!g) {
      why = graphErrors[b];
      return std::nullopt;
    }
    std::optional<cost::Graph> &one = build(1), &two = build(2);
    if (one && two && one->modelFlops() == two->modelFlops()) {
      why = "the model's batch dimension is fixed in the ONNX file, so the plan cannot choose its "
            "microbatch size (export it with a dynamic batch dimension)";
      return std::nullopt;
    }
    return g;
  };

  if (!request.planPath.empty()) {
    // Re-evaluate a plan file: its strategy, microbatch size and shardings.
    std::optional<support::Json> json = readJson(request.planPath, error);
    if (!json)
      return fail(error);
    const support::Json *strategyJson = json->find("strategy");
    std::optional<cost::Strategy> strategy =
        strategyJson ? cost::Strategy::fromJson(*strategyJson, error) : std::nullopt;
    if (!strategy)
      return fail(request.planPath + ": " + (strategyJson ? error : "no strategy section"));
    const support::Json *mb = json->find("microbatch_size");
    const support::Json *batch = json->find("global_batch");
    int64_t b = mb && mb->isNumber() ? int64_t(mb->asNumber()) : 1;
    std::optional<cost::Graph> graph = graphFor(b, error);
    if (!graph)
      return fail(error);
    cost::SearchCandidate plan{*strategy, b, {}, {}, placementOf(*json)};
    cost::Mesh mesh = cost::buildMesh(*strategy, *cluster);
    if (const support::Json *shardings = json->find("shardings")) {
      std::optional<cost::GraphSharding> sharding = cost::shardingFromJson(*shardings, *graph, mesh, error);
      if (!sharding)
        return fail(request.planPath + ": " + error);
      plan.sharding = std::move(*sharding);
    }
    bool hasSplits = false;
    for (const cost::OpSharding &op : plan.sharding)
      for (const std::vector<int> &axes : op)
        hasSplits |= !axes.empty();
    if (!hasSplits)
      plan.sharding.clear();
    cost::EstimateOptions evaluation = cost::evaluationOf(*strategy, plan.placement, request.target);
    std::optional<cost::Estimate> e = cost::estimate(*graph, *strategy, *cluster, error,
                                                     plan.sharding.empty() ? nullptr : &plan.sharding, evaluation);
    if (!e)
      return fail(request.planPath + ": the plan cannot run: " + error);
    plan.estimate = std::move(*e);
    std::optional<cost::GraphSharding> evaluatedWith;
    if (!plan.sharding.empty())
      evaluatedWith = plan.sharding;
    if (plan.sharding.empty())
      plan.sharding = cost::replicatedSharding(*graph);
    if (!request.quiet)
      printReport(model, request.precision, *cluster, nullptr, plan, *graph);
    int64_t globalBatch = batch && batch->isNumber() ? int64_t(batch->asNumber())
                                                    : b * strategy->microbatches * strategy->dp;
    if (!writeOutput(request.outputPath, planJson(model, request.precision, globalBatch, nullptr, plan, *graph).dump()))
      return fail("cannot write " + request.outputPath);
    if (!request.tracePath.empty() &&
        !writePredictedTrace(request.tracePath, *graph, plan, evaluatedWith ? &*evaluatedWith : nullptr, *cluster,
                             request.target, error))
      return fail("--trace: " + error);
    return plan.estimate.fits() ? 0 : 3;
  }

  cost::SearchOptions options;
  options.devices = int(request.gpus);
  options.globalBatch = request.globalBatch;
  options.target = request.target;
  if (!request.strategy.empty()) {
    std::optional<cost::Strategy> fixed = cost::Strategy::parse(request.strategy, error, &options.fixedKeys);
    if (!fixed)
      return fail("--strategy: " + error);
    options.fixed = *fixed;
  }
  options.buildable = [](const cost::Strategy &s, cost::Placement placement) {
    return partitionerLacks(s, placement).empty();
  };
  if (request.chosen || request.buildableOnly) {
    options.admit = [](const cost::Strategy &s) { return partitionerLacks(s, cost::Placement::Partitioner).empty(); };
    options.partitionerPlacementOnly = true;
  }
  bool terminal = isatty(2);
  options.progress = [&](int64_t evaluated, int64_t candidates) {
    if (terminal)
      llvm::errs() << "\rsearching: " << evaluated << " plans evaluated of " << candidates << " candidates";
  };
  // The partitioner's own split of the model axis is a placement too: the
  // plans with it are the ones -o DIR builds. Each graph goes to the search
  // with the splits, made once per factor structure and model axis.
  // A grid splits the rows (the batch) too, so whether it can be built
  // depends on the microbatch size: its splits are made per size, unless a
  // size it divides was split.
  std::map<std::tuple<std::vector<size_t>, cost::ModelAxis, int64_t>, cost::ModelAxisSplit> splits;
  PartitionerSplits partitionerSplits(context, models, *cluster);
  auto searchGraphsFor = [&](const cost::SearchOptions &o) -> cost::GraphAtMicrobatch {
    return [&, axes = cost::modelAxesToSplit(o, *cluster)](int64_t b,
                                                           std::string &why) -> std::optional<cost::SearchGraph> {
      std::optional<cost::Graph> graph = graphFor(b, why);
      if (!graph)
        return std::nullopt;
      cost::SearchGraph given{std::move(*graph), {}};
      std::vector<size_t> structure = cost::factorStructure(given.graph);
      for (const cost::ModelAxis &axis : axes) {
        int64_t key = axis.onGrid() ? b : 0;
        // A grid split at b0 samples splits at every multiple of b0: each
        // dimension at k b0 samples is k times its size at b0 or the same,
        // so what must divide still divides (and its sharding is the graph
        // replicated), with no import at this size.
        if (axis.onGrid())
          for (auto it = splits.lower_bound({structure, axis, 1}),
                    end = splits.upper_bound({structure, axis, std::numeric_limits<int64_t>::max()});
               it != end; ++it)
            if (int64_t at = std::get<2>(it->first); it->second.sharding && b % at == 0) {
              key = at;
              break;
            }
        auto [entry, fresh] = splits.try_emplace({structure, axis, key});
        if (fresh) {
          mlir::TimingScope splitting = searching.nest("the partitioner's splits");
          entry->second.sharding = partitionerSplits.split(given.graph, axis, entry->second.error);
        }
        given.partitionerSplits[axis] = entry->second;
      }
      return given;
    };
  };
  cost::SearchResult result = cost::searchGraphPlans(searchGraphsFor(options), *cluster, options);
  if (terminal && result.seconds >= 1)
    llvm::errs() << "\r" << std::string(70, ' ') << "\r";
  if (result.best.empty())
    return fail("no plan for " + model + " on " + std::to_string(request.gpus) + " device(s): " + result.infeasible);
  cost::SearchCandidate &winner = result.best.front();
  if (request.chosen) {
    const cost::Estimate &e = winner.estimate;
    if (!request.quiet)
      llvm::errs() << "colossal-compile: plan for " << request.gpus << " devices of " << cluster->name << " ("
                   << result.evaluated << " plans the partitioner runs evaluated): " << winner.strategy.str()
                   << ", microbatch size " << winner.microbatchSize << "; predicted step "
                   << llvm::format("%.3g", e.stepTime) << " s, "
                   << llvm::format("%.3g", e.memory.total() / double(1ull << 30)) << " GiB per rank of "
                   << llvm::format("%.3g", e.capacity / double(1ull << 30))
                   << " (--strategy fixes parts, --emit=plan shows the search)\n";
    *request.chosen = winner.strategy;
    return 0;
  }
  const cost::Graph &graph = *graphs[winner.microbatchSize];
  std::optional<cost::GraphSharding> evaluatedWith;
  if (!winner.sharding.empty())
    evaluatedWith = winner.sharding;
  if (winner.sharding.empty())
    winner.sharding = cost::replicatedSharding(graph);
  // When the best plan cannot be built yet, the best one that can.
  std::optional<cost::SearchCandidate> buildable;
  if (!partitionerLacks(winner.strategy, winner.placement).empty()) {
    // The search kept the best with the user's fixed parts; they may be
    // what the partitioner lacks, so then one without them.
    buildable = result.bestBuildable;
    if (!buildable) {
      cost::SearchOptions restricted;
      restricted.devices = options.devices;
      restricted.globalBatch = options.globalBatch;
      restricted.keep = 1;
      restricted.target = options.target;
      restricted.progress = nullptr;
      restricted.admit = [](const cost::Strategy &s) {
        return partitionerLacks(s, cost::Placement::Partitioner).empty();
      };
      restricted.partitionerPlacementOnly = true;
      cost::SearchResult other = cost::searchGraphPlans(searchGraphsFor(restricted), *cluster, restricted);
      if (!other.best.empty())
        buildable = std::move(other.best.front());
    }
  }
  if (!request.quiet) {
    printReport(model, request.precision, *cluster, &result, winner, graph);
    if (buildable)
      llvm::errs() << "buildable: the best plan the partitioner runs today is "
                   << buildable->strategy.str()
                   << ", microbatch size " << buildable->microbatchSize << ": "
                   << cost::explainLoss(*buildable, winner) << "\n";
    else if (!partitionerLacks(winner.strategy, winner.placement).empty())
      llvm::errs() << "buildable: no plan the partitioner runs today fits\n";
  }
  support::Json json = planJson(model, request.precision, request.globalBatch, &result, winner, graph);
  if (buildable)
    json.asObject()["buildable_alternative"] =
        support::Json::Object{{"strategy", buildable->strategy.toJson()},
                           {"microbatch_size", buildable->microbatchSize},
                           {"step_time_s", buildable->estimate.stepTime},
                           {"why_slower", cost::explainLoss(*buildable, winner)}};
  if (!writeOutput(request.outputPath, json.dump()))
    return fail("cannot write " + request.outputPath);
  if (!request.tracePath.empty() &&
      !writePredictedTrace(request.tracePath, graph, winner, evaluatedWith ? &*evaluatedWith : nullptr, *cluster,
                           request.target, error))
    return fail("--trace: " + error);
  return 0;
}

std::optional<cost::Strategy> readExecutablePlan(const std::string &path, std::string &error) {
  std::optional<support::Json> json = readJson(path, error);
  if (!json)
    return std::nullopt;
  const support::Json *strategyJson = json->find("strategy");
  if (!strategyJson) {
    error = path + ": no strategy section";
    return std::nullopt;
  }
  std::optional<cost::Strategy> strategy = cost::Strategy::fromJson(*strategyJson, error);
  if (!strategy) {
    error = path + ": " + error;
    return std::nullopt;
  }
  if (std::string lacks = partitionerLacks(*strategy, placementOf(*json)); !lacks.empty()) {
    error = path + ": the partitioner runs " + kPartitionerRuns + " only; this plan needs " +
            lacks;
    return std::nullopt;
  }
  return strategy;
}

bool planMatchesBuiltSplit(const std::string &path, const cost::Graph &whole, const cost::Graph *tensorSplit,
                           const cost::Graph &split, int64_t tensorRanks, int64_t sequenceRanks, std::string &error) {
  std::optional<support::Json> json = readJson(path, error);
  if (!json)
    return false;
  const support::Json *strategyJson = json->find("strategy");
  std::optional<cost::Strategy> strategy =
      strategyJson ? cost::Strategy::fromJson(*strategyJson, error) : std::nullopt;
  const support::Json *shardings = json->find("shardings");
  if (!strategy || !shardings) {
    error = path + ": " + (strategy ? "no shardings section" : error);
    return false;
  }
  // The mesh's axis order does not depend on the machine.
  std::optional<cost::Cluster> cluster =
      cost::Cluster::preset("dgx-a100", 1 + int(strategy->devices() - 1) / 8);
  cost::Mesh mesh = cost::buildMesh(*strategy, *cluster);
  std::optional<cost::GraphSharding> planned = cost::shardingFromJson(*shardings, whole, mesh, error);
  std::optional<cost::GraphSharding> built =
      planned ? cost::appliedModelAxes(whole, tensorSplit, split, mesh, tensorRanks, sequenceRanks, error)
              : std::nullopt;
  if (!planned || !built) {
    error = path + ": " + error;
    return false;
  }
  for (size_t o = 0; o < whole.ops.size(); ++o)
    if ((*planned)[o] != (*built)[o]) {
      error = path + ": op " + std::to_string(o) + " (" + whole.ops[o].name +
              ") is split otherwise in the plan than the partitioner splits it; plan again with this compiler";
      return false;
    }
  return true;
}

} // namespace colossal
