//===- ShardingRules.cpp - the factor rule of every train op ----*- C++ -*-===//
//
// One function per op family. The conventions are those of ShardingRule.h:
// parallel factors split freely, reduction factors leave partial sums, whole
// factors stay unsplit unless a special algorithm takes them.
//
//===----------------------------------------------------------------------===//

#include "colossal/Dialect/Train/TrainDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace colossal::train;

namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

/// Builds rules dimension by dimension.
class RuleBuilder {
public:
  explicit RuleBuilder(Operation *op) {
    rule.operands.resize(op->getNumOperands());
    rule.results.resize(op->getNumResults());
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      rule.operands[i].resize(shapeOf(v).size());
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      rule.results[i].resize(shapeOf(v).size());
  }

  int factor(int64_t size, FactorKind kind = FactorKind::Parallel) {
    return rule.addFactor(size, kind);
  }
  void operand(unsigned index, unsigned dim, int f) { rule.operands[index][dim].push_back(f); }
  void result(unsigned index, unsigned dim, int f) { rule.results[index][dim].push_back(f); }

  /// Maps operand `index` onto the factors of the result dimensions
  /// `resultFactors` with numpy broadcasting (trailing alignment); a size-1
  /// operand dimension facing a larger one gets no factor.
  void broadcastOperand(unsigned index, ArrayRef<int> resultFactors,
                        ArrayRef<int64_t> resultShape, ArrayRef<int64_t> operandShape) {
    size_t offset = resultShape.size() - operandShape.size();
    for (size_t d = 0; d < operandShape.size(); ++d)
      if (operandShape[d] == resultShape[d + offset])
        operand(index, d, resultFactors[d + offset]);
  }

  ShardingRule take() { return std::move(rule); }

  ShardingRule rule;
};

/// Elementwise ops (with broadcasting), one factor per result dimension;
/// dimensions in `wholeDims` of the result must stay unsplit.
ShardingRule elementwiseRule(Operation *op, ArrayRef<int64_t> wholeDims = {}) {
  RuleBuilder b(op);
  ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  SmallVector<int> factors;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
    bool whole = llvm::is_contained(wholeDims, d);
    factors.push_back(b.factor(shape[d], whole ? FactorKind::Whole : FactorKind::Parallel));
    for (unsigned r = 0; r < op->getNumResults(); ++r)
      b.result(r, d, factors.back());
  }
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    b.broadcastOperand(i, factors, shape, shapeOf(v));
  return b.take();
}

/// matmul with numpy semantics: batch dims (broadcast), m, n parallel; k reduction.
ShardingRule matmulRule(MatMulOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> lhs = shapeOf(op.getLhs()), rhs = shapeOf(op.getRhs()),
                    out = shapeOf(op.getResult());
  bool lhsVector = lhs.size() == 1, rhsVector = rhs.size() == 1;
  size_t batchRank = out.size() - (lhsVector ? 0 : 1) - (rhsVector ? 0 : 1);
  SmallVector<int> batch;
  for (size_t d = 0; d < batchRank; ++d) {
    batch.push_back(b.factor(out[d]));
    b.result(0, d, batch.back());
  }
  auto mapBatch = [&](unsigned index, ArrayRef<int64_t> shape, size_t matrixRank) {
    ArrayRef<int64_t> operandBatch = shape.drop_back(matrixRank);
    size_t offset = batchRank - operandBatch.size();
    for (size_t d = 0; d < operandBatch.size(); ++d)
      if (operandBatch[d] == out[d + offset])
        b.operand(index, d, batch[d + offset]);
  };
  mapBatch(0, lhs, lhsVector ? 1 : 2);
  mapBatch(1, rhs, rhsVector ? 1 : 2);
  int k = b.factor(lhs.back(), FactorKind::Reduction);
  b.operand(0, lhs.size() - 1, k);
  b.operand(1, rhsVector ? 0 : rhs.size() - 2, k);
  size_t resultDim = batchRank;
  if (!lhsVector) {
    int m = b.factor(lhs[lhs.size() - 2]);
    b.operand(0, lhs.size() - 2, m);
    b.result(0, resultDim++, m);
  }
  if (!rhsVector) {
    int n = b.factor(rhs.back());
    b.operand(1, rhs.size() - 1, n);
    b.result(0, resultDim, n);
  }
  return b.take();
}

