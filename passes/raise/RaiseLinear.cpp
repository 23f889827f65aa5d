//===- RaiseLinear.cpp - matmul by a parameter (+ bias) to train.linear ---===//

#include "PatternUtils.h"
#include "passes/raise/Passes.h"

using namespace mlir;

namespace colossal::train {
#define GEN_PASS_DEF_RAISELINEAR
#include "passes/raise/Passes.h.inc"

namespace {

struct MatMulPattern : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rewriter) const override {
    auto weight = llvm::cast<RankedTensorType>(op.getRhs().getType());
    auto input = llvm::cast<RankedTensorType>(op.getLhs().getType());
    if (weight.getRank() != 2 || input.getRank() < 1 || !isParameterDerived(op.getRhs()))
      return failure();
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), op.getLhs(), op.getRhs(), Value());
    return success();
  }
};

/// linear(x, w) + b -> linear(x, w, b) for a vector b of the output width.
struct BiasPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    auto match = matchOperands(add, [](Value v) {
      auto linear = defining<LinearOp>(v);
      return linear && !linear.getBias() && v.hasOneUse();
    });
    if (!match)
      return failure();
    auto linear = defining<LinearOp>(match->first);
    auto bias = llvm::cast<RankedTensorType>(match->second.getType());
    auto weight = llvm::cast<RankedTensorType>(linear.getWeight().getType());
    if (bias.getRank() != 1 || bias.getDimSize(0) != weight.getDimSize(1) ||
        add.getType() != linear.getType())
      return failure();
    rewriter.replaceOpWithNewOp<LinearOp>(add, add.getType(), linear.getInput(),
                                          linear.getWeight(), match->second);
    return success();
  }
};

/// gemm(x, w, b) with unit alpha and beta and a vector (or no) bias.
struct GemmPattern : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GemmOp op, PatternRewriter &rewriter) const override {
    if (op.getTransA() || !op.getAlpha().isExactlyValue(1.0) || !op.getBeta().isExactlyValue(1.0))
      return failure();
    Value bias = op.getC();
    auto resultType = llvm::cast<RankedTensorType>(op.getType());
    if (bias) {
      auto type = llvm::cast<RankedTensorType>(bias.getType());
      if (type.getRank() != 1 || type.getDimSize(0) != resultType.getDimSize(1))
        return failure();
    }
    Value weight = op.getB();
    if (op.getTransB())
      weight = TransposeOp::create(rewriter, op.getLoc(), weight,
                                            rewriter.getDenseI64ArrayAttr({1, 0}));
    rewriter.replaceOpWithNewOp<LinearOp>(op, resultType, op.getA(), weight, bias);
    return success();
  }
};

struct RaiseLinearPass : impl::RaiseLinearBase<RaiseLinearPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatMulPattern, BiasPattern, GemmPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace colossal::train
