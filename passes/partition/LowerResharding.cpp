//===- LowerResharding.cpp - dist.reshard to collectives -----------------===//

#include "passes/partition/LowerResharding.h"
#include "passes/partition/Passes.h"

#include "colossal/Dialect/Dist/Stages.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/cost/Resharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

namespace colossal::partition {

#define GEN_PASS_DEF_LOWERRESHARDINGPASS
#include "passes/partition/Passes.h.inc"

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

cost::TensorSpec specOf(const Layout &layout, const std::vector<std::string> &axes) {
  auto index = [&](const std::string &axis) { return int(llvm::find(axes, axis) - axes.begin()); };
  cost::TensorSpec spec;
  for (const auto &dim : layout.dims) {
    spec.dims.emplace_back();
    for (const std::string &axis : dim)
      spec.dims.back().push_back(index(axis));
  }
  // Copies are whole values as far as data goes; only gradients tell them
  // apart.
  for (const std::string &axis : layout.sums)
    spec.partial.push_back(index(axis));
  return spec;
}

LogicalResult lower(ReshardOp op) {
  // The mesh's axes in its order (the verifier has checked it exists).
  std::vector<std::string> axes;
  std::vector<int> sizes;
  for (auto [axis, size] : op.getMeshAxes()) {
    axes.push_back(axis);
    sizes.push_back(int(size));
  }
  auto type = cast<RankedTensorType>(op.getInput().getType());
  // The whole value's dimensions: the input's, times the axes splitting it.
  std::vector<int64_t> whole(type.getShape().begin(), type.getShape().end());
  for (auto [d, dimAxes] : llvm::enumerate(op.getFromLayout().dims))
    for (const std::string &axis : dimAxes)
      if (d < whole.size())
        whole[d] *= sizes[size_t(llvm::find(axes, axis) - axes.begin())];
  cost::ReshardPlan plan = cost::planResharding(specOf(op.getFromLayout(), axes), specOf(op.getToLayout(), axes), sizes,
                                                double(type.getNumElements()), &whole);
  if (!plan.error.empty())
    return op.emitError() << "no resharding from '" << op.getFromLayout().str() << "' to '" << op.getToLayout().str() << "': " << plan.error;
  OpBuilder builder(op);
  // The collectives run on the resharding's pipeline stage.
  dist::StageMarker marker;
  marker.setStage(dist::stageOf(op));
  builder.setListener(&marker);
  Location loc = op.getLoc();
  Value value = op.getInput();
  llvm::SmallVector<int64_t> shape(type.getShape());
  for (const cost::ReshardStep &step : plan.steps) {
    StringAttr axis = builder.getStringAttr(axes[size_t(step.axis)]);
    int64_t n = sizes[size_t(step.axis)];
    auto dim = [&](int d) { return builder.getI64IntegerAttr(d); };
    auto typed = [&] { return RankedTensorType::get(shape, type.getElementType()); };
    switch (step.kind) {
    case cost::ReshardKind::Slice:
      shape[size_t(step.dim)] /= n;
      value = RankSliceOp::create(builder, loc, typed(), value, axis, dim(step.dim));
      break;
    case cost::ReshardKind::AllReduce:
      value = AllReduceOp::create(builder, loc, typed(), value, axis);
      break;
    case cost::ReshardKind::ReduceScatter:
      shape[size_t(step.dim)] /= n;
      value = ReduceScatterOp::create(builder, loc, typed(), value, axis, dim(step.dim));
      break;
    case cost::ReshardKind::AllGather:
      shape[size_t(step.dim)] *= n;
      value = AllGatherOp::create(builder, loc, typed(), value, axis, dim(step.dim));
      break;
    case cost::ReshardKind::AllToAll:
      shape[size_t(step.fromDim)] *= n;
      shape[size_t(step.dim)] /= n;
      value = AllToAllOp::create(builder, loc, typed(), value, axis, dim(step.dim), dim(step.fromDim));
      break;
    }
  }
  if (value.getType() != op.getType())
    return op.emitError() << "resharding from '" << op.getFromLayout().str() << "' to '" << op.getToLayout().str() << "' made "
                          << value.getType() << ", not " << op.getType() << " (an internal error)";
  op.getResult().replaceAllUsesWith(value);
  op.erase();
  return success();
}

} // namespace

LogicalResult lowerResharding(ModuleOp module, bool keepForward) {
  llvm::SmallVector<ReshardOp> ops;
  module.walk([&](ReshardOp op) {
    auto function = op->getParentOfType<func::FuncOp>();
    if (!keepForward || !function || function.getSymName() != "forward")
      ops.push_back(op);
  });
  for (ReshardOp op : ops)
    if (failed(lower(op)))
      return failure();
  return success();
}

namespace {

struct LowerReshardingPass : impl::LowerReshardingPassBase<LowerReshardingPass> {
  using LowerReshardingPassBase::LowerReshardingPassBase;

  void runOnOperation() override {
    if (failed(lowerResharding(getOperation(), keepForward)))
      signalPassFailure();
  }
};

} // namespace

} // namespace colossal::partition