ShardingRule gemmRule(GemmOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> out = shapeOf(op.getResult());
  int m = b.factor(out[0]), n = b.factor(out[1]);
  int k = b.factor(shapeOf(op.getA())[op.getTransA() ? 0 : 1], FactorKind::Reduction);
  b.operand(0, op.getTransA() ? 1 : 0, m);
  b.operand(0, op.getTransA() ? 0 : 1, k);
  b.operand(1, op.getTransB() ? 1 : 0, k);
  b.operand(1, op.getTransB() ? 0 : 1, n);
  b.result(0, 0, m);
  b.result(0, 1, n);
  if (op.getC())
    b.broadcastOperand(2, {m, n}, out, shapeOf(op.getC()));
  return b.take();
}

/// x [..., k] times w [k, n] ([n, k] when `transposed`): the leading
/// dimensions parallel, k a reduction; returns n's factor.
int productFactors(RuleBuilder &b, ArrayRef<int64_t> input, ArrayRef<int64_t> weight, bool transposed) {
  for (size_t d = 0; d + 1 < input.size(); ++d) {
    int f = b.factor(input[d]);
    b.operand(0, d, f);
    b.result(0, d, f);
  }
  int k = b.factor(weight[transposed ? 1 : 0], FactorKind::Reduction), n = b.factor(weight[transposed ? 0 : 1]);
  b.operand(0, input.size() - 1, k);
  b.operand(1, transposed ? 1 : 0, k);
  b.operand(1, transposed ? 0 : 1, n);
  b.result(0, input.size() - 1, n);
  return n;
}

ShardingRule linearRule(LinearOp op) {
  RuleBuilder b(op);
  int n = productFactors(b, shapeOf(op.getInput()), shapeOf(op.getWeight()), op.getTransposeWeight());
  if (op.getBias())
    b.operand(2, 0, n);
  return b.take();
}

/// SUMMA's product of blocks (dist.grid_linear) reads like a linear layer
/// on them.
ShardingRule gridLinearRule(colossal::dist::GridLinearOp op) {
  RuleBuilder b(op);
  productFactors(b, shapeOf(op.getInput()), shapeOf(op.getWeight()), op.getTransposeWeight());
  return b.take();
}

/// conv: batch and output channels split freely; input channels are a
/// reduction (ungrouped only); spatial dims need halo exchange, so stay whole.
ShardingRule convRule(ConvOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> input = shapeOf(op.getInput()), weight = shapeOf(op.getWeight()),
                    out = shapeOf(op.getResult());
  int n = b.factor(input[0]), m = b.factor(weight[0]);
  int c = b.factor(input[1], op.getGroup() == 1 ? FactorKind::Reduction : FactorKind::Whole);
  b.operand(0, 0, n);
  b.result(0, 0, n);
  b.operand(1, 0, m);
  b.result(0, 1, m);
  b.operand(0, 1, c);
  if (weight[1] == input[1])
    b.operand(1, 1, c);
  else
    b.operand(1, 1, b.factor(weight[1], FactorKind::Whole));
  for (size_t d = 2; d < input.size(); ++d) {
    b.operand(0, d, b.factor(input[d], FactorKind::Whole));
    b.operand(1, d, b.factor(weight[d], FactorKind::Whole));
    b.result(0, d, b.factor(out[d], FactorKind::Whole));
  }
  if (op.getBias())
    b.operand(2, 0, m);
  return b.take();
}

ShardingRule einsumRule(EinsumOp op) {
  RuleBuilder b(op);
  StringRef equation = op.getEquation();
  StringRef inputs = equation.split("->").first;
  StringRef output = equation.split("->").second.trim();
  llvm::DenseMap<char, int> factors;
  auto factorOf = [&](char letter, int64_t size) {
    auto it = factors.find(letter);
    if (it != factors.end())
      return it->second;
    FactorKind kind = output.contains(letter) ? FactorKind::Parallel : FactorKind::Reduction;
    return factors[letter] = b.factor(size, kind);
  };
  // Sizes come from the result first so that a broadcast size-1 operand
  // dimension does not define the factor's size.
  ArrayRef<int64_t> out = shapeOf(op.getResult());
  for (auto [d, letter] : llvm::enumerate(output))
    b.result(0, d, factorOf(letter, out[d]));
  SmallVector<StringRef> terms;
  inputs.split(terms, ',');
  for (auto [i, term] : llvm::enumerate(terms)) {
    ArrayRef<int64_t> shape = shapeOf(op.getInputs()[i]);
    for (auto [d, letter] : llvm::enumerate(term.trim())) {
      int f = factorOf(letter, shape[d]);
      if (shape[d] == b.rule.factors[f].size)
        b.operand(i, d, f);
    }
  }
  return b.take();
}

