//===- colossal-compile.cpp - the compiler driver -----------------------===//
//
// colossal-compile model.onnx -o DIR [--batch B --seq S] [training settings]
//   builds DIR/model_train (the training program), its weights and manifest;
// colossal-compile model.onnx --emit=mlir|raised|train [-o FILE]
//   stops after that phase and prints the program.
// A model summary goes to the standard error stream (or stdout with
// --summary-only).
//
//===----------------------------------------------------------------------===//

#include "ModelSummary.h"
#include "Planning.h"
#include "colossal/Codegen/Package.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Import/OnnxImporter.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/autodiff/MixedPrecision.h"
#include "passes/autodiff/Optimizer.h"
#include "passes/memory/ParameterReads.h"
#include "passes/memory/Recompute.h"
#include "passes/memory/Regather.h"
#include "passes/memory/TransposedOperands.h"
#include "passes/partition/Resharding.h"
#include "passes/partition/SequenceAxisParallel.h"
#include "passes/partition/SequenceParallel.h"
#include "passes/partition/TensorParallel.h"
#include "passes/plan/CostGraphBridge.h"
#include "passes/raise/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <set>
#include <tuple>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("colossal-compile options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::Required,
                               cl::cat(category));
cl::opt<std::string> outputPath("o",
                                cl::desc("The output directory for --emit=exe and source (the executable, its "
                                         "weights and manifest); the program file for the other phases "
                                         "(default: standard output)"),
                                cl::value_desc("DIR|file"), cl::init("-"), cl::cat(category));

enum class Phase { Mlir, Raised, Train, Plan, Source, Exe };
cl::opt<Phase> emit("emit",
                    cl::desc("What to produce (default: exe with -o, raised without)"),
                    cl::values(clEnumValN(Phase::Mlir, "mlir", "the imported train dialect"),
                               clEnumValN(Phase::Raised, "raised",
                                          "after raising to named ops (gelu, layer_norm, "
                                          "attention, cross_entropy, ...)"),
                               clEnumValN(Phase::Train, "train",
                                          "with @forward_backward (the loss and every trainable "
                                          "parameter's gradient, train-autodiff) and @optimizer_step "
                                          "(the fused update, train-optimizer)"),
                               clEnumValN(Phase::Plan, "plan",
                                          "the searched plan for --gpus N and the global --batch B, as "
                                          "JSON (-o FILE or standard output), with a report"),
                               clEnumValN(Phase::Source, "source",
                                          "DIR/train_step.cpp, weights.safetensors and manifest.json, not built"),
                               clEnumValN(Phase::Exe, "exe", "all of source, and DIR/model_train built")),
                    cl::init(Phase::Raised), cl::cat(category));

cl::opt<std::string> target("target", cl::desc("Where the program runs: cpu (host C++; default) or cuda"),
                            cl::init("cpu"), cl::cat(category));
cl::opt<int64_t> gpus("gpus",
                      cl::desc("Ranks to train on (default 1); more than one trains data parallel under "
                               "mpirun -np N, --batch being the global batch"),
                      cl::init(1), cl::cat(category));
cl::opt<std::string> precision("precision",
                                cl::desc("fp32 (default), bf16 or fp16: matmuls, convolutions and attention "
                                         "compute in 16 bits, norms, softmax and the loss in float32, over "
                                         "float32 master weights; fp16 scales its loss dynamically"),
                                cl::init("fp32"),
                               cl::cat(category));
cl::opt<std::string> optimizer("optimizer", cl::desc("lamb (default), adamw, sgd or lars"), cl::init("lamb"),
                               cl::cat(category));
cl::opt<double> lr("lr", cl::desc("Peak learning rate (default 1e-3)"), cl::init(1e-3), cl::cat(category));
cl::opt<double> weightDecay("weight-decay", cl::desc("Decoupled weight decay (default 0.01)"), cl::init(0.01),
                            cl::cat(category));
cl::opt<double> beta1("beta1", cl::desc("LAMB/AdamW first-moment decay (default 0.9)"), cl::init(0.9),
                      cl::cat(category));
