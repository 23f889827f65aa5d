//===- TensorGridLayers.cpp - linear layers, norms, lookups, the loss on a grid -===//

#include "passes/partition/TensorGridSplitter.h"

#include "passes/partition/VocabularyParallel.h"

namespace colossal::partition::grid {

/// y = x W + b as SUMMA's product of blocks, then the bias block (copies
/// over the grid's rows: its gradient is summed over them); on the cube,
/// splitCubeLinear.
LogicalResult GridSplitter::splitLinear(LinearOp linear, bool &split) {
  split = false;
  RankedTensorType input = typeOf(linear.getInput()), weight = typeOf(linear.getWeight());
  std::optional<SplitOperand> w = traceToParameter(linear.getWeight(), 0);
  std::optional<SplitOperand> bias =
      linear.getBias() ? traceToParameter(linear.getBias(), 0) : std::optional<SplitOperand>();
  // The output layer of a table its lookup split (splitLookup): the
  // weight, the table's transposed view, is its block already.
  // (On 2.5D's layers the view reads the block as copies over tp_depth.)
  auto view = linear.getWeight().getDefiningOp<TransposeOp>();
  Value viewed = view ? view.getInput() : Value();
  if (auto copies = viewed ? viewed.getDefiningOp<ReshardOp>() : nullptr)
    viewed = copies.getInput();
  auto table = viewed ? viewed.getDefiningOp<ParamOp>() : nullptr;
  bool tied = !w && table && tiedTables_.contains(table.getName()) && !linear.getBias();
  // A weight read elsewhere too (a tied embedding not split) stays whole.
  if (!tied && (!w || !soleRead(*w) || (linear.getBias() && (!bias || !bias->views.empty() || !soleRead(*bias)))))
    return success();
  // (An input already in blocks holds 1/q of the rows; a tied table's
  // block 1/q of its features and its vocabulary, on the cube 1/q^2 of its
  // features.)
  int64_t k = weight.getDimSize(0) * (tied ? (grid_.cube ? q_ * q_ : q_) : 1),
          n = weight.getDimSize(1) * (tied ? q_ : 1);
  int64_t rows = input.getRank() < 2 ? 0 : wholeTypeOf(linear.getInput()).getShape().front();
  if (input.getRank() < 2 || rows % grid_.rowParts() != 0 || k % q_ != 0 || n % q_ != 0)
    return linear.emitError() << "tensor parallelism on " << describe() << " splits this linear layer's " << rows
                              << " rows in " << grid_.rowParts() << " and its " << k << " input and " << n
                              << " output features in " << q_ << ", which must divide (at " << linear.getLoc() << ")";
  // A fused projection's columns in groups (its query, key and value each
  // split over the columns), so that splitting its output gives blocks.
  int64_t groups = tied ? 1 : fusedGroupsOf(linear);
  if (n % (q_ * groups) != 0)
    groups = 1;
  if (grid_.cube) {
    if (k % (q_ * q_) != 0)
      return linear.emitError() << "tensor parallelism on " << describe() << " splits this linear layer's " << k
                                << " input features in " << q_ * q_ << ", which must divide (at " << linear.getLoc()
                                << ")";
    split = true;
    return splitCubeLinear(linear, w, bias, groups, tied ? view : nullptr);
  }
  OpBuilder b(linear);
  FailureOr<Value> x = block(b, linear, linear.getInput());
  if (failed(x))
    return failure();
  b.setInsertionPoint(linear);
  // The weight [k, n] is the operand seen through transposes: its
  // dimension 0 (k) split over the rows' axis, 1 (n) over the columns'.
  if (!tied) {
    int64_t kDim = w->parameterDim, nDim = 1 - kDim;
    std::optional<Layout> readAs;
    if (grid_.depth > 1) {
      readAs = wholeLayout(2);
      readAs->dims[size_t(kDim)].push_back(kGridRowAxis);
      readAs->dims[size_t(nDim)].push_back(kGridColumnAxis);
      readAs->copies.push_back(kGridDepthAxis);
    }
    splitOnGrid(*w, {{kDim, {kGridRowAxis}}, {nDim, {kGridColumnAxis}}}, readAs, nDim, groups);
  }
  RankedTensorType resultType =
      localType(typeOf(linear.getResult()), blockDims(typeOf(linear.getResult()).getRank()), grid_);
  Value y = GridLinearOp::create(b, linear.getLoc(), resultType, *x, linear.getWeight(),
                                 b.getStringAttr(kGridColumnAxis), b.getStringAttr(kGridRowAxis), UnitAttr());
  if (bias) {
    // (A bias read once, of n elements, which q divides: checked above.)
    Value columns = columnsOf(b, linear.getLoc(), linear.getBias(), 0, groups);
    y = AddOp::create(b, linear.getLoc(), resultType, y, columns);
  }
  mark(y, blockDims(resultType.getRank()));
  if (groups > 1)
    grouped_[y] = groups;
  linear.getResult().replaceAllUsesWith(y);
  linear.erase();
  ++summary_->linears;
  split = true;
  return success();
}

int64_t GridSplitter::fusedGroupsOf(LinearOp linear) const {
  Value v = linear.getResult();
  int64_t features = typeOf(v).getShape().back();
  while (v.hasOneUse()) {
    Operation *user = *v.getUsers().begin();
    if (auto reshape = dyn_cast<ReshapeOp>(user)) {
      if (typeOf(reshape.getResult()).getShape().back() != features)
        return 1;
      v = reshape.getResult();
      continue;
    }
    auto split = dyn_cast<SplitOp>(user);
    if (!split)
      return 1;
    int64_t rank = typeOf(v).getRank(), axis = split.getAxis() < 0 ? split.getAxis() + rank : split.getAxis();
    ArrayRef<int64_t> sizes = split.getSizes();
    if (axis != rank - 1 || sizes.size() < 2 || llvm::any_of(sizes, [&](int64_t s) { return s != sizes.front(); }))
      return 1;
    return int64_t(sizes.size());
  }
  return 1;
}

LogicalResult GridSplitter::splitCubeLinear(LinearOp linear, std::optional<SplitOperand> w,
                                            std::optional<SplitOperand> bias, int64_t groups, TransposeOp tiedView) {
  OpBuilder b(linear);
  Location loc = linear.getLoc();
  Value input = linear.getInput();
  int64_t rank = wholeTypeOf(input).getRank();
  // (A tied table is split as its lookup splits it, for an input of
  // variant 0: the vocabulary over tp_in, the features over tp_out and
  // tp_w.)
  int variant = isBlock(input) && !tiedView ? dimsOf(input)->variant : 0;
  FailureOr<Value> x = into(b, linear, input, blockDims(rank, variant));
  if (failed(x))
    return failure();
  b.setInsertionPoint(linear);
  // x's rows are over tp_w and `gathered`, its features over `summed`.
  std::string gathered = grid_.rowAxes(variant)[1], summed = grid_.columnAxis(variant).str();
  Value rows = gatheredRows_.lookup({*x, variant});
  if (!rows) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(*x);
    Layout from = gridLayout(rank, blockDims(rank, variant), grid_), to = from;
    to.dims.front() = {kCubeWeightAxis};
    // (Read by every rank of `gathered`, each with its weight columns: its
    // gradient is their sum, reduce-scattered back.)
    to.copies.push_back(gathered);
    RankedTensorType local = typeOf(*x);
    SmallVector<int64_t> shape(local.getShape());
    shape.front() *= q_;
    rows = reshard(b, loc, *x, RankedTensorType::get(shape, local.getElementType()), from, to);
    gatheredRows_[{*x, variant}] = rows;
  }
  // The weight [k, n]: k over (summed, tp_w), n over `gathered`; read
  // gathered over tp_w, a [k/q, n/q] block.
  if (tiedView) {
    // The table [V, h]'s block, gathered over tp_w for the product alone
    // (the lookup reads the block itself).
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(tiedView);
    Value block = tiedView.getInput();
    RankedTensorType blockType = typeOf(block);
    Layout from = wholeLayout(2), to = wholeLayout(2);
    from.dims = {{gathered}, {summed, kCubeWeightAxis}};
    to.dims = {{gathered}, {summed}};
    to.copies.push_back(kCubeWeightAxis);
    Value seen = reshard(b, loc, block, withDim(blockType, 1, blockType.getDimSize(1) * q_), from, to);
    tiedView.getInputMutable().assign(seen);
    retypeTranspose(tiedView);
  } else {
    int64_t kDim = w->parameterDim, nDim = 1 - kDim;
    Layout readAs = wholeLayout(2);
    readAs.dims[size_t(kDim)] = {summed};
    readAs.dims[size_t(nDim)] = {gathered};
    readAs.copies.push_back(kCubeWeightAxis);
    splitOnGrid(*w, {{kDim, {summed, kCubeWeightAxis}}, {nDim, {gathered}}}, readAs, nDim, groups);
  }
  RankedTensorType rowsType = typeOf(rows);
  SmallVector<int64_t> partShape(rowsType.getShape());
  partShape.back() = typeOf(linear.getWeight()).getDimSize(1);
  auto partType = RankedTensorType::get(partShape, rowsType.getElementType());
  Value part = LinearOp::create(b, loc, partType, rows, linear.getWeight(), Value());
  // The partial sums over `summed`, reduce-scattered into the rows.
  Layout partial = wholeLayout(rank);
  partial.dims.front() = {kCubeWeightAxis};
  partial.dims.back() = {gathered};
  partial.sums.push_back(summed);
  int next = 1 - variant;
  GridDims out = blockDims(rank, next);
  RankedTensorType resultType = localType(typeOf(linear.getResult()), out, grid_);
  Value y = reshard(b, loc, part, resultType, partial, gridLayout(rank, out, grid_));
  // (The features stay over `gathered`: grouped columns stay grouped.)
  if (bias)
    y = AddOp::create(b, loc, resultType, y, columnsOf(b, loc, linear.getBias(), next, groups));
  mark(y, out);
  if (groups > 1)
    grouped_[y] = groups;
  linear.getResult().replaceAllUsesWith(y);
  linear.erase();
  ++summary_->linears;
  return success();
}

