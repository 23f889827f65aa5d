//===- RaiseSilu.cpp - x * sigmoid(x) to train.silu ----------------------===//

#include "PatternUtils.h"
#include "passes/raise/Passes.h"

using namespace mlir;

namespace colossal::train {
#define GEN_PASS_DEF_RAISESILU
#include "passes/raise/Passes.h.inc"

namespace {

struct SiluPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    for (auto [x, s] : {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())}) {
      auto sigmoid = defining<SigmoidOp>(s);
      if (sigmoid && sigmoid.getInput() == x && x.getType() == mul.getType()) {
        rewriter.replaceOpWithNewOp<SiluOp>(mul, x);
        return success();
      }
    }
    return failure();
  }
};

struct RaiseSiluPass : impl::RaiseSiluBase<RaiseSiluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SiluPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace colossal::train
