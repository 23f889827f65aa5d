//===- colossal-compile.cpp - the compiler driver -----------------------===//
//
// colossal-compile model.onnx [--batch B --seq S] --emit=mlir|raised|train
//
// Stops after the requested phase and prints the program; a model summary
// goes to the standard error stream (or stdout with --summary-only).
//
//===----------------------------------------------------------------------===//

#include "ModelSummary.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Import/OnnxImporter.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/raise/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("colossal-compile options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::Required,
                               cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Write the program here (default: standard output)"),
                                cl::value_desc("file"), cl::init("-"), cl::cat(category));

enum class Phase { Mlir, Raised, Train };
cl::opt<Phase> emit("emit", cl::desc("Stop after this phase and print its program (default: raised)"),
                    cl::values(clEnumValN(Phase::Mlir, "mlir", "the imported train dialect"),
                               clEnumValN(Phase::Raised, "raised",
                                          "after raising to named ops (gelu, layer_norm, "
                                          "attention, cross_entropy, ...)"),
                               clEnumValN(Phase::Train, "train",
                                          "with @forward_backward: the loss and every trainable "
                                          "parameter's gradient (train-autodiff)")),
                    cl::init(Phase::Raised), cl::cat(category));

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

  colossal::ImportOptions options;
  if (batch.getNumOccurrences())
    options.batch = batch;
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

  OwningOpRef<ModuleOp> module = colossal::importOnnxFile(context, inputPath, options);
  if (!module)
    return 1;

  if (emit == Phase::Raised || emit == Phase::Train) {
    PassManager pm(&context);
    colossal::train::buildRaisePipeline(pm);
    if (failed(pm.run(*module))) {
      printError("raising failed on " + inputPath);
      return 1;
    }
  }
  if (emit == Phase::Train && failed(colossal::autodiff::buildForwardBackward(*module))) {
    printError("differentiating " + inputPath + " failed (see the error above)");
    return 1;
  }

  if (summaryOnly) {
    colossal::printModelSummary(*module, inputPath, llvm::outs());
    return 0;
  }
  if (!quiet)
    colossal::printModelSummary(*module, inputPath, llvm::errs());

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
