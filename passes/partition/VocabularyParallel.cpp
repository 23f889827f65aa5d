//===- VocabularyParallel.cpp ---------------------------------------------===//

#include "passes/partition/VocabularyParallel.h"

#include "passes/partition/Resharding.h"

#include "passes/partition/ParameterSlices.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace colossal::partition {

using namespace mlir;
using namespace colossal::train;

bool comesFromInput(Value indices) {
  while (true) {
    if (isa<BlockArgument>(indices))
      return true;
    Operation *def = indices.getDefiningOp();
    if (!isa_and_nonnull<ReshapeOp, CastOp>(def))
      return false;
    indices = def->getOperand(0);
  }
}

namespace {

/// An output layer: the linear whose columns score the vocabulary, the
/// values after it to the loss (each split along `dim`), the operands that
/// stay replicated and the vocabulary biases split with it.
struct OutputLayer {
  LinearOp linear;
  TransposeOp view; // of the table, when the linear reads it transposed
  SmallVector<std::pair<Value, int64_t>> values;
  SmallVector<OpOperand *> replicated;
  SmallVector<SplitOperand> biases;
  /// Slices along other dimensions (Hugging Face's logits shifted by one
  /// token): each keeps the vocabulary dimension whole, `dim` here.
  SmallVector<std::pair<SliceOp, int64_t>> slices;
  CrossEntropyOp loss;
};

/// Follows the linear's result, split along its last dimension, through
/// reshapes that keep that dimension, slices along the others, elementwise
/// ops and vocabulary biases to a softmax cross-entropy; fails on anything
/// else.
bool traceToLoss(OutputLayer &layer, llvm::function_ref<bool(const SplitOperand &)> splittable) {
  if (Value bias = layer.linear.getBias()) {
    std::optional<SplitOperand> b = traceToParameter(bias, 0);
    if (!b || !splittable(*b))
      return false;
    layer.biases.push_back(*b);
  }
  Value value = layer.linear.getResult();
  int64_t dim = typeOf(value).getRank() - 1;
  while (true) {
    layer.values.push_back({value, dim});
    if (!value.hasOneUse())
      return false;
    OpOperand &use = *value.getUses().begin();
    Operation *user = use.getOwner();
    if (auto loss = dyn_cast<CrossEntropyOp>(user)) {
      layer.loss = loss;
      return loss.getLogits() == value && typeOf(value).getRank() == 2 && dim == 1 && !loss.getMeshAxis();
    }
    Value next;
    if (auto reshape = dyn_cast<ReshapeOp>(user)) {
      RankedTensorType from = typeOf(value), to = typeOf(reshape.getResult());
      if (dim != from.getRank() - 1 || to.getShape().back() != from.getShape().back())
        return false;
      next = reshape.getResult();
      dim = to.getRank() - 1;
    } else if (isSliceWise(user)) {
      next = user->getResult(0);
    } else if (auto slice = dyn_cast<SliceOp>(user)) {
      int64_t size = typeOf(value).getDimSize(dim);
      if (slice.getStarts()[size_t(dim)] != 0 || slice.getSteps()[size_t(dim)] != 1 ||
          slice.getLimits()[size_t(dim)] < size)
        return false;
      layer.slices.push_back({slice, dim});
      next = slice.getResult();
    } else if (isa<AddOp, SubOp, MulOp, DivOp>(user)) {
      next = user->getResult(0);
      if (typeOf(next).getShape() != typeOf(value).getShape())
        return false;
      OpOperand &other = user->getOpOperand(1 - use.getOperandNumber());
      RankedTensorType otherType = typeOf(other.get());
      int64_t aligned = dim - (typeOf(value).getRank() - otherType.getRank());
      if (aligned < 0 || otherType.getDimSize(aligned) == 1) {
        layer.replicated.push_back(&other);
      } else {
        // A bias over the vocabulary: split with the columns.
        std::optional<SplitOperand> b = traceToParameter(other.get(), aligned);
        if (!b || !b->views.empty() || !splittable(*b))
          return false;
        layer.biases.push_back(*b);
      }
    } else {
      return false;
    }
    value = next;
  }
}

} // namespace

