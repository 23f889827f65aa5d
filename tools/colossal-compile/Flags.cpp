//===- Flags.cpp - colossal-compile's command line, read and checked ------===//

#include "Flags.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <tuple>

namespace cl = llvm::cl;

namespace colossal::driver {

namespace {

cl::OptionCategory category("colossal-compile options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::Required, cl::cat(category));
cl::opt<std::string> outputPath("o",
                                cl::desc("The output directory for --emit=exe and source (the executable, its "
                                         "weights and manifest); the program file for the other phases "
                                         "(default: standard output)"),
                                cl::value_desc("DIR|file"), cl::init("-"), cl::cat(category));

cl::opt<Emit> emit("emit", cl::desc("What to produce (default: exe with -o, raised without)"),
                   cl::values(clEnumValN(Emit::Mlir, "mlir", "the imported train dialect"),
                              clEnumValN(Emit::Raised, "raised",
                                         "after raising to named ops (gelu, layer_norm, "
                                         "attention, cross_entropy, ...)"),
                              clEnumValN(Emit::Partitioned, "partitioned",
                                         "after the model axis split of @forward (tp=N, sp=N, "
                                         "sp_mode=megatron; colossal-opt --training-pipeline with "
                                         "stop-after=partitioned)"),
                              clEnumValN(Emit::Train, "train",
                                         "with @forward_backward (the loss and every trainable "
                                         "parameter's gradient, train-autodiff) and @optimizer_step "
                                         "(the fused update, train-optimizer)"),
                              clEnumValN(Emit::Plan, "plan",
                                         "the searched plan for --gpus N and the global --batch B, as "
                                         "JSON (-o FILE or standard output), with a report"),
                              clEnumValN(Emit::Source, "source",
                                         "DIR/train_step.cpp, weights.safetensors and manifest.json, "
                                         "not built"),
                              clEnumValN(Emit::Exe, "exe", "all of source, and DIR/model_train built")),
                   cl::init(Emit::Raised), cl::cat(category));

cl::opt<std::string> target("target", cl::desc("Where the program runs: cpu (host C++; default) or cuda"),
                            cl::init("cpu"), cl::cat(category));
cl::opt<int64_t> gpus("gpus",
                      cl::desc("Ranks to train on (default 1); more than one "
                               "trains data parallel under "
                               "mpirun -np N, --batch being the global batch"),
                      cl::init(1), cl::cat(category));
cl::opt<std::string> precision("precision",
                               cl::desc("fp32 (default), bf16 or fp16: matmuls, convolutions and attention "
                                        "compute in 16 bits, norms, softmax and the loss in float32, over "
                                        "float32 master weights; fp16 scales its loss dynamically"),
                               cl::init("fp32"), cl::cat(category));
cl::opt<std::string> optimizer("optimizer", cl::desc("lamb (default), adamw, sgd or lars"), cl::init("lamb"),
                               cl::cat(category));
cl::opt<double> lr("lr", cl::desc("Peak learning rate (default 1e-3)"), cl::init(1e-3), cl::cat(category));
cl::opt<double> weightDecay("weight-decay", cl::desc("Decoupled weight decay (default 0.01)"), cl::init(0.01),
                            cl::cat(category));
cl::opt<double> beta1("beta1", cl::desc("LAMB/AdamW first-moment decay (default 0.9)"), cl::init(0.9),
                      cl::cat(category));
cl::opt<double> beta2("beta2", cl::desc("LAMB/AdamW second-moment decay (default 0.999)"), cl::init(0.999),
                      cl::cat(category));
cl::opt<double> eps("eps", cl::desc("LAMB/AdamW epsilon (default 1e-6 for LAMB, 1e-8 for AdamW)"), cl::cat(category));
cl::opt<double> momentum("momentum", cl::desc("SGD/LARS momentum (default 0.9)"), cl::init(0.9), cl::cat(category));
cl::opt<bool> nesterov("nesterov", cl::desc("Nesterov momentum for SGD"), cl::cat(category));
cl::opt<std::string>
    initSpec("init",
             cl::desc("Start from fresh weights instead of the file's (required for a shape-only model): normal[:STD] "
                      "draws matrices and embeddings from N(0, STD^2) (default 0.02), norm scales start at 1, biases "
                      "and other vectors at 0; every rank draws its own part from the run's --seed, keyed by parameter "
                      "name and element, so any plan starts from the same weights. Frozen parameters keep the file's"),
             cl::value_desc("normal[:STD]"), cl::cat(category));
cl::opt<double> clipGradNorm("clip-grad-norm", cl::desc("Clip the global gradient norm to X (default 0: off)"),
                             cl::init(0.0), cl::cat(category));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warm-up steps (default 0)"), cl::init(0),
                             cl::cat(category));
cl::opt<std::string> schedule("schedule",
                              cl::desc("After warm-up: constant (default), "
                                       "cosine, linear or polynomial decay"),
                              cl::init("constant"), cl::cat(category));
cl::opt<int64_t> steps("steps", cl::desc("Default number of steps of the program (default 10)"), cl::init(10),
                       cl::cat(category));
cl::opt<int64_t> microbatches("microbatches",
                              cl::desc("Microbatches per step, gradients accumulated (default 1); --batch is "
                                       "the global batch"),
                              cl::init(1), cl::cat(category));

cl::opt<int64_t> batch("batch", cl::desc("Bind dynamic dimensions named like 'batch' to N"), cl::value_desc("N"),
                       cl::cat(category));
cl::opt<int64_t> seq("seq", cl::desc("Bind dynamic dimensions named like 'seq' to N"), cl::value_desc("N"),
                     cl::cat(category));
cl::list<std::string> bind("bind", cl::desc("Bind the dynamic dimension NAME to VALUE"), cl::value_desc("NAME=VALUE"),
                           cl::cat(category));
cl::opt<std::string> trainableFile("trainable",
                                   cl::desc("Exactly these parameters are trainable (file: one "
                                            "name per line); graph inputs "
                                            "named here are shape-only parameters"),
                                   cl::value_desc("file"), cl::cat(category));
cl::list<std::string> frozen("frozen", cl::desc("Freeze these parameters"), cl::value_desc("NAME,..."),
                             cl::CommaSeparated, cl::cat(category));
cl::opt<std::string> strategyText("strategy",
                                  cl::desc("Fix parts of the plan (dp=4,tp=2,microbatches=2,zero=1,...); "
                                           "--emit=plan searches the rest, "
                                           "-o DIR builds it, the rest at their defaults (sp_mode=none, "
                                           "schedule=1f1b, zero=0, ...), if the partitioner can run it (tp=N: the MLP "
                                           "and attention blocks and the vocabulary split; pp=N with "
                                           "schedule=gpipe|1f1b|interleaved, virtual_stages=V, "
                                           "stage_layers=a/b/...: pipeline stages)"),
                                  cl::value_desc("SPEC"), cl::cat(category));
cl::opt<std::string> planFile("plan",
                              cl::desc("A plan written by --emit=plan: re-evaluated with --emit=plan, built "
                                       "with -o DIR"),
                              cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string> traceFile("trace",
                               cl::desc("With --emit=plan: write the plan's predicted step, every pipeline rank's "
                                        "forward and backward calls and what follows them, as Chrome-trace JSON "
                                        "(a pipelined program's --trace writes the measured one with the same "
                                        "names)"),
                               cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string> clusterName("cluster",
                                 cl::desc("The machine plans are for: dgx-a100, dgx-h100, h200-node, host (this "
                                          "machine, one process per hardware thread) or a colossal-cluster/1 "
                                          "JSON file (colossal-bench writes one). Default: host when building a "
                                          "host program (-o DIR, --target cpu), else dgx-a100"),
                                 cl::value_desc("NAME|FILE"), cl::init("dgx-a100"), cl::cat(category));
cl::opt<bool> buildableOnly("buildable-only",
                            cl::desc("With --emit=plan: search only the plans the partitioner builds today, "
                                     "placed as it splits the model (what -o DIR would build), so the "
                                     "prediction is the built program's"),
                            cl::cat(category));
cl::opt<bool> summaryOnly("summary-only", cl::desc("Print the model summary only, to stdout"), cl::cat(category));
cl::opt<bool> quiet("quiet", cl::desc("Do not print the model summary"), cl::cat(category));
cl::opt<bool> timePhases("time-phases",
                         cl::desc("Print the time of each phase (import, planning, each pass, source, weights, "
                                  "build) to the standard error stream at the end"),
                         cl::cat(category));

} // namespace

void printError(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "colossal-compile") << message << "\n";
}

std::optional<Request> parseCommandLine(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "colossal-compile: ONNX training graphs to distributed training "
                              "programs\n");

