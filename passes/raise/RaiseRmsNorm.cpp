//===- RaiseRmsNorm.cpp - RMSNorm chains to train.rms_norm ----------------===//

#include "PatternUtils.h"
#include "passes/raise/Passes.h"

using namespace mlir;

namespace colossal::train {
#define GEN_PASS_DEF_RAISERMSNORM
#include "passes/raise/Passes.h.inc"

namespace {

/// sqrt(mean(x^2) + eps) over trailing axes: returns (x, first axis, eps).
std::optional<std::tuple<Value, int64_t, double>> matchRootMeanSquare(Value value) {
  auto sqrt = defining<SqrtOp>(value);
  if (!sqrt)
    return std::nullopt;
  auto shifted = matchOperands(defining<AddOp>(sqrt.getInput()).getOperation(),
                               [](Value v) { return splatValue(v).has_value(); });
  if (!shifted)
    return std::nullopt;
  auto mean = defining<ReduceMeanOp>(shifted->second);
  if (!mean || !mean.getKeepdims())
    return std::nullopt;
  Value x;
  if (auto pow = defining<PowOp>(mean.getInput()); pow && isSplatNear(pow.getRhs(), 2.0))
    x = pow.getLhs();
  else if (auto mul = defining<MulOp>(mean.getInput()); mul && mul.getLhs() == mul.getRhs())
    x = mul.getLhs();
  if (!x)
    return std::nullopt;
  int64_t first;
  if (!isTrailingAxes(mean.getAxes(), llvm::cast<RankedTensorType>(x.getType()).getRank(), first))
    return std::nullopt;
  return std::make_tuple(x, first, *splatValue(shifted->first));
}

/// x * (1 / rms(x)), x * reciprocal(rms(x)) or x / rms(x).
struct NormalizeByMulPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    for (auto [x, inverse] : {std::pair(mul.getLhs(), mul.getRhs()),
                              std::pair(mul.getRhs(), mul.getLhs())}) {
      Value rms;
      if (auto div = defining<DivOp>(inverse); div && isSplatNear(div.getLhs(), 1.0))
        rms = div.getRhs();
      else if (auto reciprocal = defining<ReciprocalOp>(inverse))
        rms = reciprocal.getInput();
      auto match = rms ? matchRootMeanSquare(rms) : std::nullopt;
      if (!match || std::get<0>(*match) != x || x.getType() != mul.getType())
        continue;
      rewriter.replaceOpWithNewOp<RmsNormOp>(mul, mul.getType(), x, Value(), rewriter.getI64IntegerAttr(std::get<1>(*match)),
                                             rewriter.getF32FloatAttr(std::get<2>(*match)));
      return success();
    }
    return failure();
  }
};

struct NormalizeByDivPattern : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp div, PatternRewriter &rewriter) const override {
    auto match = matchRootMeanSquare(div.getRhs());
    if (!match || std::get<0>(*match) != div.getLhs() || div.getLhs().getType() != div.getType())
      return failure();
    rewriter.replaceOpWithNewOp<RmsNormOp>(div, div.getType(), div.getLhs(), Value(), rewriter.getI64IntegerAttr(std::get<1>(*match)),
                                           rewriter.getF32FloatAttr(std::get<2>(*match)));
    return success();
  }
};

/// rms_norm(x) * w -> rms_norm(x, w), with w over the normalised dimensions.
struct ScalePattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    auto match = matchOperands(mul, [](Value v) {
      auto norm = defining<RmsNormOp>(v);
      return norm && !norm.getScale() && v.hasOneUse();
    });
    if (!match)
      return failure();
    auto norm = defining<RmsNormOp>(match->first);
    auto input = llvm::cast<RankedTensorType>(norm.getInput().getType());
    auto scale = llvm::cast<RankedTensorType>(match->second.getType());
    int64_t first = normalizeAxis(int64_t(norm.getAxis()), input.getRank());
    ArrayRef<int64_t> normalised = input.getShape().drop_front(first);
    if (scale.getRank() > (int64_t)normalised.size() ||
        scale.getShape() != normalised.take_back(scale.getRank()) ||
        mul.getType() != norm.getType())
      return failure();
    rewriter.replaceOpWithNewOp<RmsNormOp>(mul, mul.getType(), norm.getInput(), match->second,
                                           norm.getAxisAttr(), norm.getEpsilonAttr());
    return success();
  }
};

struct RaiseRmsNormPass : impl::RaiseRmsNormBase<RaiseRmsNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<NormalizeByMulPattern, NormalizeByDivPattern>(&getContext(), /*benefit=*/2);
    patterns.add<ScalePattern>(&getContext(), /*benefit=*/1);
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace colossal::train