/// Ops that treat dims [axis, rank) as one unit (softmax axis, norm axes).
ShardingRule trailingWholeRule(Operation *op, int64_t firstWholeDim, int64_t lastWholeDim) {
  int64_t rank = shapeOf(op->getResult(0)).size();
  SmallVector<int64_t> whole;
  for (int64_t d = firstWholeDim; d <= lastWholeDim && d < rank; ++d)
    whole.push_back(d);
  return elementwiseRule(op, whole);
}

ShardingRule attentionRule(AttentionOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey()),
                    v = shapeOf(op.getValue());
  size_t rank = q.size();
  SmallVector<int> scoreFactors;
  // Grouped-query attention: the query heads are the key/value heads (major)
  // times the heads of a group (minor), which the keys and values lack.
  std::optional<int> groupFactor;
  for (size_t d = 0; d + 2 < rank; ++d) {
    int f = b.factor(k[d]);
    for (unsigned i = 0; i < 3; ++i)
      b.operand(i, d, f);
    b.result(0, d, f);
    if (q[d] != k[d]) {
      groupFactor = b.factor(q[d] / k[d]);
      b.operand(0, d, *groupFactor);
      b.result(0, d, *groupFactor);
    }
    scoreFactors.push_back(f);
  }
  // Query positions split freely; key positions and the head size are whole
  // (ring attention is the special algorithm for the key length).
  int sq = b.factor(q[rank - 2]), sk = b.factor(k[rank - 2], FactorKind::Whole);
  int d = b.factor(q[rank - 1], FactorKind::Whole), dv = b.factor(v[rank - 1]);
  b.operand(0, rank - 2, sq);
  b.operand(0, rank - 1, d);
  b.operand(1, rank - 2, sk);
  b.operand(1, rank - 1, d);
  b.operand(2, rank - 2, sk);
  b.operand(2, rank - 1, dv);
  b.result(0, rank - 2, sq);
  b.result(0, rank - 1, dv);
  if (op.getMask()) {
    SmallVector<int64_t> scores(q.drop_back(1));
    scores.push_back(k[rank - 2]);
    scoreFactors.push_back(sq);
    scoreFactors.push_back(sk);
    ArrayRef<int64_t> mask = shapeOf(op.getMask());
    b.broadcastOperand(3, scoreFactors, scores, mask);
    // A mask over the query heads carries the group factor too.
    size_t heads = rank - 3, offset = scores.size() - mask.size();
    if (groupFactor && heads >= offset && mask[heads - offset] == scores[heads]) {
      b.rule.operands[3][heads - offset].clear();
      b.operand(3, unsigned(heads - offset), scoreFactors[heads]);
      b.operand(3, unsigned(heads - offset), *groupFactor);
    }
  }
  return b.take();
}

ShardingRule reduceRule(Operation *op, ArrayRef<int64_t> axes, bool keepdims) {
  RuleBuilder b(op);
  ArrayRef<int64_t> input = shapeOf(op->getOperand(0));
  int64_t rank = input.size(), resultDim = 0;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = axes.empty() || llvm::any_of(axes, [&](int64_t a) {
                     return normalizeAxis(a, rank) == d;
                   });
    int f = b.factor(input[d], reduced ? FactorKind::Reduction : FactorKind::Parallel);
    b.operand(0, d, f);
    if (!reduced)
      b.result(0, resultDim++, f);
    else if (keepdims)
      ++resultDim;
  }
  return b.take();
}

/// Losses over [N, C, d...] scores: the class axis is whole (vocabulary-
/// parallel cross-entropy is the special algorithm); the sample axes are
/// parallel, or reductions when the loss is summed or averaged.
ShardingRule classLossRule(Operation *op, StringRef reduction) {
  RuleBuilder b(op);
  ArrayRef<int64_t> scores = shapeOf(op->getOperand(0));
  FactorKind sampleKind = reduction == "none" ? FactorKind::Parallel : FactorKind::Reduction;
  int c = b.factor(scores[1], FactorKind::Whole);
  b.operand(0, 1, c);
  if (op->getNumOperands() > 2)
    b.operand(2, 0, c);
  int64_t labelDim = 0;
  for (size_t d = 0; d < scores.size(); ++d) {
    if (d == 1)
      continue;
    int f = b.factor(scores[d], sampleKind);
    b.operand(0, d, f);
    b.operand(1, labelDim, f);
    if (sampleKind == FactorKind::Parallel)
      b.result(0, labelDim, f);
    ++labelDim;
  }
  return b.take();
}