  bool toDirectory = emit.getNumOccurrences() ? (emit == Emit::Source || emit == Emit::Exe) : outputPath != "-";
  Emit phase = emit.getNumOccurrences() ? Emit(emit) : (toDirectory ? Emit::Exe : Emit::Raised);
  if (toDirectory && outputPath == "-") {
    printError("--emit=exe and --emit=source write a directory: give -o DIR");
    return std::nullopt;
  }
  if (gpus < 1) {
    printError("--gpus must be at least 1");
    return std::nullopt;
  }
  if (microbatches < 1) {
    printError("--microbatches must be at least 1");
    return std::nullopt;
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
      return std::nullopt;
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
      return std::nullopt;
    }
    options.bindings[name.str()] = size;
  }
  if (!trainableFile.empty()) {
    std::string error;
    options.trainable = colossal::readNameList(trainableFile, error);
    if (!options.trainable) {
      printError("--trainable: " + error);
      return std::nullopt;
    }
  }
  options.frozen.assign(frozen.begin(), frozen.end());
  if (!traceFile.empty() && phase != Emit::Plan) {
    printError("--trace writes a plan's predicted step: it goes with --emit=plan");
    return std::nullopt;
  }
  if (phase == Emit::Plan && !batch.getNumOccurrences() && planFile.empty()) {
    printError("--emit=plan needs --batch B, the global batch over all devices");
    return std::nullopt;
  }