Value GridSplitter::columnsOf(OpBuilder &b, Location loc, Value vector, int variant, int64_t groups) {
  std::optional<SplitOperand> p = traceToParameter(vector, 0);
  if (!p || !p->views.empty() || !soleRead(*p) || typeOf(vector).getRank() != 1 ||
      typeOf(vector).getDimSize(0) % (q_ * groups) != 0)
    return Value();
  std::string column = grid_.columnAxis(variant).str();
  splitOnGrid(*p, {{0, {column}}}, std::nullopt, 0, groups);
  Layout columns = wholeLayout(1);
  columns.dims[0].push_back(column);
  if (grid_.cube) {
    // (Copies over the rows' other axis, then over tp_w: the gradient is
    // summed over each in turn, so tp_w's gathers and scatters stay the
    // weights' alone.)
    Layout within = columns;
    within.copies.push_back(grid_.rowAxes(variant)[1]);
    Layout shared = within;
    shared.copies.push_back(kCubeWeightAxis);
    Value copies = reshard(b, loc, vector, typeOf(vector), columns, within);
    return reshard(b, loc, copies, typeOf(vector), within, shared);
  }
  Layout copies = columns;
  llvm::append_range(copies.copies, grid_.rowAxes(variant));
  return reshard(b, loc, vector, typeOf(vector), columns, copies);
}

