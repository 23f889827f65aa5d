//===- Planning.h - --emit=plan and --plan for colossal-compile ----*- C++ -*-===//
//
// `--emit=plan` searches the plan for `--gpus N` and a global batch
// (GraphSearch.h) on the model's own cost graph, which the bridge builds
// from the raised IR once per microbatch size the search tries (the model
// is imported again with its batch dimension bound to that size). It
// writes the plan JSON and prints a report: the mesh and its placement,
// how the tensor axis splits each kind of op, the predicted step, memory
// against capacity, the closest alternatives and why they lost, and
// whether the partitioner can run the plan yet.
//
// `--plan FILE` reads such a plan back: with `--emit=plan` it re-evaluates
// it (the file's per-op shardings included) and writes it again; with
// `-o DIR` it builds the program if the partitioner can run the plan
// (data parallelism and microbatches today) and refuses it otherwise,
// naming what it lacks.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TOOLS_COLOSSAL_COMPILE_PLANNING_H
#define COLOSSAL_TOOLS_COLOSSAL_COMPILE_PLANNING_H

#include "colossal/Import/OnnxImporter.h"
#include "colossal/cost/Plan.h"
#include "colossal/cost/Search.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/Timing.h"

#include <optional>
#include <string>

namespace colossal {

struct PlanRequest {
  std::string inputPath;
  /// Where the plan JSON goes ("-": stdout).
  std::string outputPath = "-";
  /// A plan to re-evaluate instead of searching.
  std::string planPath;
  /// Where the plan's predicted step goes as Chrome-trace JSON ("": nowhere).
  std::string tracePath;
  /// Parts of the strategy the user fixed ("dp=8,zero=1").
  std::string strategy;
  std::string cluster = "dgx-a100";
  /// The program the plans are priced as (how its trainer meets the data
  /// axis, cost::ProgramTarget).
  cost::ProgramTarget target = cost::ProgramTarget::Host;
  /// "fp32", "bf16" or "fp16": the type activations and weights take in
  /// the planned program (mixed precision keeps fp32 master weights in the
  /// optimizer state, which the cost model counts).
  std::string precision = "fp32";
  ImportOptions import;
  int64_t gpus = 1;
  int64_t globalBatch = 0;
  bool quiet = false;
  /// Building, not planning: search only plans the partitioner can run and,
  /// instead of a plan file and report, put the best one here (with one
  /// line saying what was chosen).
  std::optional<cost::Strategy> *chosen = nullptr;
  /// Search only the plans the partitioner can run, placed as it splits the
  /// model (`chosen` implies it).
  bool buildableOnly = false;
  /// --time-phases: reading the file, the search, and inside it the imports
  /// and the partitioner's splits, nested under this scope (none: untimed).
  mlir::TimingScope *timing = nullptr;
};

/// Runs --emit=plan (or, with `chosen`, the search `-o DIR` builds from
/// when --gpus N comes without a strategy); returns the process exit status.
int runPlanning(mlir::MLIRContext &context, const PlanRequest &request);

/// What the partitioner cannot run yet in `strategy` with its tensor axis
/// placed by `placement`, in words ("tp=2 placed by the sharding solver,
/// pp=2"); empty if it can run it.
std::string partitionerLacks(const cost::Strategy &strategy, cost::Placement placement = cost::Placement::Solver);

/// The strategy of the plan in `path`, if the partitioner can run it; else
/// nullopt with `error` saying what the plan needs that it lacks.
std::optional<cost::Strategy> readExecutablePlan(const std::string &path, std::string &error);

/// Whether the plan in `path` splits the model's ops over its model axes
/// (`tensorRanks` of "tp", `sequenceRanks` of "sp") as the partitioner did
/// (`whole` before, `split` one rank's graph after, `tensorSplit` after the
/// tensor split alone when both axes split; AppliedSharding.h): a plan
/// edited or made for another model would otherwise build a program its
/// predictions do not describe. False with `error` naming the first op that
/// differs.
bool planMatchesBuiltSplit(const std::string &path, const cost::Graph &whole, const cost::Graph *tensorSplit,
                           const cost::Graph &split, int64_t tensorRanks, int64_t sequenceRanks, std::string &error);

} // namespace colossal

#endif // COLOSSAL_TOOLS_COLOSSAL_COMPILE_PLANNING_H