  Request r;
  r.emit = phase, r.toDirectory = toDirectory;
  r.inputPath = inputPath, r.outputPath = outputPath;
  r.target = target, r.precision = precision, r.optimizer = optimizer, r.schedule = schedule;
  r.strategy = strategyText, r.planFile = planFile, r.cluster = clusterName, r.traceFile = traceFile;
  if (buildableOnly && phase != Emit::Plan) {
    printError("--buildable-only goes with --emit=plan (-o DIR builds only such plans anyway)");
    return std::nullopt;
  }
  r.buildableOnly = buildableOnly;
  // A host program runs on host processes: plan for this machine, unless
  // only a plan is asked for without naming the target (plans are for GPUs).
  bool hostProgram = target == "cpu" && (phase != Emit::Plan || target.getNumOccurrences());
  r.hostProgram = hostProgram;
  if (!clusterName.getNumOccurrences() && hostProgram)
    r.cluster = "host";
  r.gpus = gpus, r.gpusGiven = gpus.getNumOccurrences() > 0;
  r.microbatches = microbatches, r.microbatchesGiven = microbatches.getNumOccurrences() > 0;
  if (batch.getNumOccurrences())
    r.batch = int64_t(batch);
  r.lr = lr, r.weightDecay = weightDecay, r.beta1 = beta1, r.beta2 = beta2, r.momentum = momentum;
  r.clipGradNorm = clipGradNorm, r.nesterov = nesterov;
  if (initSpec.getNumOccurrences()) {
    llvm::StringRef spec(initSpec), kind = spec.split(':').first, std = spec.split(':').second;
    double value = 0.02;
    if (kind != "normal" || (spec.contains(':') && (std.getAsDouble(value) || !(value > 0) || !std::isfinite(value)))) {
      printError("--init '" + spec + "': expected normal or normal:STD with STD > 0 (for example normal:0.02)");
      return std::nullopt;
    }
    r.initStd = value;
  }
  r.eps = eps.getNumOccurrences() ? double(eps) : -1.0;
  r.warmupSteps = warmupSteps, r.steps = steps;
  r.import = options;
  r.summaryOnly = summaryOnly, r.quiet = quiet, r.timePhases = timePhases;
  return r;
}

} // namespace colossal::driver
