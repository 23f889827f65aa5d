//===- ModulePlan.h - the plan on a module and the cost model's strategy -*- C++ -*-===//
//
// `dist.plan` (#dist.plan, DistAttrs.td) is the plan a module is compiled
// for. The search, plan files and --strategy speak the cost model's
// `cost::Strategy`; this converts between the two, and names the cluster
// the plan was priced for.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_PASSES_PLAN_MODULEPLAN_H
#define COLOSSAL_PASSES_PLAN_MODULEPLAN_H

#include "colossal/Dialect/Dist/DistDialect.h"
#include "colossal/cost/Cluster.h"
#include "colossal/cost/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace colossal::plan {

/// The strategy of a plan (the degrees, algorithms, schedule, ZeRO, offload
/// and recomputation; the cluster is clusterOf's).
cost::Strategy strategyOf(dist::PlanAttr plan);

/// The plan of `strategy` priced on `nodes` nodes of `cluster` (a preset name
/// or a cluster file); null after an error through `emitError`.
dist::PlanAttr planAttrOf(mlir::MLIRContext *context, const cost::Strategy &strategy, llvm::StringRef cluster,
                          int64_t nodes, llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The cluster the plan was priced for; nullopt and `error` when its file
/// no longer reads.
std::optional<cost::Cluster> clusterOf(dist::PlanAttr plan, std::string &error);

/// The nodes of `cluster` that `devices` ranks need (at least the cluster's
/// own count: a cluster file names its nodes).
std::optional<int> nodesFor(const std::string &cluster, int64_t devices, std::string &error);

} // namespace colossal::plan

#endif // COLOSSAL_PASSES_PLAN_MODULEPLAN_H
