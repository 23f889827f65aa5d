//===- RaiseLayerNorm.cpp - decomposed layer norm to train.layer_norm ----===//

#include "PatternUtils.h"
#include "passes/raise/Passes.h"

using namespace mlir;

namespace colossal::train {
#define GEN_PASS_DEF_RAISELAYERNORM
#include "passes/raise/Passes.h.inc"

namespace {

/// c * c or c ^ 2.
bool isSquareOf(Value value, Value c) {
  if (auto pow = defining<PowOp>(value))
    return pow.getLhs() == c && isSplatNear(pow.getRhs(), 2.0);
  auto mul = defining<MulOp>(value);
  return mul && mul.getLhs() == c && mul.getRhs() == c;
}

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) over trailing axes.
struct NormalizePattern : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp div, PatternRewriter &rewriter) const override {
    auto centered = defining<SubOp>(div.getLhs());
    auto sqrt = defining<SqrtOp>(div.getRhs());
    if (!centered || !sqrt)
      return failure();
    Value x = centered.getLhs();
    auto mean = defining<ReduceMeanOp>(centered.getRhs());
    if (!mean || mean.getInput() != x || !mean.getKeepdims())
      return failure();
    auto shifted = matchOperands(defining<AddOp>(sqrt.getInput()).getOperation(),
                                 [](Value v) { return splatValue(v).has_value(); });
    if (!shifted)
      return failure();
    auto variance = defining<ReduceMeanOp>(shifted->second);
    if (!variance || !variance.getKeepdims() || variance.getAxes() != mean.getAxes() ||
        !isSquareOf(variance.getInput(), centered.getResult()))
      return failure();
    int64_t rank = llvm::cast<RankedTensorType>(x.getType()).getRank(), first;
    if (!isTrailingAxes(mean.getAxes(), rank, first) || x.getType() != div.getType())
      return failure();
    rewriter.replaceOpWithNewOp<LayerNormOp>(div, div.getType(), x, Value(), Value(), rewriter.getI64IntegerAttr(first),
                                             rewriter.getF32FloatAttr(*splatValue(shifted->first)));
    return success();
  }
};

/// True when `param` broadcasts along the normalised dimensions only.
bool isAffineParameter(Value param, LayerNormOp norm) {
  auto type = llvm::cast<RankedTensorType>(param.getType());
  auto input = llvm::cast<RankedTensorType>(norm.getInput().getType());
  int64_t first = normalizeAxis(int64_t(norm.getAxis()), input.getRank());
  ArrayRef<int64_t> normalised = input.getShape().drop_front(first);
  if (type.getRank() > (int64_t)normalised.size())
    return false;
  ArrayRef<int64_t> tail = normalised.take_back(type.getRank());
  return type.getShape() == tail && type.getElementType() == input.getElementType();
}

/// layer_norm(x) * gamma -> layer_norm(x, gamma)
struct ScalePattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    auto match = matchOperands(mul, [](Value v) {
      auto norm = defining<LayerNormOp>(v);
      return norm && !norm.getScale() && !norm.getBias() && v.hasOneUse();
    });
    if (!match)
      return failure();
    auto norm = defining<LayerNormOp>(match->first);
    if (!isAffineParameter(match->second, norm) || mul.getType() != norm.getType())
      return failure();
    rewriter.replaceOpWithNewOp<LayerNormOp>(mul, mul.getType(), norm.getInput(), match->second,
                                             Value(), norm.getAxisAttr(), norm.getEpsilonAttr());
    return success();
  }
};

/// layer_norm(x, gamma) + beta -> layer_norm(x, gamma, beta)
struct BiasPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    auto match = matchOperands(add, [](Value v) {
      auto norm = defining<LayerNormOp>(v);
      return norm && norm.getScale() && !norm.getBias() && v.hasOneUse();
    });
    if (!match)
      return failure();
    auto norm = defining<LayerNormOp>(match->first);
    if (!isAffineParameter(match->second, norm) || add.getType() != norm.getType())
      return failure();
    rewriter.replaceOpWithNewOp<LayerNormOp>(add, add.getType(), norm.getInput(), norm.getScale(),
                                             match->second, norm.getAxisAttr(), norm.getEpsilonAttr());
    return success();
  }
};

struct RaiseLayerNormPass : impl::RaiseLayerNormBase<RaiseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<NormalizePattern, ScalePattern, BiasPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace colossal::train
