//===- Resharding.cpp - building dist.reshard ----------------------------===//

#include "passes/partition/Resharding.h"

#include "passes/plan/ModulePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

namespace colossal::partition {

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

/// Where the module's plan places `axis`: ranks of one group per node, on
/// the plan's cluster (null without a plan, or when the plan's axis is not
/// this one's size).
DenseI64ArrayAttr placementOf(ModuleOp module, StringRef axis, int64_t ranks) {
  PlanAttr plan = PlanAttr::on(module);
  std::string error;
  std::optional<cost::Cluster> cluster = plan ? plan::clusterOf(plan, error) : std::nullopt;
  if (!cluster)
    return {};
  cost::Mesh mesh = cost::buildMesh(plan::strategyOf(plan), *cluster);
  const cost::MeshAxis *placed = mesh.axis(axis.str());
  if (!placed || placed->size != ranks)
    return {};
  return DenseI64ArrayAttr::get(module.getContext(), {int64_t(placed->perNode)});
}

} // namespace

FlatSymbolRefAttr meshOf(ModuleOp module, StringRef axis, int64_t ranks) {
  for (MeshOp mesh : module.getOps<MeshOp>())
    if (mesh.getAxes().size() == 1 && mesh.sizeOf(axis) == ranks)
      return FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  // Made apart and inserted by the symbol table, which renames it if a
  // symbol of the module (a parameter called "tp") has its name.
  OpBuilder builder(module.getContext());
  auto mesh = MeshOp::create(builder, module.getLoc(), builder.getStringAttr(axis), builder.getStrArrayAttr({axis}),
                             builder.getDenseI64ArrayAttr({ranks}), placementOf(module, axis, ranks));
  SymbolTable(module).insert(mesh, module.getBody()->begin());
  return FlatSymbolRefAttr::get(mesh.getSymNameAttr());
}

Value reshard(OpBuilder &builder, Location loc, Value input, RankedTensorType resultType, const Layout &from,
              const Layout &to, StringRef axis, int64_t ranks) {
  auto module = builder.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  return ReshardOp::create(builder, loc, resultType, input, ShardingAttr::get(builder.getContext(), from),
                           ShardingAttr::get(builder.getContext(), to), meshOf(module, axis, ranks));
}

Value copyToRanks(OpBuilder &builder, Location loc, Value value, StringRef axis, int64_t ranks) {
  auto type = cast<RankedTensorType>(value.getType());
  Layout whole = wholeLayout(type.getRank()), copies = whole;
  copies.copies = {axis.str()};
  return reshard(builder, loc, value, type, whole, copies, axis, ranks);
}

Value sumOverRanks(OpBuilder &builder, Location loc, Value partial, StringRef axis, int64_t ranks) {
  auto type = cast<RankedTensorType>(partial.getType());
  Layout whole = wholeLayout(type.getRank()), sum = whole;
  sum.sums = {axis.str()};
  return reshard(builder, loc, partial, type, sum, whole, axis, ranks);
}

bool isCopyToRanks(ReshardOp op, StringRef axis) {
  Layout from = op.getFromLayout(), to = op.getToLayout();
  Layout whole = wholeLayout(int64_t(from.dims.size())), copies = whole;
  copies.copies = {axis.str()};
  return from == whole && to == copies;
}

bool isSumOverRanks(ReshardOp op, StringRef axis) {
  Layout from = op.getFromLayout(), to = op.getToLayout();
  Layout whole = wholeLayout(int64_t(from.dims.size())), sum = whole;
  sum.sums = {axis.str()};
  return from == sum && to == whole;
}

} // namespace colossal::partition
