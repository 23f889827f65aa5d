//===- ApplyPlan.cpp - write the training plan on the module -------------===//

#include "passes/plan/ModulePlan.h"
#include "passes/plan/Passes.h"

namespace colossal::plan {
#define GEN_PASS_DEF_DISTAPPLYPLAN
#include "passes/plan/Passes.h.inc"

namespace {

struct DistApplyPlanPass : impl::DistApplyPlanBase<DistApplyPlanPass> {
  using DistApplyPlanBase::DistApplyPlanBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    std::string error;
    std::optional<cost::Strategy> strategy =
        strategyText.empty() ? cost::Strategy() : cost::Strategy::parse(strategyText, error);
    if (!strategy) {
      module.emitError() << "dist-apply-plan: " << error;
      return signalPassFailure();
    }
    std::optional<int> nodes = nodesFor(clusterName, strategy->devices(), error);
    if (!nodes) {
      module.emitError() << "dist-apply-plan: " << error;
      return signalPassFailure();
    }
    dist::PlanAttr plan =
        planAttrOf(module.getContext(), *strategy, clusterName, *nodes, [&] { return module.emitError(); });
    if (!plan)
      return signalPassFailure();
    if (dist::PlanAttr existing = dist::PlanAttr::on(module); existing && existing != plan) {
      module.emitError() << "dist-apply-plan: the module is already planned as " << existing << ", not " << plan;
      return signalPassFailure();
    }
    module->setAttr(dist::PlanAttr::kAttrName, plan);
  }
};

} // namespace
} // namespace colossal::plan
