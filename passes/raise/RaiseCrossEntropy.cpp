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
    if (op.getWeights())
      return failure();
    rewriter.replaceOpWithNewOp<CrossEntropyOp>(op, op.getType(), op.getScores(), op.getLabels(),
                                                op.getReductionAttr(), op.getIgnoreIndexAttr(),
                                                StringAttr(), IntegerAttr(), StringAttr());
    return success();
  }
};

struct LogSoftmaxNllPattern : OpRewritePattern<NegativeLogLikelihoodLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NegativeLogLikelihoodLossOp op,
                                PatternRewriter &rewriter) const override {
    auto logSoftmax = defining<LogSoftmaxOp>(op.getLogProbs());
    if (op.getWeights() || !logSoftmax)
      return failure();
    int64_t rank = llvm::cast<RankedTensorType>(logSoftmax.getType()).getRank();
    if (normalizeAxis(int64_t(logSoftmax.getAxis()), rank) != 1)
      return failure();
    rewriter.replaceOpWithNewOp<CrossEntropyOp>(op, op.getType(), logSoftmax.getInput(),
                                                op.getLabels(), op.getReductionAttr(),
                                                op.getIgnoreIndexAttr(), StringAttr(), IntegerAttr(), StringAttr());
    return success();
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
