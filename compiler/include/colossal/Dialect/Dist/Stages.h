//===- Stages.h - which pipeline stage an op runs on ---------------*- C++ -*-===//
//
// On a module planned with pp > 1, `train-pipeline-stages` marks every op of
// @forward with the virtual pipeline stage it runs on (`dist.stage`, an i64
// attribute); differentiation gives each gradient op the stage of the op it
// differentiates, and `train-split-stages` cuts the step into one forward
// and one backward function per stage by these marks. Passes that replace
// an op carry its stage over (copyStage).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_DIALECT_DIST_STAGES_H
#define COLOSSAL_DIALECT_DIST_STAGES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include <optional>

namespace colossal::dist {

/// The virtual stage an op runs on.
constexpr llvm::StringLiteral kStageAttrName = "dist.stage";
/// On an add of parameter gradients made on different stages: each stage
/// keeps its part, and the stages holding the parameter sum them.
constexpr llvm::StringLiteral kStageSumAttrName = "dist.stage_sum";

/// An op made again on another stage (what reads only inputs or only
/// weights): the copy carries `dist.repeat_of` and the op it repeats
/// `dist.repeat`, the same number. The cost model counts the op once (the
/// copies are the pipeline's, not the model's).
constexpr llvm::StringLiteral kRepeatAttrName = "dist.repeat";
constexpr llvm::StringLiteral kRepeatOfAttrName = "dist.repeat_of";

inline bool isRepeatCopy(mlir::Operation *op) { return op->hasAttr(kRepeatOfAttrName); }

inline std::optional<int64_t> stageOf(mlir::Operation *op) {
  if (auto stage = op->getAttrOfType<mlir::IntegerAttr>(kStageAttrName))
    return stage.getInt();
  return std::nullopt;
}

inline void setStage(mlir::Operation *op, int64_t stage) {
  op->setAttr(kStageAttrName, mlir::IntegerAttr::get(mlir::IntegerType::get(op->getContext(), 64), stage));
}

/// Gives `to` the stage of `from`, if it has one.
inline void copyStage(mlir::Operation *from, mlir::Operation *to) {
  if (mlir::Attribute stage = from->getAttr(kStageAttrName))
    to->setAttr(kStageAttrName, stage);
}

/// Marks every op a builder inserts with one stage (the ops a gradient rule
/// or a lowering makes for one op); a no-op while no stage is set.
class StageMarker : public mlir::OpBuilder::Listener {
public:
  void setStage(std::optional<int64_t> stage) { stage_ = stage; }
  void notifyOperationInserted(mlir::Operation *op, mlir::OpBuilder::InsertPoint) override {
    if (stage_)
      dist::setStage(op, *stage_);
  }

private:
  std::optional<int64_t> stage_;
};

} // namespace colossal::dist

#endif // COLOSSAL_DIALECT_DIST_STAGES_H