ShardingRule gatherRule(GatherOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> data = shapeOf(op.getData()), indices = shapeOf(op.getIndices());
  int64_t axis = normalizeAxis(static_cast<int64_t>(op.getAxis()), data.size());
  int64_t resultDim = 0;
  for (int64_t d = 0; d < (int64_t)data.size(); ++d) {
    if (d == axis) {
      // The table's gathered axis: vocabulary-parallel embedding splits it
      // with a masked lookup and an all-reduce, a special algorithm.
      b.operand(0, d, b.factor(data[d], FactorKind::Whole));
      for (size_t i = 0; i < indices.size(); ++i) {
        int f = b.factor(indices[i]);
        b.operand(1, i, f);
        b.result(0, resultDim++, f);
      }
      continue;
    }
    int f = b.factor(data[d]);
    b.operand(0, d, f);
    b.result(0, resultDim++, f);
  }
  return b.take();
}

/// Dimensions whose extent changes (sliced, concatenated, split) stay whole.
ShardingRule extentChangingRule(Operation *op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> first = shapeOf(op->getOperand(0));
  for (size_t d = 0; d < first.size(); ++d) {
    bool changes = llvm::any_of(op->getOperands(), [&](Value v) {
                     return shapeOf(v)[d] != first[d];
                   }) ||
                   llvm::any_of(op->getResults(), [&](Value v) {
                     return shapeOf(v)[d] != first[d];
                   });
    int f = b.factor(first[d], changes ? FactorKind::Whole : FactorKind::Parallel);
    if (changes) {
      // Each tensor gets its own whole factor: the extents differ.
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        b.operand(i, d, i == 0 ? f : b.factor(shapeOf(op->getOperand(i))[d], FactorKind::Whole));
      for (unsigned r = 0; r < op->getNumResults(); ++r)
        b.result(r, d, b.factor(shapeOf(op->getResult(r))[d], FactorKind::Whole));
      continue;
    }
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      b.operand(i, d, f);
    for (unsigned r = 0; r < op->getNumResults(); ++r)
      b.result(r, d, f);
  }
  return b.take();
}

/// reshape: within each group of dimensions whose products agree, the
/// boundaries of both sides refine each other into factors when every
/// boundary divides the next ([6] <-> [2, 3]: factors 2 and 3). A group whose
/// boundaries do not chain ([6] <-> [4] x ... never arises; [6, 4] <-> [4, 6]
/// does) becomes one whole factor.
ShardingRule reshapeRule(ReshapeOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // Size-1 dimensions carry no factor.
    if (i < in.size() && in[i] == 1) {
      ++i;
      continue;
    }
    if (o < out.size() && out[o] == 1) {
      ++o;
      continue;
    }
    // Grow a group until the products agree.
    size_t i0 = i, o0 = o;
    int64_t pin = i < in.size() ? in[i++] : 1, pout = o < out.size() ? out[o++] : 1;
    while (pin != pout) {
      if (pin < pout && i < in.size())
        pin *= in[i++];
      else if (o < out.size())
        pout *= out[o++];
      else
        break;
    }
    // Cumulative boundaries of both sides.
    SmallVector<int64_t> bounds;
    int64_t acc = 1;
    for (size_t d = i0; d < i; ++d)
      bounds.push_back(acc *= in[d]);
    acc = 1;
    for (size_t d = o0; d < o; ++d)
      bounds.push_back(acc *= out[d]);
    llvm::sort(bounds);
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    bool chains = true;
    for (size_t k = 1; k < bounds.size(); ++k)
      chains &= bounds[k] % bounds[k - 1] == 0;
    if (!chains) {
      int f = b.factor(pin, FactorKind::Whole);
      for (size_t d = i0; d < i; ++d)
        if (in[d] != 1)
          b.operand(0, d, f);
      for (size_t d = o0; d < o; ++d)
        if (out[d] != 1)
          b.result(0, d, f);
      continue;
    }
    SmallVector<int> factors;
    int64_t previous = 1;
    for (int64_t bound : bounds) {
      factors.push_back(b.factor(bound / previous));
      previous = bound;
    }
    // A dimension covers the factors between its cumulative boundaries.
    auto assign = [&](ArrayRef<int64_t> shape, size_t begin, size_t end, bool isOperand) {
      int64_t lo = 1;
      for (size_t d = begin; d < end; ++d) {
        int64_t hi = lo * shape[d];
        for (auto [k, bound] : llvm::enumerate(bounds)) {
          int64_t factorLo = k == 0 ? 1 : bounds[k - 1];
          if (factorLo >= lo && bound <= hi && shape[d] != 1) {
            if (isOperand)
              b.operand(0, d, factors[k]);
            else
              b.result(0, d, factors[k]);
          }
        }
        lo = hi;
      }
    };
    // Factors are ordered minor-cumulative first; dims list them major first.
    assign(in, i0, i, true);
    assign(out, o0, o, false);
  }
  // Row-major order: the outermost factor of a merged dimension is its major.
  for (TensorFactors *tensor : {&b.rule.operands[0], &b.rule.results[0]})
    for (DimFactors &dim : *tensor)
      std::sort(dim.begin(), dim.end());
  return b.take();
}