VocabularySummary splitVocabulary(ModuleOp module, func::FuncOp forward, int64_t ranks, StringAttr axis) {
  VocabularySummary summary;
  llvm::StringMap<int> reads;
  module.walk([&](ParamOp read) { ++reads[read.getName()]; });
  SymbolTable parameters(module);
  auto unsplit = [&](StringRef name) {
    auto parameter = parameters.lookup<ParameterOp>(name);
    return parameter && reads[name] == 1 && !parameter.getSplitDim();
  };
  auto splittable = [&](const SplitOperand &operand) { return unsplit(ParamOp(operand.read).getName()); };

  SmallVector<ParamOp> tables;
  forward.walk([&](ParamOp read) {
    if (unsplit(read.getName()) && typeOf(read.getResult()).getRank() == 2 && !read.getResult().use_empty())
      tables.push_back(read);
  });
  for (ParamOp read : tables) {
    // Every use must read the table by vocabulary rows: lookups of token ids
    // (rows), output layers (the linear's columns, the table transposed or
    // not). `vocabularyDim` is the table's dimension they agree on.
    int64_t vocabularyDim = -1;
    bool agreed = true;
    SmallVector<GatherOp> lookups;
    std::vector<OutputLayer> layers;
    auto agree = [&](int64_t dim) {
      agreed = agreed && (vocabularyDim < 0 || vocabularyDim == dim);
      vocabularyDim = dim;
    };
    for (OpOperand &use : read.getResult().getUses()) {
      Operation *user = use.getOwner();
      if (auto gather = dyn_cast<GatherOp>(user);
          gather && use.getOperandNumber() == 0 && (gather.getAxis() == 0 || int64_t(gather.getAxis()) == -2) &&
          comesFromInput(gather.getIndices()) && !gather.getMeshAxis()) {
        lookups.push_back(gather);
        agree(0);
        continue;
      }
      OutputLayer layer;
      if (auto transpose = dyn_cast<TransposeOp>(user); transpose && transpose.getResult().hasOneUse()) {
        layer.view = transpose;
        layer.linear = dyn_cast<LinearOp>(*transpose.getResult().getUsers().begin());
        if (layer.linear && layer.linear.getWeight() == transpose.getResult())
          agree(transpose.getPerm()[1]);
        else
          layer.linear = nullptr;
      } else if (auto linear = dyn_cast<LinearOp>(user); linear && linear.getWeight() == read.getResult()) {
        layer.linear = linear;
        agree(1);
      }
      if (!layer.linear || !traceToLoss(layer, splittable)) {
        agreed = false;
        break;
      }
      layers.push_back(std::move(layer));
    }
    if (!agreed || vocabularyDim < 0 || layers.empty() && lookups.empty())
      continue;
    // A vocabulary the ranks do not divide is padded with rows of zeros
    // (Megatron's make-vocab-size-divisible-by), as long as every rank
    // keeps a real row.
    int64_t rows = typeOf(read.getResult()).getDimSize(vocabularyDim);
    int64_t padding = (ranks - rows % ranks) % ranks, local = (rows + padding) / ranks;
    if (padding >= local) {
      summary.whole.push_back("@" + read.getName().str() + ": its " + std::to_string(rows) +
                              " vocabulary rows are fewer than the ranks need");
      continue;
    }
    if (padding > 0)
      summary.padded.push_back("@" + read.getName().str() + ": " + std::to_string(rows) + " rows padded to " +
                               std::to_string(rows + padding));

    // The table: one slice of rows per rank, read (and viewed) as such.
    splitParameter(parameters, SplitOperand{read, vocabularyDim, {}, 1, padding}, ranks);
    ++summary.splitParameters;
    ++summary.tables;
    for (GatherOp lookup : lookups) {
      lookup.setMeshAxisAttr(axis);
      OpBuilder builder(lookup->getContext());
      builder.setInsertionPointAfter(lookup);
      Value sum = sumOverRanks(builder, lookup.getLoc(), lookup.getResult(), axis, ranks);
      lookup.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
      ++summary.lookups;
    }
    for (OutputLayer &layer : layers) {
      if (layer.view)
        retypeTranspose(layer.view);
      OpBuilder builder(layer.linear);
      Value input = layer.linear.getInput();
      layer.linear.getInputMutable().assign(
          copyToRanks(builder, layer.linear.getLoc(), input, axis, ranks));
      for (OpOperand *use : layer.replicated) {
        builder.setInsertionPoint(use->getOwner());
        use->set(copyToRanks(builder, use->getOwner()->getLoc(), use->get(), axis, ranks));
      }
      for (SplitOperand bias : layer.biases) {
        bias.padding = padding;
        splitParameter(parameters, bias, ranks);
        ++summary.splitParameters;
      }
      for (auto [value, dim] : layer.values)
        value.setType(withDim(typeOf(value), dim, local));
      for (auto [slice, dim] : layer.slices) {
        SmallVector<int64_t> limits(slice.getLimits());
        limits[size_t(dim)] = local;
        slice.setLimits(limits);
      }
      layer.loss.setMeshAxisAttr(axis);
      // Padding columns take no part in the loss.
      if (padding > 0)
        layer.loss.setClassesAttr(builder.getI64IntegerAttr(rows));
      ++summary.outputLayers;
    }
  }
  return summary;
}

} // namespace colossal::partition
