//===- colossal-compile.cpp - the compiler driver -----------------------===//
//
// colossal-compile model.onnx -o DIR [--batch B --seq S] [training settings]
//   builds DIR/model_train (the training program), its weights and manifest;
// colossal-compile model.onnx --emit=mlir|raised|partitioned|train [-o FILE]
//   stops after that stage of the training pipeline (TrainingPipeline.h)
//   and prints the program.
// A model summary goes to the standard error stream (or stdout with
// --summary-only).
//
//===----------------------------------------------------------------------===//

#include "BuildLayout.h"
#include "Flags.h"
#include "ModelSummary.h"
#include "PhaseProgress.h"
#include "Planning.h"
#include "colossal/Codegen/Package.h"
#include "colossal/Import/OnnxImporter.h"
#include "passes/partition/TensorParallel.h"
#include "passes/pipeline/TrainingPipeline.h"
#include "passes/plan/CostGraphBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace mlir;
using namespace colossal;
using namespace colossal::driver;
using pipeline::Stage;

namespace {

/// "node 'NAME': " for an error on an op imported from the ONNX node NAME
/// (its location), so a pass's refusal names where in the model it is.
std::string nodeOf(Location loc) {
  std::string name;
  loc->walk([&](Location inner) {
    if (auto named = llvm::dyn_cast<NameLoc>(inner)) {
      name = named.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name.empty() ? "" : "node '" + name + "': ";
}

/// The last pipeline stage a run needs.
Stage lastStage(Emit emit) {
  switch (emit) {
  case Emit::Mlir:
    return Stage::Imported;
  case Emit::Raised:
    return Stage::Raised;
  case Emit::Partitioned:
    return Stage::Partitioned;
  default:
    return Stage::Train;
  }
}

/// Runs the pipeline's stages after `from` up to `to`, each pass timed
/// under `timing`.
/// What a terminal's progress line calls the stages up to `to`.
const char *doing(Stage to) {
  switch (to) {
  case Stage::Raised:
    return "raising the graph";
  case Stage::Partitioned:
    return "partitioning";
  default:
    return "differentiating, adding the optimizer, planning memory";
  }
}

bool runStages(ModuleOp module, const pipeline::TrainingPipelineOptions &options, Stage from, Stage to,
               const std::string &inputPath, TimingScope &timing, PhaseProgress &progress) {
  if (to <= from)
    return true;
  progress.show(doing(to));
  PassManager pm(module.getContext());
  pipeline::buildTrainingPipeline(pm, options, to, from);
  TimingScope stages = timing.nest(pipeline::nameOf(to));
  pm.enableTiming(stages);
  if (succeeded(pm.run(module)))
    return true;
  printError(std::string("compiling ") + inputPath + " failed in the " + pipeline::nameOf(to) +
             " stage (see the error above)");
  return false;
}

std::optional<cost::Graph> forwardGraph(ModuleOp module) {
  FailureOr<cost::Graph> graph = plan::buildCostGraph(module.lookupSymbol<func::FuncOp>("forward"));
  return succeeded(graph) ? std::optional<cost::Graph>(std::move(*graph)) : std::nullopt;
}

/// One rank's graph of `module` split over `ranks` tensor ranks alone (a
/// copy; the module itself is split by the pipeline): where a sequence axis
/// follows, the package reads each axis's split from the graph before it.
std::optional<cost::Graph> tensorSplitOf(ModuleOp module, int64_t ranks) {
  OwningOpRef<ModuleOp> copy = module.clone();
  // The pipeline's own run reports the partitioner's errors.
  ScopedDiagnosticHandler quiet(module.getContext(), [](Diagnostic &) { return success(); });
  if (failed(partition::partitionTensorParallel(*copy, ranks)))
    return std::nullopt;
  return forwardGraph(*copy);
}

/// What the package needs beyond the module (whose dist.plan says how the
/// step is split).
codegen::PackageOptions packageOptions(const Request &r) {
  codegen::PackageOptions package;
  package.directory = r.outputPath, package.onnxPath = r.inputPath;
  package.target = r.target, package.precision = r.precision;
  package.build = r.emit == Emit::Exe;
  codegen::ProgramSettings &s = package.settings;
  s.model = llvm::sys::path::stem(r.inputPath).str();
  s.target = r.target;
  s.lr = r.lr, s.clipGradNorm = r.clipGradNorm, s.warmupSteps = r.warmupSteps;
  s.schedule = r.schedule, s.steps = r.steps;
  s.initStd = r.initStd;
  return package;
}

int printModule(ModuleOp module, const std::string &path) {
  std::string error;
  auto output = openOutputFile(path, &error);
  if (!output) {
    printError(error);
    return 1;
  }
  module.print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

} // namespace

/// The importer folds masks and tables of a million elements once per
/// microbatch size the search tries; freed memory kept in the heap for the
/// next import, not returned to the system and faulted in again, takes a
/// GPT-2 124M export's plan from 5.3 s to 3.1 s.
static void keepFreedMemoryForReuse() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  keepFreedMemoryForReuse();
  std::optional<Request> request = parseCommandLine(argc, argv);
  if (!request)
    return 1;
  const Request &r = *request;

  MLIRContext context;
  context.printOpOnDiagnostic(false);
  // Errors name the op and reason; remarks are the passes' reports.
  PhaseProgress *shown = nullptr;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (shown)
      shown->clear();
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      printError(nodeOf(diag.getLocation()) + diag.str());
    else if (diag.getSeverity() == DiagnosticSeverity::Remark)
      llvm::errs() << "colossal-compile: " << diag.str() << "\n";
    else
      llvm::errs() << diag.str() << "\n";
    for (Diagnostic &note : diag.getNotes())
      llvm::errs() << "  note: " << note.str() << "\n";
    return success();
  });

  // On a terminal, the phase under way; cleared before anything is printed.
  PhaseProgress progress(true);
  shown = &progress;
  // --time-phases: the report is printed when the manager goes out of scope.
  DefaultTimingManager timingManager;
  timingManager.setEnabled(r.timePhases);
  TimingScope timing = timingManager.getRootScope();

  // What the search needs, for --emit=plan and for a build without a plan.
  PlanRequest planning;
  planning.inputPath = r.inputPath, planning.outputPath = r.outputPath, planning.planPath = r.planFile;
  planning.strategy = r.strategy, planning.cluster = r.cluster, planning.import = r.import;
  planning.gpus = r.gpus, planning.globalBatch = r.batch.value_or(0);
  planning.quiet = r.quiet, planning.precision = r.precision, planning.tracePath = r.traceFile;
  planning.timing = &timing;
  planning.buildableOnly = r.buildableOnly;
  planning.target = r.hostProgram ? cost::ProgramTarget::Host : cost::ProgramTarget::Cuda;
  if (r.emit == Emit::Plan)
    return runPlanning(context, planning);

  // --gpus N and a global batch are the whole interface: without a plan or
  // strategy, the search picks the best plan the partitioner can run.
  std::string strategy = r.strategy;
  if (r.toDirectory && r.gpus > 1 && r.planFile.empty() && r.strategy.empty() && r.batch && !r.microbatchesGiven) {
    std::optional<cost::Strategy> chosen;
    planning.chosen = &chosen;
    TimingScope search = timing.nest("plan search");
    planning.timing = &search;
    if (runPlanning(context, planning) != 0 || !chosen)
      return 1;
    search.stop();
    strategy = chosen->str();
  }
  std::optional<BuildLayout> layout = resolveBuildLayout(r, strategy);
  if (!layout)
    return 1;

  ImportOptions importOptions = r.import;
  if (layout->stepBatch)
    importOptions.batch = *layout->stepBatch;
  TimingScope importing = timing.nest("import");
  progress.show("importing " + r.inputPath);
  OwningOpRef<ModuleOp> module = importOnnxFile(context, r.inputPath, importOptions);
  progress.clear();
  if (!module)
    return 1;
  importing.stop();

  pipeline::TrainingPipelineOptions options;
  fillPipelineOptions(r, *layout, options);
  Stage last = lastStage(r.emit);
  if (!runStages(*module, options, Stage::Imported, std::min(last, Stage::Raised), r.inputPath, timing, progress))
    return 1;
  // The model's graph before and after the model axes split it (and after
  // the tensor split alone when a sequence axis follows): the package
  // predicts the axes' collectives from them, and a plan's placement must be
  // the split made.
  std::optional<cost::Graph> wholeGraph, tensorSplitGraph, splitGraph;
  // (Not yet for a tensor grid, whose manifest predicts the data axis only.)
  if (last >= Stage::Partitioned && layout->modelRanks() > 1 && !layout->tensorGrid) {
    wholeGraph = forwardGraph(*module);
    if (layout->tensorRanks > 1 && layout->sequenceRanks > 1)
      tensorSplitGraph = tensorSplitOf(*module, layout->tensorRanks);
  }
  if (!runStages(*module, options, Stage::Raised, std::min(last, Stage::Partitioned), r.inputPath, timing, progress))
    return 1;
  if (wholeGraph) {
    splitGraph = forwardGraph(*module);
    std::string error;
    if (!r.planFile.empty() && splitGraph &&
        !planMatchesBuiltSplit(r.planFile, *wholeGraph, tensorSplitGraph ? &*tensorSplitGraph : nullptr, *splitGraph,
                               layout->tensorRanks, layout->sequenceRanks, error)) {
      printError("--plan " + error);
      return 1;
    }
  }
  if (!runStages(*module, options, Stage::Partitioned, last, r.inputPath, timing, progress))
    return 1;
  progress.clear();

  if (r.summaryOnly) {
    printModelSummary(*module, r.inputPath, llvm::outs());
    return 0;
  }
  if (!r.quiet)
    printModelSummary(*module, r.inputPath, llvm::errs());
  if (!r.toDirectory)
    return printModule(*module, r.outputPath);

  codegen::PackageOptions package = packageOptions(r);
  package.timing = &timing;
  package.onPhase = [&](const std::string &phase) { progress.show(phase); };
  package.settings.unsplitGraph = std::move(wholeGraph);
  package.settings.tensorSplitGraph = std::move(tensorSplitGraph);
  package.settings.splitGraph = std::move(splitGraph);
  if (failed(codegen::writePackage(*module, package)))
    return 1;
  progress.clear();
  llvm::errs() << "colossal-compile: wrote " << r.outputPath << (package.build ? "/model_train" : "/train_step.cpp")
               << " (" << r.target << ", " << r.precision << ", " << r.optimizer << "); run "
               << (package.build ? r.outputPath + "/model_train --help" : std::string("with --emit=exe to build"))
               << "\n";
  return 0;
}
