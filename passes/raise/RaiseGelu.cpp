//===- RaiseGelu.cpp - erf and tanh GELU chains to train.gelu ------------===//

#include "PatternUtils.h"
#include "passes/raise/Passes.h"

#include <cmath>

using namespace mlir;

namespace colossal::train {
#define GEN_PASS_DEF_RAISEGELU
#include "passes/raise/Passes.h.inc"

namespace {

/// erf(x / sqrt(2)) or erf(x * (1 / sqrt(2))): returns x.
Value matchErfOfScaledInput(Value value) {
  auto erf = defining<ErfOp>(value);
  if (!erf)
    return {};
  Value arg = erf.getInput();
  if (auto div = defining<DivOp>(arg); div && isSplatNear(div.getRhs(), std::sqrt(2.0)))
    return div.getLhs();
  if (auto mul = defining<MulOp>(arg))
    if (auto m = matchOperands(mul, [](Value v) { return isSplatNear(v, 1 / std::sqrt(2.0)); }))
      return m->second;
  return {};
}

/// x * x * x, as pow(x, 3) or two multiplications: returns x.
bool isCube(Value value, Value x) {
  if (auto pow = defining<PowOp>(value))
    return pow.getLhs() == x && isSplatNear(pow.getRhs(), 3.0);
  auto mul = defining<MulOp>(value);
  if (!mul)
    return false;
  auto square = [&](Value v) {
    auto m = defining<MulOp>(v);
    return (m && m.getLhs() == x && m.getRhs() == x) ||
           (defining<PowOp>(v) && defining<PowOp>(v).getLhs() == x &&
            isSplatNear(defining<PowOp>(v).getRhs(), 2.0));
  };
  return (mul.getLhs() == x && square(mul.getRhs())) || (mul.getRhs() == x && square(mul.getLhs()));
}

/// tanh(sqrt(2/pi) * (x + 0.044715 * x^3)): returns x.
Value matchTanhOfCubic(Value value) {
  auto tanh = defining<TanhOp>(value);
  if (!tanh)
    return {};
  auto outer = matchOperands(defining<MulOp>(tanh.getInput()).getOperation(),
                             [](Value v) { return isSplatNear(v, std::sqrt(2.0 / M_PI)); });
  if (!outer)
    return {};
  auto sum = defining<AddOp>(outer->second);
  if (!sum)
    return {};
  for (auto [x, term] : {std::pair(sum.getLhs(), sum.getRhs()), std::pair(sum.getRhs(), sum.getLhs())}) {
    auto scaled = matchOperands(defining<MulOp>(term).getOperation(),
                                [](Value v) { return isSplatNear(v, 0.044715); });
    if (scaled && isCube(scaled->second, x))
      return x;
  }
  return {};
}

/// 1 + inner(x), where inner is one of the matchers above: returns x.
template <typename InnerMatcher> Value matchOnePlus(Value value, InnerMatcher inner) {
  auto add = matchOperands(defining<AddOp>(value).getOperation(),
                           [](Value v) { return isSplatNear(v, 1.0); });
  return add ? inner(add->second) : Value();
}

/// Matches 0.5 * x * (1 + f(x)) in any association: (x * (1+f)) * 0.5 or
/// (x * 0.5) * (1+f); returns x and whether f is tanh.
std::optional<std::pair<Value, bool>> matchGelu(MulOp root) {
  auto tryInner = [](Value onePlus, Value x) -> std::optional<bool> {
    if (Value e = matchOnePlus(onePlus, matchErfOfScaledInput); e && e == x)
      return false;
    if (Value t = matchOnePlus(onePlus, matchTanhOfCubic); t && t == x)
      return true;
    return std::nullopt;
  };
  // (x * (1 + f)) * 0.5
  if (auto half = matchOperands(root, [](Value v) { return isSplatNear(v, 0.5); })) {
    if (auto product = defining<MulOp>(half->second))
      for (auto [x, onePlus] : {std::pair(product.getLhs(), product.getRhs()),
                                std::pair(product.getRhs(), product.getLhs())})
        if (auto isTanh = tryInner(onePlus, x))
          return std::make_pair(x, *isTanh);
  }
  // (x * 0.5) * (1 + f)
  for (auto [halfX, onePlus] : {std::pair(root.getLhs(), root.getRhs()),
                                std::pair(root.getRhs(), root.getLhs())}) {
    auto half = matchOperands(defining<MulOp>(halfX).getOperation(),
                              [](Value v) { return isSplatNear(v, 0.5); });
    if (!half)
      continue;
    if (auto isTanh = tryInner(onePlus, half->second))
      return std::make_pair(half->second, *isTanh);
  }
  return std::nullopt;
}

struct GeluPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    auto match = matchGelu(root);
    if (!match || match->first.getType() != root.getType())
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(root, match->first,
                                        match->second ? "tanh" : "none");
    return success();
  }
};

struct RaiseGeluPass : impl::RaiseGeluBase<RaiseGeluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<GeluPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace colossal::train
