//===- ModulePlan.cpp - the plan on a module and the cost model's strategy ===//

#include "passes/plan/ModulePlan.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <initializer_list>

namespace colossal::plan {

namespace {

/// The value of `name` among `values` (the verifier has checked that it is
/// one of them).
template <typename Enum> Enum byName(llvm::StringRef name, std::initializer_list<Enum> values) {
  for (Enum value : values)
    if (name == cost::nameOf(value))
      return value;
  return *values.begin();
}

} // namespace

cost::Strategy strategyOf(dist::PlanAttr plan) {
  using namespace cost;
  Strategy s;
  s.dp = int(plan.getDp()), s.tp = int(plan.getTp()), s.sp = int(plan.getSp()), s.pp = int(plan.getPp());
  s.tpMode =
      byName(plan.getTpMode(), {TensorMode::OneD, TensorMode::TwoD, TensorMode::TwoPointFiveD, TensorMode::ThreeD});
  s.tpDepth = int(plan.getTpDepth());
  s.spMode = byName(plan.getSequence(),
                    {SequenceMode::None, SequenceMode::Megatron, SequenceMode::AllToAll, SequenceMode::Ring});
  s.microbatches = int(plan.getMicrobatches());
  s.schedule = byName(plan.getSchedule(), {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved});
  s.virtualStages = int(plan.getVirtualStages());
  if (mlir::DenseI64ArrayAttr stages = plan.getStageLayers())
    s.stageLayers.assign(stages.asArrayRef().begin(), stages.asArrayRef().end());
  s.zero = int(plan.getZero());
  s.offloadOptimizer = plan.getOffload() == "optimizer";
  s.recompute = byName(plan.getRecompute(), {Recompute::None, Recompute::Selective, Recompute::Full});
  return s;
}

dist::PlanAttr planAttrOf(mlir::MLIRContext *context, const cost::Strategy &s, llvm::StringRef cluster, int64_t nodes,
                          llvm::function_ref<mlir::InFlightDiagnostic()> emitError) {
  mlir::DenseI64ArrayAttr stages =
      s.stageLayers.empty() ? mlir::DenseI64ArrayAttr() : mlir::DenseI64ArrayAttr::get(context, s.stageLayers);
  using llvm::StringRef;
  return dist::PlanAttr::getChecked(
      emitError, context, int64_t(s.dp), int64_t(s.tp), int64_t(s.sp), int64_t(s.pp), StringRef(cost::nameOf(s.tpMode)),
      int64_t(s.tpDepth), StringRef(cost::nameOf(s.spMode)), int64_t(s.microbatches),
      StringRef(cost::nameOf(s.schedule)), int64_t(s.virtualStages), stages, int64_t(s.zero),
      StringRef(s.offloadOptimizer ? "optimizer" : "none"), StringRef(cost::nameOf(s.recompute)), cluster, nodes);
}

std::optional<cost::Cluster> clusterOf(dist::PlanAttr plan, std::string &error) {
  return cost::Cluster::load(plan.getCluster().str(), int(plan.getNodes()), error);
}

std::optional<int> nodesFor(const std::string &cluster, int64_t devices, std::string &error) {
  std::optional<cost::Cluster> probe = cost::Cluster::load(cluster, 1, error);
  if (!probe)
    return std::nullopt;
  return std::max<int>(probe->nodes, int((devices + probe->gpusPerNode - 1) / probe->gpusPerNode));
}

} // namespace colossal::plan
