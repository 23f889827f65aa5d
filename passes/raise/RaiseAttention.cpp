//===- RaiseAttention.cpp - scaled dot-product chains to train.attention --===//
//
// Matched backwards from the second matmul:
//
//   out = matmul(softmax(add?(where?(scale?(matmul(scale?(q), kT))))), v)
//
// with an additive mask, a boolean one (where), or both when one of them is
// causal (Hugging Face's GPT-2 hides the future with a where, then adds the
// padding mask's scores). A constant mask that hides exactly the positions
// after the diagonal becomes `causal = true` (the kernels then skip masked
// blocks and ring attention can skip whole steps); any other mask stays an
// operand.
//
// Attention whose weights pass through a dropout (a training-mode export)
// takes its probability and site: the fused kernels draw, element by
// element, the mask the `train.dropout` would have drawn from the run's
// seed, the step and the element's place in the global batch (Philox.h), so
// N ranks, microbatches and recomputation still reproduce one rank's masks,
// and no s x s matrix is kept.
//
// Grouped-query attention, its key/value heads repeated for each query head
// of a group (Unsqueeze, Expand, Reshape), reads the unrepeated heads.
//
// A mask that a trainable parameter reaches (T5's relative position bias)
// stays unfused: the op gives its mask no gradient.
//
//===----------------------------------------------------------------------===//

#include "PatternUtils.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <map>
#include <tuple>

using namespace mlir;

namespace colossal::train {
#define GEN_PASS_DEF_RAISEATTENTION
#include "passes/raise/Passes.h.inc"

namespace {

/// Reads a constant mask as a [sq, sk] matrix when all its leading
/// dimensions are 1; `hidden(i, j)` says whether position (i, j) is masked.
/// Returns whether the hidden set is exactly j > i + (sk - sq).
template <typename Hidden>
bool isCausalMatrix(DenseElementsAttr attr, int64_t sq, int64_t sk, Hidden hidden) {
  auto type = llvm::cast<RankedTensorType>(attr.getType());
  if (type.getRank() < 2 || type.getNumElements() != sq * sk)
    return false;
  int64_t offset = sk - sq;
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j)
      if (hidden(i * sk + j) != (j > i + offset))
        return false;
  return true;
}

bool isCausalAdditiveMask(Value mask, int64_t sq, int64_t sk) {
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)) || !llvm::isa<FloatType>(attr.getElementType()))
    return false;
  SmallVector<double> values;
  for (APFloat v : attr.getValues<APFloat>())
    values.push_back(v.convertToDouble());
  if ((int64_t)values.size() != sq * sk)
    return false;
  for (double v : values)
    if (v != 0 && v > -1e4)
      return false;
  return isCausalMatrix(attr, sq, sk, [&](int64_t e) { return values[e] <= -1e4; });
}

bool isCausalBooleanMask(Value condition, int64_t sq, int64_t sk, bool trueHides) {
  DenseElementsAttr attr;
  if (!matchPattern(condition, m_Constant(&attr)) || !attr.getElementType().isInteger(1))
    return false;
  SmallVector<bool> values(attr.getValues<bool>());
  if ((int64_t)values.size() != sq * sk)
    return false;
  return isCausalMatrix(attr, sq, sk, [&](int64_t e) { return values[e] == trueHides; });
}

/// Whether a constant of positions counts up by one along dimension `dim`
/// of its `rank` (every other dimension 1) from `first`, `count` of them.
bool isPositionRun(Value value, int64_t rank, int64_t dim, int64_t count, int64_t &first) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !llvm::isa<IntegerType>(attr.getElementType()))
    return false;
  auto type = llvm::cast<RankedTensorType>(attr.getType());
  if (type.getRank() > rank || type.getNumElements() != count)
    return false;
  // Leading dimensions broadcast; the run is along `dim` counted from the end.
  int64_t fromEnd = rank - dim;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.getRank() - d != fromEnd && type.getDimSize(d) != 1)
      return false;
  if (count > 1 && (type.getRank() < fromEnd || type.getDimSize(type.getRank() - fromEnd) != count))
    return false;
  int64_t expected = 0, i = 0;
  for (const APInt &v : attr.getValues<APInt>()) {
    int64_t x = v.getSExtValue();
    if (i == 0)
      first = expected = x;
    if (x != expected)
      return false;
    ++expected, ++i;
  }
  return true;
}

