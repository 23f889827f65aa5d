//===- RaiseCrossEntropy.cpp - classification losses to train.cross_entropy ===//

#include "PatternUtils.h"
#include "passes/raise/Passes.h"

using namespace mlir;

namespace colossal::train {
#define GEN_PASS_DEF_RAISECROSSENTROPY
#include "passes/raise/Passes.h.inc"

namespace {

struct SoftmaxCrossEntropyPattern : OpRewritePattern<SoftmaxCrossEntropyLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxCrossEntropyLossOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getWeights()) {
      rewriter.replaceOpWithNewOp<CrossEntropyOp>(op, op.getType(), op.getScores(), op.getLabels(),
                                                  op.getReductionAttr(), op.getIgnoreIndexAttr(), StringAttr(),
                                                  IntegerAttr(), StringAttr());
      return success();
    }
    // Class weights: the fused loss has none, so the log-softmax and the
    // weighted likelihood it is defined by, each with its gradient rule.
    Value logProbs = LogSoftmaxOp::create(rewriter, op.getLoc(), op.getScores().getType(), op.getScores(),
                                          rewriter.getI64IntegerAttr(1));
    rewriter.replaceOpWithNewOp<NegativeLogLikelihoodLossOp>(
        op, op.getType(), logProbs, op.getLabels(), op.getWeights(), op.getReductionAttr(), op.getIgnoreIndexAttr());
    return success();
  }
};

struct LogSoftmaxNllPattern : OpRewritePattern<NegativeLogLikelihoodLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NegativeLogLikelihoodLossOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getWeights())
      return failure();
    Value scores = logitsOf(op.getLogProbs(), rewriter, op.getLoc());
    if (!scores)
      return failure();
    rewriter.replaceOpWithNewOp<CrossEntropyOp>(op, op.getType(), scores, op.getLabels(), op.getReductionAttr(),
                                                op.getIgnoreIndexAttr(), StringAttr(), IntegerAttr(), StringAttr());
    return success();
  }

private:
  /// The logits whose log-softmax over axis 1 `logProbs` is, or null.
  /// Besides `log_softmax(x, axis=1)`, PyTorch's usual
  /// `F.nll_loss(F.log_softmax(x, -1).view(-1, C), labels.view(-1))`:
  /// a log-softmax over the last axis flattened to rows of the same C
  /// classes, which is the log-softmax of the flattened logits.
  static Value logitsOf(Value logProbs, PatternRewriter &rewriter, Location loc) {
    if (auto logSoftmax = defining<LogSoftmaxOp>(logProbs)) {
      int64_t rank = llvm::cast<RankedTensorType>(logSoftmax.getType()).getRank();
      return normalizeAxis(int64_t(logSoftmax.getAxis()), rank) == 1 ? logSoftmax.getInput() : Value();
    }
    auto reshape = defining<ReshapeOp>(logProbs);
    auto logSoftmax = reshape ? defining<LogSoftmaxOp>(reshape.getInput()) : LogSoftmaxOp();
    if (!logSoftmax)
      return {};
    auto from = llvm::cast<RankedTensorType>(logSoftmax.getType());
    auto to = llvm::cast<RankedTensorType>(reshape.getType());
    if (to.getRank() != 2 || !from.hasStaticShape() || !to.hasStaticShape() ||
        normalizeAxis(int64_t(logSoftmax.getAxis()), from.getRank()) != from.getRank() - 1 ||
        to.getDimSize(1) != from.getShape().back())
      return {};
    return ReshapeOp::create(rewriter, loc, to, logSoftmax.getInput());
  }
};

struct RaiseCrossEntropyPass : impl::RaiseCrossEntropyBase<RaiseCrossEntropyPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SoftmaxCrossEntropyPattern, LogSoftmaxNllPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace colossal::train
