//===- FoldTransposes.cpp ---------------------------------------------===//

#include "passes/memory/FoldTransposes.h"
#include "passes/memory/Passes.h"

#include "colossal/Dialect/Dist/Stages.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace colossal::memory {

#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#include "passes/memory/Passes.h.inc"

using namespace mlir;

namespace {

bool isMatrix(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getRank() == 2; }

/// `v`'s source when `v` is a matrix transpose, else null.
Value transposedFrom(Value v) {
  auto t = v.getDefiningOp<train::TransposeOp>();
  if (!t || !isMatrix(t.getInput()) || t.getPerm() != llvm::ArrayRef<int64_t>{1, 0})
    return nullptr;
  return t.getInput();
}

/// A plain product: no addend, no scaling, whose transpose is itself a
/// product.
bool isPlainGemm(train::GemmOp g) {
  return !g.getC() && g.getAlpha().convertToDouble() == 1.0 && g.getBeta().convertToDouble() == 1.0;
}

void eraseIfUnused(Value v) {
  if (Operation *def = v ? v.getDefiningOp() : nullptr; def && def->use_empty())
    def->erase();
}

/// matmul(transpose(a), b), matmul(a, transpose(b)) on matrices: one gemm
/// reading the transposed operands in place.
int64_t foldIntoMatmuls(Block &body) {
  int64_t folded = 0;
  for (auto m : llvm::make_early_inc_range(body.getOps<train::MatMulOp>())) {
    if (!isMatrix(m.getLhs()) || !isMatrix(m.getRhs()))
      continue;
    Value a = transposedFrom(m.getLhs()), b = transposedFrom(m.getRhs());
    if (!a && !b)
      continue;
    OpBuilder builder(m);
    Value lhs = m.getLhs(), rhs = m.getRhs();
    auto gemm = train::GemmOp::create(builder, m.getLoc(), m.getType(), a ? a : lhs, b ? b : rhs, Value(),
                                      builder.getBoolAttr(bool(a)), builder.getBoolAttr(bool(b)),
                                      builder.getF32FloatAttr(1.0f), builder.getF32FloatAttr(1.0f));
    dist::copyStage(m, gemm);
    m.getResult().replaceAllUsesWith(gemm.getResult());
    m->erase();
    folded += int64_t(bool(a)) + int64_t(bool(b));
    eraseIfUnused(lhs);
    eraseIfUnused(rhs);
  }
  return folded;
}

/// linear(x, transpose(w), b), and SUMMA's product of blocks likewise: the
/// product reads w transposed in place (its `transpose_weight` flag), so the
/// forward pass (and each re-run of it) makes no weight-sized copy.
template <typename Product> int64_t foldIntoProducts(Block &body) {
  int64_t folded = 0;
  for (auto p : llvm::make_early_inc_range(body.getOps<Product>())) {
    Value weight = p.getWeight(), source = transposedFrom(weight);
    if (p.getTransposeWeight() || !source)
      continue;
    p.getWeightMutable().assign(source);
    p.setTransposeWeight(true);
    eraseIfUnused(weight);
    ++folded;
  }
  return folded;
}

/// SUMMA's gradient op reading a transposed weight block (a weight stored
/// [out, in]) reads it transposed in place and makes the gradient in the
/// stored layout: no weight-sized copy, and the transpose of the weight
/// gradient back to the stored layout goes.
int64_t foldIntoGridLinearGrads(Block &body) {
  int64_t folded = 0;
  for (auto g : llvm::make_early_inc_range(body.getOps<dist::GridLinearGradOp>())) {
    Value weight = g.getWeight(), source = transposedFrom(weight);
    if (g.getTransposeWeight() || !source)
      continue;
    OpBuilder builder(g);
    auto stored = dist::GridLinearGradOp::create(builder, g.getLoc(), g.getInputGrad().getType(), source.getType(),
                                                 g.getInput(), source, g.getOutputGrad(), g.getRowAxisAttr(),
                                                 g.getColumnAxisAttr(), builder.getUnitAttr());
    dist::copyStage(g, stored);
    g.getInputGrad().replaceAllUsesWith(stored.getInputGrad());
    SmallVector<train::TransposeOp> back;
    for (Operation *user : g.getWeightGrad().getUsers())
      if (auto t = llvm::dyn_cast<train::TransposeOp>(user); t && transposedFrom(t.getResult()))
        back.push_back(t);
    for (train::TransposeOp t : back) {
      t.getResult().replaceAllUsesWith(stored.getWeightGrad());
      t->erase();
    }
    if (!g.getWeightGrad().use_empty()) {
      builder.setInsertionPointAfter(stored);
      auto transposed = train::TransposeOp::create(builder, g.getLoc(), weight.getType(), stored.getWeightGrad(),
                                                   builder.getDenseI64ArrayAttr({1, 0}));
      dist::copyStage(g, transposed);
      g.getWeightGrad().replaceAllUsesWith(transposed.getResult());
    }
    g->erase();
    eraseIfUnused(weight);
    ++folded;
  }
  return folded;
}

/// The product transposed, `g`'s operands swapped and each flag flipped:
/// (op(A) op(B))^T = op(B)^T op(A)^T. Made where `g` is.
Value transposedProduct(train::GemmOp g, Type type) {
  OpBuilder builder(g);
  auto product = train::GemmOp::create(builder, g.getLoc(), type, g.getB(), g.getA(), Value(),
                                       builder.getBoolAttr(!g.getTransB()), builder.getBoolAttr(!g.getTransA()),
                                       builder.getF32FloatAttr(1.0f), builder.getF32FloatAttr(1.0f));
  dist::copyStage(g, product);
  return product;
}

/// transpose(gemm(a, b)) where the transpose is the product's only reader,
/// and transpose(all_reduce(gemm(a, b))) likewise (a weight gradient's
/// partial sums over a sequence axis: an elementwise sum commutes with
/// the transpose, so the ranks sum the product made transposed).
int64_t foldTransposedProducts(Block &body) {
  int64_t folded = 0;
  for (auto t : llvm::make_early_inc_range(body.getOps<train::TransposeOp>())) {
    if (!transposedFrom(t.getResult()))
      continue;
    Value input = t.getInput();
    auto sum = input.getDefiningOp<dist::AllReduceOp>();
    if (sum && sum->hasOneUse())
      input = sum.getInput();
    auto g = input.getDefiningOp<train::GemmOp>();
    if (!g || !isPlainGemm(g) || !g->hasOneUse())
      continue;
    Value product = transposedProduct(g, t.getType());
    if (sum) {
      OpBuilder builder(sum);
      product = dist::AllReduceOp::create(builder, sum.getLoc(), t.getType(), product, sum.getAxisAttr());
      dist::copyStage(sum, product.getDefiningOp());
    }
    t.getResult().replaceAllUsesWith(product);
    t->erase();
    if (sum)
      sum->erase();
    g->erase();
    ++folded;
  }
  return folded;
}

} // namespace

FailureOr<int64_t> foldTransposesIntoProducts(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step)
    return module.emitError() << "train-fold-transposes needs @forward_backward (run train-autodiff first)";
  Block &body = step.getBody().front();
  int64_t folded = foldIntoMatmuls(body);
  folded += foldIntoProducts<train::LinearOp>(body);
  folded += foldIntoProducts<dist::GridLinearOp>(body);
  folded += foldIntoGridLinearGrads(body);
  folded += foldTransposedProducts(body);
  return folded;
}

namespace {

struct FoldTransposesPass : impl::FoldTransposesPassBase<FoldTransposesPass> {
  using FoldTransposesPassBase::FoldTransposesPassBase;

  void runOnOperation() override {
    if (failed(foldTransposesIntoProducts(getOperation())))
      signalPassFailure();
  }
};

} // namespace

} // namespace colossal::memory