/// A layer or RMS norm over the features of a block (Optimus's layer norm):
/// each rank sums its features, the row's sums are completed over tp_col
/// (an all-reduce of one value per row; its gradient's too), and the rank
/// normalises its block; scale and bias split over the columns as biases
/// are. Norms over more than the last dimension, or with a scale or bias
/// that is not a parameter read once, stay whole.
void GridSplitter::splitNorm(Operation *norm, bool &split) {
  split = false;
  auto layer = dyn_cast<LayerNormOp>(norm);
  auto rms = dyn_cast<RmsNormOp>(norm);
  // A whole input (the embeddings' sum before the first layer) enters the
  // grid here, so that every layer is split alike.
  if (!layer && !rms)
    return;
  Value x = norm->getOperand(0);
  RankedTensorType whole = wholeTypeOf(x);
  if ((!isBlock(x) && dimsOf(x)) || whole.getRank() < 2 || whole.getShape().front() % grid_.rowParts() != 0 ||
      whole.getShape().back() % q_ != 0)
    return;
  // (A block keeps its variant; a whole value enters as variant 0.)
  int variant = dimsOf(x) ? dimsOf(x)->variant : 0;
  RankedTensorType xt = localType(whole, blockDims(whole.getRank(), variant), grid_);
  int64_t rank = xt.getRank(), axis = layer ? int64_t(layer.getAxis()) : int64_t(rms.getAxis());
  Value scale = layer ? layer.getScale() : rms.getScale(), bias = layer ? layer.getBias() : Value();
  // (A scale or bias broadcast from fewer features stays whole, and so does
  // the norm.)
  auto isVectorParameter = [&](Value v) {
    std::optional<SplitOperand> p = v ? traceToParameter(v, 0) : std::nullopt;
    return !v || (p && p->views.empty() && soleRead(*p) && typeOf(v).getShape() == whole.getShape().take_back());
  };
  if ((axis < 0 ? axis + rank : axis) != rank - 1 || !isVectorParameter(scale) || !isVectorParameter(bias))
    return;
  OpBuilder b(norm);
  Location loc = norm->getLoc();
  FailureOr<Value> entered = into(b, norm, x, blockDims(whole.getRank(), variant));
  if (failed(entered))
    return;
  x = *entered;
  b.setInsertionPoint(norm);
  Type element = xt.getElementType();
  double features = double(xt.getShape().back() * q_);
  SmallVector<int64_t> rowShape(xt.getShape());
  rowShape.back() = 1;
  auto rowType = RankedTensorType::get(rowShape, element);
  Layout rows = wholeLayout(rank);
  llvm::append_range(rows.dims.front(), grid_.rowAxes(variant));
  Layout partial = rows, copies = rows;
  partial.sums.push_back(grid_.columnAxis(variant).str());
  copies.copies.push_back(grid_.columnAxis(variant).str());
  auto scalar = [&](double value) -> Value {
    auto type = RankedTensorType::get({}, element);
    return ConstantOp::create(b, loc, cast<ElementsAttr>(DenseElementsAttr::get(type, b.getFloatAttr(element, value))));
  };
  // The mean over the whole row of features: the rank's sum, completed
  // over the row's ranks, divided by the features.
  auto rowMean = [&](Value v) -> Value {
    Value sum = ReduceSumOp::create(b, loc, rowType, v, b.getDenseI64ArrayAttr({rank - 1}), b.getBoolAttr(true));
    Value whole = reshard(b, loc, sum, rowType, partial, copies);
    return MulOp::create(b, loc, rowType, whole, scalar(1.0 / features));
  };
  Value centred = x;
  if (layer)
    centred = SubOp::create(b, loc, xt, x, rowMean(x));
  Value meanSquare = rowMean(MulOp::create(b, loc, xt, centred, centred));
  float epsilon = layer ? layer.getEpsilon().convertToFloat() : rms.getEpsilon().convertToFloat();
  Value spread = SqrtOp::create(b, loc, rowType, AddOp::create(b, loc, rowType, meanSquare, scalar(epsilon)));
  Value y = MulOp::create(b, loc, xt, centred, ReciprocalOp::create(b, loc, rowType, spread));
  if (scale)
    y = MulOp::create(b, loc, xt, y, columnsOf(b, loc, scale, variant));
  if (bias)
    y = AddOp::create(b, loc, xt, y, columnsOf(b, loc, bias, variant));
  mark(y, blockDims(rank, variant));
  norm->getResult(0).replaceAllUsesWith(y);
  norm->erase();
  ++summary_->norms;
  split = true;
}

