//===- PlannedSetting.h - a pass's setting from the module's plan -*- C++ -*-===//
//
// The partitioning and memory passes take their settings from the module's
// `dist.plan` (DistAttrs.td). An option given on the command line (lit
// tests run one pass alone) still works on a module without a plan; given
// on a planned module it must agree with the plan.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_DIALECT_DIST_PLANNEDSETTING_H
#define COLOSSAL_DIALECT_DIST_PLANNEDSETTING_H

#include "colossal/Dialect/Dist/DistDialect.h"

#include <optional>

namespace colossal::dist {

/// The value of `option` for pass `pass` on `module`: the plan's
/// (`fromPlan`) when the module has one, else `given` (nullopt: not given).
/// A given value that the plan contradicts is an error naming both.
template <typename T>
mlir::FailureOr<std::optional<T>> plannedSetting(mlir::Operation *module, llvm::StringRef pass, llvm::StringRef option,
                                                 std::optional<T> given, llvm::function_ref<T(PlanAttr)> fromPlan) {
  PlanAttr plan = PlanAttr::on(module);
  if (!plan)
    return given;
  T planned = fromPlan(plan);
  if (given && *given != planned) {
    module->emitError() << pass << ": " << option << "=" << *given << " but the module's plan asks for " << planned
                        << " (" << plan << ")";
    return mlir::failure();
  }
  return std::optional<T>(planned);
}

/// The ranks of a splitting pass's axis: the plan's (`fromPlan`), else the
/// pass's `ranks` option (0: not given); neither is an error.
inline mlir::FailureOr<int64_t> plannedRanks(mlir::Operation *module, llvm::StringRef pass, int64_t given,
                                             llvm::function_ref<int64_t(PlanAttr)> fromPlan) {
  mlir::FailureOr<std::optional<int64_t>> ranks =
      plannedSetting<int64_t>(module, pass, "ranks", given ? std::optional<int64_t>(given) : std::nullopt, fromPlan);
  if (failed(ranks))
    return mlir::failure();
  if (!*ranks) {
    module->emitError() << pass << ": no ranks: give ranks=N or apply a plan first (dist-apply-plan)";
    return mlir::failure();
  }
  return **ranks;
}

} // namespace colossal::dist

#endif // COLOSSAL_DIALECT_DIST_PLANNEDSETTING_H