cl::opt<double> beta2("beta2", cl::desc("LAMB/AdamW second-moment decay (default 0.999)"), cl::init(0.999),
                      cl::cat(category));
cl::opt<double> eps("eps", cl::desc("LAMB/AdamW epsilon (default 1e-6 for LAMB, 1e-8 for AdamW)"),
                    cl::cat(category));
cl::opt<double> momentum("momentum", cl::desc("SGD/LARS momentum (default 0.9)"), cl::init(0.9), cl::cat(category));
cl::opt<bool> nesterov("nesterov", cl::desc("Nesterov momentum for SGD"), cl::cat(category));
cl::opt<double> clipGradNorm("clip-grad-norm", cl::desc("Clip the global gradient norm to X (default 0: off)"),
                             cl::init(0.0), cl::cat(category));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warm-up steps (default 0)"), cl::init(0),
                             cl::cat(category));
cl::opt<std::string> schedule("schedule",
                              cl::desc("After warm-up: constant (default), cosine, linear or polynomial decay"),
                              cl::init("constant"), cl::cat(category));
cl::opt<int64_t> steps("steps", cl::desc("Default number of steps of the program (default 10)"), cl::init(10),
                       cl::cat(category));
cl::opt<int64_t> microbatches("microbatches",
                              cl::desc("Microbatches per step, gradients accumulated (default 1); --batch is "
                                       "the global batch"),
                              cl::init(1), cl::cat(category));

cl::opt<int64_t> batch("batch", cl::desc("Bind dynamic dimensions named like 'batch' to N"),
                       cl::value_desc("N"), cl::cat(category));
cl::opt<int64_t> seq("seq", cl::desc("Bind dynamic dimensions named like 'seq' to N"),
                     cl::value_desc("N"), cl::cat(category));
cl::list<std::string> bind("bind", cl::desc("Bind the dynamic dimension NAME to VALUE"),
                           cl::value_desc("NAME=VALUE"), cl::cat(category));
cl::opt<std::string> trainableFile(
    "trainable",
    cl::desc("Exactly these parameters are trainable (file: one name per line); graph inputs "
             "named here are shape-only parameters"),
    cl::value_desc("file"), cl::cat(category));
cl::list<std::string> frozen("frozen", cl::desc("Freeze these parameters"),
                             cl::value_desc("NAME,..."), cl::CommaSeparated, cl::cat(category));
cl::opt<std::string> strategyText(
    "strategy",
    cl::desc("Fix parts of the plan (dp=4,tp=2,microbatches=2,zero=1,...); --emit=plan searches the rest, "
             "-o DIR builds it if the partitioner can run it (tp=N: the MLP and attention blocks and the vocabulary split)"),
    cl::value_desc("SPEC"), cl::cat(category));