namespace {

/// The transposed view through which an output layer reads the table
/// `lookup` looks up (a tied embedding: the table's one read used by the
/// lookup and by a transpose that a bias-free linear layer reads as its
/// weight); null when there is none.
TransposeOp tiedOutputView(GatherOp lookup) {
  auto read = lookup.getData().getDefiningOp<ParamOp>();
  if (!read || std::distance(read->use_begin(), read->use_end()) != 2)
    return nullptr;
  for (Operation *user : read->getUsers()) {
    if (user == lookup.getOperation())
      continue;
    auto view = dyn_cast<TransposeOp>(user);
    if (!view || view.getPerm() != ArrayRef<int64_t>{1, 0} || !view.getResult().hasOneUse())
      return nullptr;
    auto linear = dyn_cast<LinearOp>(*view.getResult().getUsers().begin());
    return linear && linear.getWeight() == view.getResult() && !linear.getBias() ? view : nullptr;
  }
  return nullptr;
}

} // namespace

/// An embedding lookup from a table [V, h] read once, as Colossal-AI's
/// vocabulary-parallel embeddings on the grid: the table in blocks, its
/// vocabulary over the rows' axis (tp_row; on the cube tp_in) and its
/// features over the columns' (on the cube also over tp_w: 1/q^3 per rank,
/// as the cube's weights). Each rank looks every token id up in its
/// vocabulary rows (ids outside them give zeros: `mesh_axis`), which makes
/// its columns of the whole result as a partial sum over the rows' axis;
/// a resharding moves the sum into the rank's block (a reduce-scatter; on
/// 2.5D's layers the depth's rows sliced first, on the cube the tp_w part
/// of the features moved into the rows by an all-to-all). On the 2D grid
/// and 2.5D's layers a table tied to the output layer is split as that
/// layer's SUMMA weight (vocabulary over tp_col, features over tp_row) and
/// its lookup's sum reaches the block by an all-to-all and a
/// reduce-scatter; on the layers the lookup takes its layer's rows' ids. The backward
/// pass is the duals: the block's gradient gathered whole over the rows,
/// scattered into the rank's vocabulary rows.
bool GridSplitter::splitLookup(GatherOp lookup) {
  RankedTensorType result = typeOf(lookup.getResult()), table = typeOf(lookup.getData());
  std::optional<SplitOperand> t = traceToParameter(lookup.getData(), 0);
  // A table tied to the output layer: on a 2D grid or 2.5D's layers split
  // as that layer's SUMMA weight is, its vocabulary (the product's columns)
  // over tp_col and its features (the rows) over tp_row; on the cube as an
  // untied table is, which is the layout the output layer's weight takes
  // for an input of variant 0 (splitCubeLinear).
  TransposeOp tied = !t ? tiedOutputView(lookup) : nullptr;
  if (tied)
    t = SplitOperand{lookup.getData().getDefiningOp<ParamOp>(), 0, {tied}, 1, 0};
  int64_t axis = int64_t(lookup.getAxis());
  // (Token ids, whose leading dimension is the batch's rows; a table of
  // positions, looked up by constants, stays whole.)
  if (!t || (!tied && !t->views.empty()) || !soleRead(*t) || table.getRank() != 2 || (axis != 0 && axis != -2) ||
      lookup.getMeshAxis() || dimsOf(lookup.getIndices()) || !comesFromInput(lookup.getIndices()) ||
      result.getRank() < 2)
    return false;
  // The vocabulary over the rows' axis that is not shared by every layer
  // (2.5D) or tp_w (3D); the features over the columns' (on the cube, and
  // then over tp_w: a 1/q^3 block, moved into the rows by the resharding).
  bool summaWeight = tied && !grid_.cube;
  std::string vocabularyAxis = summaWeight ? kGridColumnAxis : grid_.rowAxes().back();
  SmallVector<std::string, 2> featureAxes = {summaWeight ? kGridRowAxis : grid_.columnAxis().str()};
  if (grid_.cube)
    featureAxes.push_back(kCubeWeightAxis);
  int64_t featureParts = grid_.cube ? q_ * q_ : q_;
  // A vocabulary (or width) the grid does not divide is looked up whole,
  // as the report says; rows it does not divide are refused where the
  // layers split them.
  int64_t vocabulary = table.getDimSize(0), features = table.getDimSize(1), rows = result.getDimSize(0);
  if (vocabulary % q_ != 0 || features % featureParts != 0 || rows % grid_.rowParts() != 0)
    return false;
  // On 2.5D's layers every layer reads the tied block as the output
  // layer's SUMMA weight, as copies over tp_depth whose gradients (each
  // layer's rows') are summed; so each layer looks up its own rows' ids
  // only, and the sum over the depth totals the lookup's gradient too.
  bool layerRows = tied && grid_.depth > 1;
  std::optional<Layout> readAs;
  if (layerRows) {
    readAs = wholeLayout(2);
    readAs->dims[0] = {vocabularyAxis};
    readAs->dims[1] = {kGridRowAxis};
    readAs->copies.push_back(kGridDepthAxis);
  }
  splitOnGrid(*t, {{0, {vocabularyAxis}}, {1, featureAxes}}, readAs);
  if (tied)
    tiedTables_.insert(t->read.getName());
  int64_t rank = result.getRank();
  OpBuilder b(lookup);
  if (layerRows) {
    Value ids = lookup.getIndices();
    RankedTensorType idsType = typeOf(ids);
    SmallVector<int64_t> idsShape(idsType.getShape());
    idsShape.front() /= grid_.depth;
    Value mine = reshard(b, lookup.getLoc(), ids, RankedTensorType::get(idsShape, idsType.getElementType()),
                         wholeLayout(idsType.getRank()), splitLayout(idsType.getRank(), 0, kGridDepthAxis));
    lookup.getIndicesMutable().assign(mine);
  }
  SmallVector<int64_t> shape(result.getShape());
  shape.back() /= featureParts;
  if (layerRows)
    shape.front() /= grid_.depth;
  lookup.getResult().setType(RankedTensorType::get(shape, result.getElementType()));
  lookup.setMeshAxisAttr(StringAttr::get(module_.getContext(), vocabularyAxis));
  b.setInsertionPointAfter(lookup);
  Layout partial = wholeLayout(rank);
  partial.dims.back().assign(featureAxes.begin(), featureAxes.end());
  if (layerRows)
    partial.dims.front() = {kGridDepthAxis};
  partial.sums = {vocabularyAxis};
  GridDims block = blockDims(rank);
  Value y = reshard(b, lookup.getLoc(), lookup.getResult(), localType(result, block, grid_), partial,
                    gridLayout(rank, block, grid_));
  lookup.getResult().replaceAllUsesExcept(y, y.getDefiningOp());
  mark(y, block);
  ++summary_->lookups;
  return true;
}

/// The loss of blocks of logits: vocabulary-parallel over the grid's
/// columns, its rows summed over the grid's rows.
LogicalResult GridSplitter::splitLoss(CrossEntropyOp loss, bool &split) {
  split = false;
  Value logits = loss.getLogits();
  RankedTensorType labels = typeOf(loss.getLabels());
  if (!isBlock(logits) || typeOf(logits).getRank() != 2 || labels.getRank() != 1 || loss.getMeshAxis() ||
      loss.getTokenAxis() || dimsOf(loss.getLabels()))
    return success();
  OpBuilder b(loss);
  int variant = dimsOf(logits)->variant;
  Layout rows = wholeLayout(1);
  llvm::append_range(rows.dims[0], grid_.rowAxes(variant));
  RankedTensorType local = RankedTensorType::get({labels.getDimSize(0) / grid_.rowParts()}, labels.getElementType());
  Value mine = reshard(b, loss.getLoc(), loss.getLabels(), local, wholeLayout(1), rows);
  loss.getLabelsMutable().assign(mine);
  loss.setMeshAxis(grid_.columnAxis(variant));
  loss.setTokenAxis(grid_.tokenAxis(variant));
  ++summary_->losses;
  split = true;
  return success();
}

} // namespace colossal::partition::grid