/// A boolean mask computed rather than stored: the keys' positions compared
/// with the queries' (`greater(j, i + offset)`, or `less(i + offset, j)`),
/// true where hidden. The importer leaves it an op when the sequence makes
/// the matrix too large to fold; it is causal when the offset is sk - sq.
bool isCausalComparison(Value condition, int64_t sq, int64_t sk, bool trueHides) {
  Value columns, rows;
  if (auto greater = defining<GreaterOp>(condition))
    columns = greater.getLhs(), rows = greater.getRhs();
  else if (auto less = defining<LessOp>(condition))
    rows = less.getLhs(), columns = less.getRhs();
  else
    return false;
  int64_t rank = llvm::cast<RankedTensorType>(condition.getType()).getRank(), column0 = 0, row0 = 0;
  return trueHides && rank >= 2 && isPositionRun(columns, rank, rank - 1, sk, column0) &&
         isPositionRun(rows, rank, rank - 2, sq, row0) && row0 - column0 == sk - sq;
}

/// Whether a constant mask is causal, remembered per (mask, sq, sk, kind):
/// every layer of a model reads the same mask, and checking one of a long
/// sequence walks millions of elements.
using CausalCache = std::map<std::tuple<const void *, int64_t, int64_t, int>, bool>;

bool cachedCausal(CausalCache &cache, Value mask, int64_t sq, int64_t sk, int kind,
                  llvm::function_ref<bool()> check) {
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)))
    return false;
  auto key = std::make_tuple(attr.getAsOpaquePointer(), sq, sk, kind);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, check()).first;
  return it->second;
}

/// Whether a trainable parameter reaches `value` (T5's relative position
/// bias, added to the scores as their mask): the fused op gives its mask no
/// gradient, so such attention stays unfused.
bool readsTrainable(Value value) {
  SmallVector<Value> work{value};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op)
      continue;
    if (auto read = dyn_cast<ParamOp>(op)) {
      auto declared = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(read, read.getNameAttr());
      if (!declared || declared.getTrainable())
        return true;
    }
    for (Value operand : op->getOperands())
      if (seen.insert(operand).second)
        work.push_back(operand);
  }
  return false;
}

struct Match {
  Value query, keyTransposed, value, mask;
  double scale = 1.0;
  /// Dropout on the probabilities and the site that keys its masks.
  double dropout = 0.0;
  int64_t dropoutSite = 0;
  bool causal = false;
  bool invertMask = false; // a boolean mask that is true where hidden
};

/// A one-element constant: the scale of the scores.
bool isScalarConstant(Value value) {
  return splatValue(value).has_value() &&
         llvm::cast<RankedTensorType>(value.getType()).getNumElements() == 1;
}

/// Peels a multiplication or division by a scalar constant into `scale`.
Value peelScale(Value value, double &scale) {
  if (auto div = defining<DivOp>(value); div && isScalarConstant(div.getRhs()) &&
                                         *splatValue(div.getRhs()) != 0) {
    scale /= *splatValue(div.getRhs());
    return div.getLhs();
  }
  if (auto mul = defining<MulOp>(value))
    if (auto m = matchOperands(mul, isScalarConstant)) {
      scale *= *splatValue(m->first);
      return m->second;
    }
  return value;
}