cl::opt<std::string> planFile("plan",
                              cl::desc("A plan written by --emit=plan: re-evaluated with --emit=plan, built "
                                       "with -o DIR"),
                              cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string> clusterName("cluster",
                                 cl::desc("The machine plans are for: dgx-a100 (default), dgx-h100, h200-node, "
                                          "or a colossal-cluster/1 JSON file"),
                                 cl::value_desc("NAME|FILE"), cl::init("dgx-a100"), cl::cat(category));
cl::opt<bool> summaryOnly("summary-only", cl::desc("Print the model summary only, to stdout"),
                          cl::cat(category));
cl::opt<bool> quiet("quiet", cl::desc("Do not print the model summary"), cl::cat(category));

void printError(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "colossal-compile") << message << "\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "colossal-compile: ONNX training graphs to distributed training "
                              "programs\n");

  bool toDirectory = emit.getNumOccurrences() ? (emit == Phase::Source || emit == Phase::Exe) : outputPath != "-";
  Phase phase = emit.getNumOccurrences() ? Phase(emit) : (toDirectory ? Phase::Exe : Phase::Raised);
  if (toDirectory && outputPath == "-") {
    printError("--emit=exe and --emit=source write a directory: give -o DIR");
    return 1;
  }
  if (gpus < 1) {
    printError("--gpus must be at least 1");
    return 1;
  }
  if (microbatches < 1) {
    printError("--microbatches must be at least 1");
    return 1;
  }
  for (const auto &[flag, value, allowed] :
       {std::tuple<const char *, std::string, const char *>{"--optimizer", optimizer, "lamb,adamw,sgd,lars"},
        {"--schedule", schedule, "constant,cosine,linear,polynomial"},
        {"--target", target, "cpu,cuda"},
        {"--precision", precision, "fp32,bf16,fp16"}}) {
    llvm::SmallVector<llvm::StringRef> names;
    llvm::StringRef(allowed).split(names, ',');
    if (!llvm::is_contained(names, value)) {
      printError(std::string(flag) + " " + value + ": expected one of " + allowed);
      return 1;
    }
  }

  colossal::ImportOptions options;
  if (seq.getNumOccurrences())
    options.seq = seq;
  for (const std::string &binding : bind) {
    auto [name, value] = llvm::StringRef(binding).split('=');
    int64_t size;
    if (name.empty() || value.getAsInteger(10, size) || size <= 0) {
      printError("--bind expects NAME=POSITIVE_INTEGER, got '" + binding + "'");
      return 1;
    }
    options.bindings[name.str()] = size;
  }
  if (!trainableFile.empty()) {
    std::string error;
    options.trainable = colossal::readNameList(trainableFile, error);
    if (!options.trainable) {
      printError("--trainable: " + error);
      return 1;
    }
  }
  options.frozen.assign(frozen.begin(), frozen.end());

  MLIRContext context;
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      printError(diag.str());
    else
      llvm::errs() << diag.str() << "\n";
    for (Diagnostic &note : diag.getNotes())
      llvm::errs() << "  note: " << note.str() << "\n";
    return success();
  });

  // What the search needs, for --emit=plan and for a build without a plan.
  colossal::PlanRequest request;
  request.inputPath = inputPath;
  request.outputPath = outputPath;
  request.planPath = planFile;
  request.strategy = strategyText;
  request.cluster = clusterName;
  request.import = options;
  request.gpus = gpus;
  request.globalBatch = batch.getNumOccurrences() ? int64_t(batch) : 0;
  request.quiet = quiet;
  request.precision = precision;
  if (phase == Phase::Plan) {
    if (!batch.getNumOccurrences() && planFile.empty()) {
      printError("--emit=plan needs --batch B, the global batch over all devices");
      return 1;
    }
    return colossal::runPlanning(context, request);
  }

  // --gpus N and a global batch are the whole interface: without a plan or
  // strategy, the search picks the best plan the partitioner can run
  // (ZeRO, offload, recomputation and microbatches where they pay; tensor
  // or sequence parallelism where the batch does not cover the devices).
  if (toDirectory && gpus > 1 && planFile.empty() && strategyText.empty() && batch.getNumOccurrences() &&
      !microbatches.getNumOccurrences()) {
    std::optional<colossal::cost::Strategy> chosen;
    request.chosen = &chosen;
    if (colossal::runPlanning(context, request) != 0 || !chosen)
      return 1;
    strategyText = chosen->str();
  }

  // The ranks and microbatches come from --gpus and --microbatches, or from
  // a plan or strategy the partitioner can run.
  int64_t ranks = gpus, microbatchCount = microbatches, zeroStage = 0, tensorRanks = 1;
  bool offloadOptimizer = false, sequenceParallel = false;
  // "none", "selective" or "full" (passes/memory/Recompute.h).
  std::string recompute = "none";
  // Sequence parallelism on its own axis (all-to-all or ring): the model
  // axis is `sp`, of tensorRanks ranks, instead of the tensor axis.
  std::optional<colossal::partition::SequenceAlgorithm> sequenceAxis;
  if (!planFile.empty() || !strategyText.empty()) {
    std::string error;
    std::set<std::string> keys;
    std::optional<colossal::cost::Strategy> strategy =
        !planFile.empty() ? colossal::readExecutablePlan(planFile, error)
                          : colossal::cost::Strategy::parse(strategyText, error, &keys);
    if (strategy && strategy->tp > 1) {
      // --strategy tp=N (or a plan with the partitioner's tensor placement):
      // Megatron's split of the MLP and attention blocks and of the
      // vocabulary, on its own or with data parallelism.
      if (strategy->tpMode != colossal::cost::TensorMode::OneD) {
        printError("--strategy: tp=" + std::to_string(strategy->tp) +
                   " runs as 1D tensor parallelism of the MLP and attention blocks and the vocabulary; other tensor modes are "
                   "planned, not built (drop tp_mode)");
        return 1;
      }
      tensorRanks = strategy->tp;
      strategy->tp = 1;
      // Megatron's sequence parallelism rides on the tensor axis.
      if (strategy->spMode == colossal::cost::SequenceMode::Megatron && strategy->sp == 1) {
        sequenceParallel = true;
        strategy->spMode = colossal::cost::SequenceMode::None;
      }
    }
    if (strategy && strategy->sp > 1 &&
        (strategy->spMode == colossal::cost::SequenceMode::AllToAll ||
         strategy->spMode == colossal::cost::SequenceMode::Ring)) {
      // --strategy sp=N,sp_mode=all-to-all|ring: every rank of the sequence
      // axis holds the model and its tokens; attention trades tokens for
      // heads, or passes keys and values around the ring.
      sequenceAxis = strategy->spMode == colossal::cost::SequenceMode::Ring
                         ? colossal::partition::SequenceAlgorithm::Ring
                         : colossal::partition::SequenceAlgorithm::AllToAll;
      if (tensorRanks > 1) {
        printError(std::string("--strategy: sp_mode=") + colossal::partition::nameOf(*sequenceAxis) +
                   " runs on its own sequence axis, not with tp=N yet (drop tp, or use sp_mode=megatron on the "
                   "tensor axis)");
        return 1;
      }
      tensorRanks = strategy->sp;
      strategy->sp = 1;
      strategy->spMode = colossal::cost::SequenceMode::None;
    }
    if (strategy && planFile.empty()) {
      if (std::string lacks = colossal::partitionerLacks(*strategy); !lacks.empty()) {
        error = "the partitioner runs data parallelism, 1D tensor parallelism (tp=N, with Megatron's sequence "
                "parallelism: sp_mode=megatron), sequence parallelism on its own axis (sp=N,sp_mode=all-to-all|ring), "
                "microbatches, ZeRO 1, 2 and 3, optimizer offload and recomputation (full or selective) only; --strategy "
                "asks for " +
                lacks;
        if (strategy->spMode == colossal::cost::SequenceMode::Megatron && strategy->tp == 1 && tensorRanks == 1)
          error += " (sp_mode=megatron splits the tokens over the tensor axis: add tp=N)";
        strategy.reset();
      }
    }
    if (!strategy) {
      printError((planFile.empty() ? "--strategy: " : "--plan ") + error);
      return 1;
    }
    bool fromPlan = !planFile.empty();
    if (fromPlan || keys.count("dp")) {
      if (gpus.getNumOccurrences() && gpus != strategy->dp * tensorRanks) {
        printError("--gpus " + std::to_string(gpus) + " but the " + (fromPlan ? "plan" : "strategy") +
                   " has dp=" + std::to_string(strategy->dp) +
                   (tensorRanks > 1 ? std::string(sequenceAxis ? " x sp=" : " x tp=") +
                                          std::to_string(tensorRanks)
                                    : std::string()));
        return 1;
      }
      ranks = strategy->dp;
    } else if (tensorRanks > 1) {
      // The GPUs the tensor axis leaves are data-parallel ranks.
      if (gpus.getNumOccurrences() && gpus % tensorRanks != 0) {
        printError("--gpus " + std::to_string(gpus) + " does not divide into " + (sequenceAxis ? "sp=" : "tp=") +
                   std::to_string(tensorRanks));
        return 1;
      }
      ranks = gpus.getNumOccurrences() ? gpus / tensorRanks : 1;
    }
    if (fromPlan || keys.count("microbatches")) {
      if (microbatches.getNumOccurrences() && microbatches != strategy->microbatches) {
        printError("--microbatches " + std::to_string(microbatches) + " but the " +
                   (fromPlan ? "plan" : "strategy") + " has microbatches=" + std::to_string(strategy->microbatches));
        return 1;
      }
      microbatchCount = strategy->microbatches;
    }
    zeroStage = strategy->zero;
    offloadOptimizer = strategy->offloadOptimizer;
    recompute = strategy->recompute == colossal::cost::Recompute::Full        ? "full"
                : strategy->recompute == colossal::cost::Recompute::Selective ? "selective"
                                                                               : "none";
    if (offloadOptimizer && zeroStage == 0 && ranks > 1) {
      // Each rank offloads its ZeRO shard; replicated state would be
      // updated N times on N hosts.
      printError("--strategy: optimizer offload on " + std::to_string(ranks) +
                 " ranks moves each rank's ZeRO shard of the optimizer to its host; add zero=1, 2 or 3");
      return 1;
    }
  }
  if (batch.getNumOccurrences()) {
    if (batch % (microbatchCount * ranks) != 0) {
      printError("--batch " + std::to_string(batch) + " does not divide into " + std::to_string(ranks) +
                 " rank(s) x " + std::to_string(microbatchCount) + " microbatch(es)");
      return 1;
    }
    // The step is compiled for one microbatch of one rank; each of the N
    // data-parallel ranks runs M of them.
    options.batch = batch / (microbatchCount * ranks);
  }

  OwningOpRef<ModuleOp> module = colossal::importOnnxFile(context, inputPath, options);
  if (!module)
    return 1;

  if (phase != Phase::Mlir) {
    PassManager pm(&context);
    colossal::train::buildRaisePipeline(pm);
    if (failed(pm.run(*module))) {
      printError("raising failed on " + inputPath);
      return 1;
    }
  }
  // The model's graph before the model axis (tensor or sequence) splits it.
  std::optional<colossal::cost::Graph> wholeGraph;
  if (phase != Phase::Mlir && phase != Phase::Raised && tensorRanks > 1) {
    if (FailureOr<colossal::cost::Graph> g =
            colossal::plan::buildCostGraph(module->lookupSymbol<func::FuncOp>("forward"));
        succeeded(g))
      wholeGraph = std::move(*g);
  }
  if (phase != Phase::Mlir && phase != Phase::Raised && sequenceAxis) {
    std::string mode = "sp=" + std::to_string(tensorRanks) + ",sp_mode=" + colossal::partition::nameOf(*sequenceAxis);
    FailureOr<colossal::partition::SequenceAxisSummary> sequence =
        colossal::partition::applySequenceAxisParallelism(*module, tensorRanks, *sequenceAxis);
    if (failed(sequence)) {
      printError(mode + " failed on " + inputPath + " (see the error above)");
      return 1;
    }
    if (!quiet) {
      llvm::errs() << "colossal-compile: " << mode << ": " << sequence->inputs << " inputs split by tokens, "
                   << sequence->splitValues << " activations on each rank's tokens, " << sequence->attentions
                   << " attention layers ";
      if (*sequenceAxis == colossal::partition::SequenceAlgorithm::AllToAll)
        llvm::errs() << "on each rank's heads (" << sequence->allToAlls << " all-to-alls), ";
      else
        llvm::errs() << "with keys and values passed around the ring, ";
      llvm::errs() << sequence->copies << " replicated operands summed over the ranks' tokens, "
                   << sequence->rankSlices << " cut to the rank's tokens, " << sequence->gathers << " masks gathered\n";
    }
  }
  if (phase != Phase::Mlir && phase != Phase::Raised && tensorRanks > 1 && !sequenceAxis) {
    FailureOr<colossal::partition::TensorParallelSummary> split =
        colossal::partition::partitionTensorParallel(*module, tensorRanks);
    if (failed(split)) {
      printError("tp=" + std::to_string(tensorRanks) + " failed on " + inputPath + " (see the error above)");
      return 1;
    }
    if (!quiet) {
      const colossal::partition::VocabularySummary &vocabulary = split->vocabulary;
      llvm::errs() << "colossal-compile: tp=" << tensorRanks << ": " << split->pairs
                   << " column-then-row blocks split (MLP and attention), " << vocabulary.tables
                   << " vocabulary tables split by rows (" << vocabulary.lookups << " lookups, "
                   << vocabulary.outputLayers << " output layers), " << split->splitParameters
                   << " parameters sliced; the rest replicated\n";
      for (const std::string &padded : vocabulary.padded)
        llvm::errs() << "colossal-compile: note: tp=" << tensorRanks << " pads a vocabulary with rows of zeros: "
                     << padded << " (the weights file and checkpoints hold the padded table)\n";
      for (const std::string &whole : vocabulary.whole)
        llvm::errs() << "colossal-compile: note: tp=" << tensorRanks << " keeps a vocabulary table whole: " << whole
                     << "\n";
    }
    if (sequenceParallel) {
      FailureOr<colossal::partition::SequenceParallelSummary> sequence =
          colossal::partition::applySequenceParallelism(*module);
      if (failed(sequence)) {
        printError("sp_mode=megatron failed on " + inputPath + " (see the error above)");
        return 1;
      }
      if (!quiet)
        llvm::errs() << "colossal-compile: sp_mode=megatron: " << sequence->splitValues
                     << " activations between the blocks on each rank's tokens (" << sequence->gathers
                     << " all-gathers at block entries, " << sequence->scatters << " reduce-scatters at exits, "
                     << sequence->rankSlices << " replicated inputs cut to the rank's tokens)\n";
    }
  }
  // One rank's graph after the split, to read the split back (the package
  // has the cost model predict the tensor axis's collectives from it).
  std::optional<colossal::cost::Graph> splitGraph;
  if (wholeGraph) {
    if (FailureOr<colossal::cost::Graph> g =
            colossal::plan::buildCostGraph(module->lookupSymbol<func::FuncOp>("forward"));
        succeeded(g))
      splitGraph = std::move(*g);
    // A plan's tensor placement must be the split just made.
    std::string error;
    if (!planFile.empty() && splitGraph &&
        !colossal::planMatchesBuiltSplit(planFile, *wholeGraph, *splitGraph, sequenceAxis ? "sp" : "tp", tensorRanks,
                                         error)) {
      printError("--plan " + error);
      return 1;
    }
  }
  if (phase != Phase::Mlir && phase != Phase::Raised &&
      failed(colossal::autodiff::applyMixedPrecision(*module, precision))) {
    printError("--precision " + precision + " failed on " + inputPath + " (see the error above)");
    return 1;
  }
  if (phase != Phase::Mlir && phase != Phase::Raised &&
      failed(colossal::autodiff::buildForwardBackward(*module, /*lossScaleArgument=*/precision == "fp16"))) {
    printError("differentiating " + inputPath + " failed (see the error above)");
    return 1;
  }
  if (phase != Phase::Mlir && phase != Phase::Raised) {
    colossal::autodiff::OptimizerOptions o;
    o.kind = optimizer, o.beta1 = beta1, o.beta2 = beta2, o.weightDecay = weightDecay;
    o.eps = eps.getNumOccurrences() ? double(eps) : -1.0;
    o.momentum = momentum, o.nesterov = nesterov;
    if (failed(colossal::autodiff::buildOptimizerStep(*module, o))) {
      printError("building the " + optimizer + " step failed (see the error above)");
      return 1;
    }
    // The partitioning said how values lie on the mesh (train.reshard);
    // differentiated, the reshardings become the collectives of their
    // cheapest plans, the ones the cost model priced.
    if (failed(colossal::partition::lowerResharding(*module))) {
      printError("lowering the reshardings of " + inputPath + " failed (see the error above)");
      return 1;
    }
    // Full recomputation first: the re-run layers read weights too, and
    // ZeRO-3's second reads below serve them.
    if (recompute != "none") {
      FailureOr<colossal::memory::RecomputeSummary> recomputed = colossal::memory::recomputeLayers(
          *module, recompute == "full" ? colossal::memory::Granularity::Full
                                       : colossal::memory::Granularity::Selective);
      if (failed(recomputed)) {
        printError("recompute=" + recompute + " failed on " + inputPath + " (see the error above)");
        return 1;
      }
      if (!quiet)
        llvm::errs() << "colossal-compile: recompute=" << recompute << ": " << recomputed->layers << " layers, "
                     << recomputed->recomputedOps << " forward ops re-run in the backward pass"
                     << (recompute == "selective" ? " (the contractions' results kept)" : "") << "\n";
    }
    // Megatron sequence parallelism keeps each block's input shard and
    // gathers it again for the weight gradients (after recomputation, whose
    // re-run ops read the gathered inputs too).
    if (sequenceParallel) {
      FailureOr<int64_t> regathered = colossal::memory::regatherForBackward(*module, "tp");
      if (failed(regathered)) {
        printError("scheduling sp_mode=megatron's gathers failed (see the error above)");
        return 1;
      }
      if (!quiet)
        llvm::errs() << "colossal-compile: sp_mode=megatron: " << *regathered
                     << " block inputs gathered again for the backward pass (the shards are kept, not the gathered "
                        "tensors)\n";
    }
    // The backward pass reads each weight again and re-runs its views
    // (transposes, reshapes, casts) rather than holding the forward's views
    // across the step: a weight-sized copy per layer otherwise. Under ZeRO-3
    // each read is a gather, so the weight itself is not held either.
    if (failed(colossal::memory::rereadParametersForBackward(*module))) {
      printError("scheduling the weights' reads for the backward pass failed (see the error above)");
      return 1;
    }
    // Products read their operands transposed in place (train.gemm's
    // flags): a weight gradient is one product in the weight's layout,
    // without copying the layer's input or the gradient transposed.
    if (failed(colossal::memory::foldTransposesIntoProducts(*module))) {
      printError("folding the backward pass's transposes into its products failed (see the error above)");
      return 1;
    }
  }

  if (summaryOnly) {
    colossal::printModelSummary(*module, inputPath, llvm::outs());
    return 0;
  }
  if (!quiet)
    colossal::printModelSummary(*module, inputPath, llvm::errs());

  if (toDirectory) {
    colossal::codegen::PackageOptions package;
    package.directory = outputPath;
    package.onnxPath = inputPath;
    package.target = target;
    package.precision = precision;
    package.build = phase == Phase::Exe;
    colossal::codegen::ProgramSettings &s = package.settings;
    s.model = llvm::sys::path::stem(inputPath).str();
    s.target = target;
    s.lr = lr, s.clipGradNorm = clipGradNorm, s.warmupSteps = warmupSteps;
    s.schedule = schedule, s.steps = steps, s.microbatches = microbatchCount, s.ranks = ranks;
    s.tensorRanks = tensorRanks;
    s.zero = zeroStage;
    s.offloadOptimizer = offloadOptimizer;
    s.recompute = recompute;
    s.unsplitGraph = std::move(wholeGraph);
    s.splitGraph = std::move(splitGraph);
    s.sequenceMode = sequenceAxis ? (*sequenceAxis == colossal::partition::SequenceAlgorithm::Ring
                                         ? colossal::cost::SequenceMode::Ring
                                         : colossal::cost::SequenceMode::AllToAll)
                     : sequenceParallel ? colossal::cost::SequenceMode::Megatron
                                        : colossal::cost::SequenceMode::None;
    if (failed(colossal::codegen::writePackage(*module, package)))
      return 1;
    llvm::errs() << "colossal-compile: wrote " << outputPath << (package.build ? "/model_train" : "/train_step.cpp")
                 << " (" << target << ", " << precision << ", " << optimizer << "); run "
                 << (package.build ? outputPath + "/model_train --help" : std::string("with --emit=exe to build"))
                 << "\n";
    return 0;
  }

  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output) {
    printError(error);
    return 1;
  }
  module->print(output->os());
  output->keep();
  return 0;
}