ShardingRule transposeRule(TransposeOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> input = shapeOf(op.getInput());
  SmallVector<int> factors;
  for (size_t d = 0; d < input.size(); ++d) {
    factors.push_back(b.factor(input[d]));
    b.operand(0, d, factors.back());
  }
  for (auto [d, p] : llvm::enumerate(op.getPerm()))
    b.result(0, d, factors[p]);
  return b.take();
}

} // namespace

namespace colossal::train {

ShardingRule computeShardingRule(Operation *op) {
  int64_t rank = op->getNumResults() ? shapeOf(op->getResult(0)).size() : 0;
  return llvm::TypeSwitch<Operation *, ShardingRule>(op)
      .Case([](MatMulOp op) { return matmulRule(op); })
      .Case([](GemmOp op) { return gemmRule(op); })
      .Case([](LinearOp op) { return linearRule(op); })
      .Case([](colossal::dist::GridLinearOp op) { return gridLinearRule(op); })
      .Case([](ConvOp op) { return convRule(op); })
      .Case([](EinsumOp op) { return einsumRule(op); })
      .Case([](AttentionOp op) { return attentionRule(op); })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto op) {
        int64_t axis = normalizeAxis(static_cast<int64_t>(op.getAxis()), rank);
        return trailingWholeRule(op, axis, axis);
      })
      .Case<LayerNormOp, RmsNormOp>([&](auto op) {
        return trailingWholeRule(op, normalizeAxis(static_cast<int64_t>(op.getAxis()), rank),
                                 rank - 1);
      })
      .Case([&](TriluOp op) { return trailingWholeRule(op, rank - 2, rank - 1); })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(
          [](auto op) { return reduceRule(op, op.getAxes(), op.getKeepdims()); })
      .Case<SoftmaxCrossEntropyLossOp, NegativeLogLikelihoodLossOp, CrossEntropyOp>(
          [](auto op) { return classLossRule(op, op.getReduction()); })
      .Case([](GatherOp op) { return gatherRule(op); })
      .Case<SliceOp, ConcatOp, SplitOp>([](Operation *op) { return extentChangingRule(op); })
      .Case([](ReshapeOp op) { return reshapeRule(op); })
      .Case([](TransposeOp op) { return transposeRule(op); })
      .Default([](Operation *op) { return elementwiseRule(op); });
}

static std::string factorName(int index) {
  static const char letters[] = "ijklmnopqrstuvwxyzabcdefgh";
  std::string name(1, letters[index % 26]);
  if (index >= 26)
    name += std::to_string(index / 26);
  return name;
}

void ShardingRule::print(llvm::raw_ostream &os) const {
  auto printTensors = [&](ArrayRef<TensorFactors> tensors) {
    os << "(";
    llvm::interleaveComma(tensors, os, [&](const TensorFactors &tensor) {
      os << "[";
      llvm::interleaveComma(tensor, os, [&](const DimFactors &dim) {
        if (dim.empty())
          os << "1";
        for (int f : dim)
          os << factorName(f);
      });
      os << "]";
    });
    os << ")";
  };
  printTensors(operands);
  os << " -> ";
  printTensors(results);
  os << " {";
  llvm::interleaveComma(llvm::enumerate(factors), os, [&](auto entry) {
    os << factorName(entry.index()) << "=" << entry.value().size;
    if (entry.value().kind == FactorKind::Reduction)
      os << " reduction";
    else if (entry.value().kind == FactorKind::Whole)
      os << " whole";
  });
  os << "}";
}

std::string ShardingRule::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  print(os);
  return text;
}

} // namespace colossal::train