std::optional<Match> matchAttention(MatMulOp output, CausalCache &cache) {
  Match match;
  match.value = output.getRhs();
  Value probabilities = output.getLhs();
  // Dropout on the probabilities (none when its probability is zero, as in
  // an export with dropout off) joins the op, keeping its site.
  if (auto dropout = defining<DropoutOp>(probabilities)) {
    if (!dropout.getMask().use_empty() || dropout.getMeshAxis() || !dropout.getOutput().hasOneUse())
      return std::nullopt;
    match.dropout = dropout.getRatio().convertToDouble();
    match.dropoutSite = match.dropout == 0 ? 0 : int64_t(dropout.getSite());
    probabilities = dropout.getInput();
  }
  auto softmax = defining<SoftmaxOp>(probabilities);
  if (!softmax || !probabilities.hasOneUse())
    return std::nullopt;
  auto scoresType = llvm::cast<RankedTensorType>(softmax.getType());
  int64_t rank = scoresType.getRank();
  if (rank < 2 || normalizeAxis(int64_t(softmax.getAxis()), rank) != rank - 1)
    return std::nullopt;
  int64_t sq = scoresType.getDimSize(rank - 2), sk = scoresType.getDimSize(rank - 1);

  // The scores: a scaled product, under a boolean mask (where), an
  // additive one, or both (Hugging Face's GPT-2 hides the future with a
  // where and then adds the padding mask's scores).
  auto scaledProduct = [](Value v) {
    double scale = 1.0;
    return bool(defining<MatMulOp>(peelScale(v, scale)));
  };
  auto maskedProduct = [&](Value v) {
    auto where = defining<WhereOp>(v);
    return scaledProduct(v) || (where && (scaledProduct(where.getOnTrue()) || scaledProduct(where.getOnFalse())));
  };
  Value scores = softmax.getInput();
  if (auto add = defining<AddOp>(scores)) {
    // Additive mask: whichever operand is not the (masked) scaled product.
    for (auto [s, mask] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
      // The mask may not widen the scores (the op's mask broadcasts to them).
      if (!maskedProduct(s) || s.getType() != add.getType())
        continue;
      if (cachedCausal(cache, mask, sq, sk, 2, [&] { return isCausalAdditiveMask(mask, sq, sk); }))
        match.causal = true;
      else
        match.mask = mask;
      scores = s;
      break;
    }
  }
  if (auto where = defining<WhereOp>(scores)) {
    // where(hide, -inf, s) or where(keep, s, -inf).
    bool trueHides = isLargeNegative(where.getOnTrue());
    if (trueHides == isLargeNegative(where.getOnFalse()))
      return std::nullopt;
    Value condition = where.getCondition();
    Value kept = trueHides ? where.getOnFalse() : where.getOnTrue();
    if (kept.getType() != where.getType())
      return std::nullopt;
    if (cachedCausal(cache, condition, sq, sk, trueHides,
                     [&] { return isCausalBooleanMask(condition, sq, sk, trueHides); }) ||
        isCausalComparison(condition, sq, sk, trueHides)) {
      match.causal = true;
    } else {
      if (match.mask) // the op takes one mask besides the causal flag
        return std::nullopt;
      match.mask = condition;
      match.invertMask = trueHides;
    }
    scores = kept;
  }
  if (match.mask && readsTrainable(match.mask))
    return std::nullopt;
  Value product = peelScale(scores, match.scale);
  auto qk = defining<MatMulOp>(product);
  if (!qk || (scores != product && !scores.hasOneUse()))
    return std::nullopt;
  match.query = peelScale(qk.getLhs(), match.scale);
  match.keyTransposed = qk.getRhs();
  return match;
}

struct AttentionPattern : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rewriter) const override {
    std::optional<Match> match = matchAttention(op, cache);
    if (!match)
      return failure();
    auto qType = llvm::cast<RankedTensorType>(match->query.getType());
    auto ktType = llvm::cast<RankedTensorType>(match->keyTransposed.getType());
    auto vType = llvm::cast<RankedTensorType>(match->value.getType());
    int64_t rank = qType.getRank();
    if (rank < 2 || ktType.getRank() != rank || vType.getRank() != rank ||
        qType.getShape().drop_back(2) != ktType.getShape().drop_back(2) ||
        qType.getShape().drop_back(2) != vType.getShape().drop_back(2))
      return failure();
    Location loc = op.getLoc();
    Value mask = match->mask;
    if (mask && match->invertMask) {
      // where(hide, -inf, s): the op's boolean mask keeps where true.
      auto type = llvm::cast<RankedTensorType>(mask.getType());
      Value falseValue = ConstantOp::create(rewriter, 
          loc, DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()), false));
      mask = EqualOp::create(rewriter, loc, mask, falseValue);
    }
    SmallVector<int64_t> swap;
    for (int64_t d = 0; d < rank; ++d)
      swap.push_back(d);
    std::swap(swap[rank - 1], swap[rank - 2]);
    Value key = TransposeOp::create(rewriter, loc, match->keyTransposed,
                                             rewriter.getDenseI64ArrayAttr(swap));
    rewriter.replaceOpWithNewOp<AttentionOp>(
        op, op.getType(), match->query, key, match->value, mask, rewriter.getF32FloatAttr(match->scale),
        rewriter.getBoolAttr(match->causal), rewriter.getF32FloatAttr(float(match->dropout)), StringAttr(),
        rewriter.getI64IntegerAttr(match->dropoutSite), StringAttr());
    return success();
  }

  /// Lives as long as the pass run, whose context keeps the masks alive.
  mutable CausalCache cache;
};

/// Grouped-query attention's keys and values as exported: each key/value
/// head repeated for the query heads of its group, [..., kv, s, d] made
/// [..., kv, 1, s, d], broadcast to [..., kv, g, s, d] and reshaped to
/// [..., kv * g, s, d] (LLaMA's `repeat_kv`). Returns the unrepeated heads
/// (the [..., kv, 1, s, d] value, to be reshaped) and g.
std::optional<std::pair<Value, int64_t>> repeatedHeads(Value value) {
  auto reshape = defining<ReshapeOp>(value);
  if (!reshape)
    return std::nullopt;
  auto broadcast = defining<BroadcastOp>(reshape.getInput());
  if (!broadcast)
    return std::nullopt;
  ArrayRef<int64_t> out = llvm::cast<RankedTensorType>(value.getType()).getShape();
  ArrayRef<int64_t> wide = llvm::cast<RankedTensorType>(broadcast.getType()).getShape();
  ArrayRef<int64_t> single = llvm::cast<RankedTensorType>(broadcast.getInput().getType()).getShape();
  size_t rank = out.size();
  if (rank < 3 || wide.size() != rank + 1 || single.size() != rank + 1)
    return std::nullopt;
  // [..., kv, g, s, d] -> [..., kv * g, s, d]: heads at rank - 3.
  size_t heads = rank - 3;
  int64_t groups = wide[heads + 1];
  if (single[heads + 1] != 1 || groups < 2 || wide[heads] * groups != out[heads] ||
      out.take_front(heads) != wide.take_front(heads) || out.drop_front(heads + 1) != wide.drop_front(heads + 2))
    return std::nullopt;
  for (size_t d = 0; d < single.size(); ++d)
    if (d != heads + 1 && single[d] != wide[d])
      return std::nullopt;
  return std::pair(broadcast.getInput(), groups);
}

/// Attention over repeated key/value heads reads the unrepeated ones: the
/// op's grouped form, whose kernels index a query head's key/value head
/// instead of materialising copies, and whose heads a tensor axis splits by
/// key/value group.
struct SharedKeyValueHeadsPattern : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rewriter) const override {
    std::optional<std::pair<Value, int64_t>> key = repeatedHeads(op.getKey()), value = repeatedHeads(op.getValue());
    if (!key || !value || key->second != value->second || op.getRingAxis())
      return failure();
    auto unrepeated = [&](Value single, Value repeated) -> Value {
      auto type = llvm::cast<RankedTensorType>(repeated.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[shape.size() - 3] /= key->second;
      return ReshapeOp::create(rewriter, op.getLoc(), RankedTensorType::get(shape, type.getElementType()), single);
    };
    Value k = unrepeated(key->first, op.getKey()), v = unrepeated(value->first, op.getValue());
    rewriter.modifyOpInPlace(op, [&] {
      op.getKeyMutable().assign(k);
      op.getValueMutable().assign(v);
    });
    return success();
  }
};

struct RaiseAttentionPass : impl::RaiseAttentionBase<RaiseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<AttentionPattern, SharedKeyValueHeadsPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace colossal::train
