//===- TrainOps.td - operations of the train dialect -------*- tablegen -*-===//
//
// Op families: parameters and constants; elementwise (numpy broadcasting);
// contractions (matmul, gemm, linear, conv, einsum); normalisations and
// activations; reductions; losses; data movement (gather, slice, concat,
// split, reshape, transpose, broadcast, trilu).
//
// Every compute op infers its result type from its operands and attributes
// (InferTypeOpInterface), so the verifier rejects a result type that does not
// match, and states its sharding factor rule (ShardingRuleOpInterface).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TRAIN_OPS
#define COLOSSAL_TRAIN_OPS

include "colossal/Dialect/Train/TrainDialect.td"
include "colossal/Dialect/Train/ShardingRuleInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

// A compute op: pure, result types inferred, with a sharding factor rule.
class Train_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits,
          [Pure, InferTypeOpAdaptor, ShardingRuleOpInterface])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def Train_ParameterOp : Train_Op<"parameter", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "declares a named model parameter whose bytes stay outside the IR";
  let description = [{
    Declares a tensor that belongs to the model state: a weight (trainable) or
    a buffer (frozen). The data stays in the model file; `data` says where:
    `"initializer"` (inside the ONNX file), `"external:<file>:<offset>:<length>"`
    (ONNX external data), or `"none"` (a shape-only model, planned but not run).

    After tensor-parallel partitioning, `split_dim` and `splits` say that
    each rank of the tensor axis holds one of `splits` equal slices of the
    model file's tensor along `split_dim` (rank t the t-th); the type is the
    slice's. With `split_groups` = G > 1 (a fused query-key-value projection)
    the dimension is G equal groups, each split so: rank t holds the t-th
    slice of every group, side by side. With `padding` = P > 0 (a vocabulary
    the ranks do not divide) the model's tensor is P rows of zeros short
    along `split_dim`: the program's tensor is the model's with them
    appended (they stay zero: nothing reads them, so their gradients are).

    On a tensor grid (2D tensor parallelism), `block_splits` says into how
    many blocks each dimension of the model's tensor is cut, and the type
    is one rank's block; which grid axes cut it is the `dist.sharding`
    attribute beside it. With `block_groups` (one count per dimension, at
    most one above 1: a fused query-key-value projection's output features)
    that dimension is G equal groups, each cut into the blocks: a rank's
    block holds its block of every group, side by side.

    Example:

    ```mlir
    train.parameter @"h.0.attn.c_attn.weight" : tensor<32x96xf32> {trainable, data = "initializer"}
    ```

    Constraints:
    - the type is a statically shaped ranked tensor;
    - the symbol name is not empty.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyStaticShapeTensor>:$type,
                       UnitAttr:$trainable, DefaultValuedStrAttr<StrAttr, "none">:$data,
                       OptionalAttr<I64Attr>:$split_dim, DefaultValuedAttr<I64Attr, "1">:$splits,
                       DefaultValuedAttr<I64Attr, "1">:$split_groups,
                       DefaultValuedAttr<I64Attr, "0">:$padding,
                       OptionalAttr<DenseI64ArrayAttr>:$block_splits,
                       OptionalAttr<DenseI64ArrayAttr>:$block_groups);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// The program's whole shape: the slice's, times `splits` along
    /// `split_dim` (padding included), or the block's times `block_splits`.
    ::llvm::SmallVector<int64_t> getFullShape() {
      ::llvm::SmallVector<int64_t> shape(getTensorType().getShape());
      if (std::optional<int64_t> dim = getSplitDim())
        shape[*dim] *= getSplits();
      if (std::optional<::llvm::ArrayRef<int64_t>> blocks = getBlockSplits())
        for (size_t d = 0; d < shape.size() && d < blocks->size(); ++d)
          shape[d] *= (*blocks)[d];
      return shape;
    }
    /// The model file's shape: the whole shape less the padding.
    ::llvm::SmallVector<int64_t> getModelShape() {
      ::llvm::SmallVector<int64_t> shape = getFullShape();
      if (std::optional<int64_t> dim = getSplitDim())
        shape[*dim] -= getPadding();
      return shape;
    }
  }];
}

def Train_ParamOp : Train_Op<"param", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a model parameter by name";
  let description = [{
    Yields the value of the `train.parameter` named by `name`.

    Example:

    ```mlir
    %w = train.param @"h.0.mlp.c_fc.weight" : tensor<32x128xf32>
    ```

    Constraints:
    - `name` refers to a `train.parameter` in the enclosing module;
    - the result type equals the parameter's type.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Train_ConstantOp : Train_Op<"constant", [ConstantLike, Pure,
    InferTypeOpAdaptor]> {
  let summary = "a constant tensor";
  let description = [{
    A constant folded at import (shapes, scales, masks). Large weights never
    appear here; they are `train.parameter`s.

    Example:

    ```mlir
    %c = train.constant dense<0.5> : tensor<f32>
    ```

    Constraints:
    - the value is a dense elements attribute of static shape.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Train_BinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Train_ComputeOp<mnemonic, traits> {
  let summary = "elementwise " # what # " with numpy broadcasting";
  let description = [{
    Computes `}] # what # [{` element by element. Operands broadcast as in
    numpy (and ONNX): shapes align at the trailing dimension and a size-1
    dimension stretches.

    Example:

    ```mlir
    %r = train.}] # mnemonic # [{ %a, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    ```

    Constraints:
    - both operands have the same element type;
    - their shapes broadcast; the result has the broadcast shape.
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return inferBroadcastResult(location, {adaptor.getLhs(), adaptor.getRhs()},
                                  /*resultElementType=*/nullptr, inferred);
    }
  }];
}

def Train_AddOp : Train_BinaryOp<"add", "lhs + rhs", [Commutative]>;
def Train_SubOp : Train_BinaryOp<"sub", "lhs - rhs">;
def Train_MulOp : Train_BinaryOp<"mul", "lhs * rhs", [Commutative]>;
def Train_DivOp : Train_BinaryOp<"div", "lhs / rhs">;
def Train_PowOp : Train_BinaryOp<"pow", "lhs ^ rhs">;
def Train_MaxOp : Train_BinaryOp<"max", "max(lhs, rhs)", [Commutative]>;
def Train_MinOp : Train_BinaryOp<"min", "min(lhs, rhs)", [Commutative]>;

class Train_CompareOp<string mnemonic, string what, list<Trait> traits = []>
    : Train_BinaryOp<mnemonic, what, traits> {
  let summary = "elementwise comparison " # what # " giving i1, with numpy broadcasting";
  let results = (outs TensorOf<[I1]>:$result);
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return inferBroadcastResult(location, {adaptor.getLhs(), adaptor.getRhs()},
                                  ::mlir::IntegerType::get(context, 1), inferred);
    }
  }];
}

def Train_EqualOp : Train_CompareOp<"equal", "lhs == rhs", [Commutative]>;
def Train_LessOp : Train_CompareOp<"less", "lhs < rhs">;
def Train_GreaterOp : Train_CompareOp<"greater", "lhs > rhs">;

// Result type = operand type; SameOperandsAndResultType supplies the inference.
class Train_UnaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
          InferTypeOpInterface, ShardingRuleOpInterface])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let summary = "elementwise " # what;
  let description = [{
    Computes `}] # what # [{` element by element.

    Example:

    ```mlir
    %r = train.}] # mnemonic # [{ %x : (tensor<2x32xf32>) -> tensor<2x32xf32>
    ```

    Constraints:
    - the result type equals the operand type.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
}

def Train_SqrtOp : Train_UnaryOp<"sqrt", "sqrt(x)">;
def Train_ReciprocalOp : Train_UnaryOp<"reciprocal", "1 / x">;
def Train_NegOp : Train_UnaryOp<"neg", "-x">;
def Train_AbsOp : Train_UnaryOp<"abs", "|x|">;
def Train_ExpOp : Train_UnaryOp<"exp", "exp(x)">;
def Train_LogOp : Train_UnaryOp<"log", "log(x)">;
def Train_ErfOp : Train_UnaryOp<"erf", "erf(x)">;
def Train_TanhOp : Train_UnaryOp<"tanh", "tanh(x)">;
def Train_SigmoidOp : Train_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Train_ReluOp : Train_UnaryOp<"relu", "max(x, 0)">;
def Train_SinOp : Train_UnaryOp<"sin", "sin(x)">;
def Train_CosOp : Train_UnaryOp<"cos", "cos(x)">;
def Train_SiluOp : Train_UnaryOp<"silu", "x * sigmoid(x) (raised from Mul(x, Sigmoid(x)))">;

def Train_GeluOp : Train_UnaryOp<"gelu",
    "x * Phi(x), exactly (approximate = \"none\") or with the tanh approximation"> {
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let hasVerifier = 1;
}

def Train_WhereOp : Train_ComputeOp<"where"> {
  let summary = "elementwise select with numpy broadcasting";
  let description = [{
    `result = condition ? on_true : on_false`, broadcasting all three.

    Example:

    ```mlir
    %r = train.where %mask, %scores, %neg_inf : (tensor<8x8xi1>, tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
    ```

    Constraints:
    - the condition has element type i1;
    - both branches have the same element type;
    - the three shapes broadcast.
  }];
  let arguments = (ins TensorOf<[I1]>:$condition, AnyRankedTensor:$on_true,
                       AnyRankedTensor:$on_false);
  let results = (outs AnyRankedTensor:$result);
}

def Train_CastOp : Train_ComputeOp<"cast"> {
  let summary = "converts element type";
  let description = [{
    Converts each element to the element type `to` (rounding to nearest for
    floats, truncation toward zero from float to integer, as ONNX Cast).

    Example:

    ```mlir
    %r = train.cast %x {to = f16} : (tensor<4xf32>) -> tensor<4xf16>
    ```

    Constraints:
    - the result has the operand's shape and element type `to`.
  }];
  let arguments = (ins AnyRankedTensor:$input, TypeAttr:$to);
  let results = (outs AnyRankedTensor:$result);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Train_MatMulOp : Train_ComputeOp<"matmul"> {
  let summary = "matrix product with numpy batch broadcasting";
  let description = [{
    `result[..., m, n] = sum_k lhs[..., m, k] * rhs[..., k, n]`, with numpy
    semantics: a rank-1 operand is promoted to a matrix (and the added
    dimension removed from the result), leading batch dimensions broadcast.

    Example:

    ```mlir
    %r = train.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x96xf32>) -> tensor<2x8x96xf32>
    ```

    Constraints:
    - the contracted sizes agree; batch dimensions broadcast;
    - both operands have the same element type.
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
}

def Train_GemmOp : Train_ComputeOp<"gemm"> {
  let summary = "general matrix multiply alpha * op(a) op(b) + beta * c";
  let description = [{
    ONNX Gemm: `alpha * op(a) * op(b) + beta * c` on matrices, where `op`
    transposes when `trans_a`/`trans_b` is set and `c` broadcasts to the
    result.

    Example:

    ```mlir
    %r = train.gemm %x, %w, %b {trans_b = true} : (tensor<4x16xf32>, tensor<10x16xf32>, tensor<10xf32>) -> tensor<4x10xf32>
    ```

    Constraints:
    - `a` and `b` are matrices whose contracted sizes agree;
    - `c`, when present, broadcasts to the result shape.
  }];
  let arguments = (ins AnyRankedTensor:$a, AnyRankedTensor:$b, Optional<AnyRankedTensor>:$c,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_b,
                       DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0f">:$beta);
  let results = (outs AnyRankedTensor:$result);
}

def Train_LinearOp : Train_ComputeOp<"linear"> {
  let summary = "x @ weight + bias (raised from MatMul + Add)";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[k, n] + bias[n]`. Raised
    from a MatMul by a 2-D parameter followed by the addition of a 1-D bias, so
    the planner sees one unit to split column- or row-wise. With
    `transpose_weight` the weight is stored `[n, k]` (PyTorch's
    `nn.Linear` layout) and read transposed in place:
    `sum_k input[..., k] * weight[n, k]`; `train-fold-transposes` sets it
    where the weight was a transpose, so no transposed copy is made.

    Example:

    ```mlir
    %r = train.linear %x, %w, %b : (tensor<2x8x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<2x8x96xf32>
    %s = train.linear %x, %v, %b {transpose_weight = true} : (tensor<2x8x32xf32>, tensor<96x32xf32>, tensor<96xf32>) -> tensor<2x8x96xf32>
    ```

    Constraints:
    - `weight` is a matrix whose first dimension (its second with
      `transpose_weight`) equals the input's last;
    - `bias`, when present, is a vector of the weight's other dimension.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                       Optional<AnyRankedTensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_weight);
  let results = (outs AnyRankedTensor:$result);
}

def Train_ConvOp : Train_ComputeOp<"conv"> {
  let summary = "N-d grouped convolution (NCHW)";
  let description = [{
    ONNX Conv on `input[N, C, D1..Dk]` with `weight[M, C/group, K1..Kk]` and
    an optional `bias[M]`. `strides`, `dilations` and `pads`
    (begin values then end values) are explicit for every spatial dimension.

    Example:

    ```mlir
    %r = train.conv %x, %w, %b {strides = array<i64: 4, 4>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
        : (tensor<2x3x16x16xf32>, tensor<32x3x4x4xf32>, tensor<32xf32>) -> tensor<2x32x4x4xf32>
    ```

    Constraints:
    - input and weight have the same rank (at least 3);
    - `strides`, `dilations` have one value and `pads` two per spatial dimension;
    - the channel count divides by `group` and matches the weight;
    - every output spatial size is positive.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                       Optional<AnyRankedTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs AnyRankedTensor:$result);
}

def Train_EinsumOp : Train_ComputeOp<"einsum"> {
  let summary = "Einstein summation over explicit subscripts";
  let description = [{
    ONNX Einsum with an explicit `->` output (the importer makes implicit
    outputs explicit). Letters that appear in the output are kept, the others
    are summed over. Ellipses are expanded by the importer.

    Example:

    ```mlir
    %r = train.einsum %t, %f {equation = "i,j->ij"} : (tensor<8xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    ```

    Constraints:
    - the equation has one term per operand and an explicit output, letters only;
    - each term has as many letters as its operand's rank;
    - a letter has one size wherever it appears (or 1, broadcasting).
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrAttr:$equation);
  let results = (outs AnyRankedTensor:$result);
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax and attention
//===----------------------------------------------------------------------===//

class Train_AxisOp<string mnemonic, string what> : Train_ComputeOp<mnemonic> {
  let summary = what # " along one axis";
  let description = [{
    Computes }] # what # [{ along `axis` (negative counts from the end).

    Example:

    ```mlir
    %r = train.}] # mnemonic # [{ %x {axis = -1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    ```

    Constraints:
    - `axis` lies in [-rank, rank);
    - the result type equals the operand type.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
}

def Train_SoftmaxOp : Train_AxisOp<"softmax", "softmax">;
def Train_LogSoftmaxOp : Train_AxisOp<"log_softmax", "log-softmax">;

def Train_LayerNormOp : Train_ComputeOp<"layer_norm", [AttrSizedOperandSegments]> {
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    Normalises over dimensions `axis..rank-1`:
    `(x - mean) / sqrt(var + epsilon) * scale + bias` with the biased
    variance. Imported from LayerNormalization (opset 17) and raised from the
    decomposed form older exports write.

    Example:

    ```mlir
    %r = train.layer_norm %x, %g, %b {axis = -1 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    ```

    Constraints:
    - `axis` lies in [-rank, rank);
    - `scale` and `bias`, when present, broadcast to the normalised shape.
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$scale,
                       Optional<AnyRankedTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-5f">:$epsilon);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input (`,` $scale^)? (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_RmsNormOp : Train_ComputeOp<"rms_norm"> {
  let summary = "root-mean-square normalisation (raised)";
  let description = [{
    `x / sqrt(mean(x^2 over axis..rank-1) + epsilon) * scale`, as in LLaMA.

    Example:

    ```mlir
    %r = train.rms_norm %x, %g {axis = -1 : i64, epsilon = 1.0e-06 : f32}
        : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    ```

    Constraints:
    - `axis` lies in [-rank, rank);
    - `scale`, when present, broadcasts to the normalised shape.
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$scale,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-6f">:$epsilon);
  let results = (outs AnyRankedTensor:$result);
}

def Train_AttentionOp : Train_ComputeOp<"attention"> {
  let summary = "scaled dot-product attention (raised)";
  let description = [{
    `softmax(scale * q k^T + mask) v` over the last two dimensions, raised
    from MatMul, scale, mask, Softmax and MatMul. With `causal`, position i
    attends to positions <= i + (sk - sq). An explicit `mask` is either
    additive (float) or boolean (true keeps). `dropout` is the probability
    applied to the attention weights, whose mask is the one a `train.dropout`
    of site `dropout_site` over the whole probabilities [..., sq, sk] would
    draw (keyed by the run's seed, the site, the step and the element's
    place in the global batch), so raising a dropout into the op changes no
    mask. With `dropout_axis`, the heads (the dimension before the tokens)
    are this rank's slice of the whole's over that mesh axis, and the masks
    that slice of the whole's; under `ring_axis` the masks are indexed by the
    rank's queries' and each key block's places in the whole sequence.

    With `ring_axis` (ring self-attention, inserted by sequence
    parallelism), each rank of that mesh axis holds its slice of the tokens
    of q, k, v and of a key mask (in rank order): the keys and values, with
    their mask, pass around the ring of ranks while each rank folds every
    block into its queries' softmax online; under `causal` a block after
    the rank's own is skipped. The result is the rank's queries' rows of
    the whole attention.

    Example:

    ```mlir
    %r = train.attention %q, %k, %v {causal = true, scale = 0.25 : f32, dropout = 0.0 : f32}
        : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
    ```

    Grouped-query attention: k and v may have fewer heads (the dimension
    before the tokens) than q; each key/value head serves that many
    consecutive query heads, as LLaMA's exports repeat them.

    Constraints:
    - q, k, v have the same rank (at least 2) and batch dimensions, but for
      k and v's heads, which divide q's;
    - q and k share the head size; k and v share the key length;
    - the mask, when present, broadcasts to [..., sq, sk];
    - `dropout` lies in [0, 1).
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key, AnyRankedTensor:$value,
                       Optional<AnyRankedTensor>:$mask,
                       F32Attr:$scale, DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout, OptionalAttr<StrAttr>:$ring_axis,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_site, OptionalAttr<StrAttr>:$dropout_axis);
  let results = (outs AnyRankedTensor:$result);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Train_ReduceOp<string mnemonic, string what> : Train_ComputeOp<mnemonic> {
  let summary = what # " over the given axes";
  let description = [{
    Reduces with }] # what # [{ over `axes` (all axes when empty), keeping
    them as size 1 when `keepdims`.

    Example:

    ```mlir
    %r = train.}] # mnemonic # [{ %x {axes = array<i64: -1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
    ```

    Constraints:
    - every axis lies in [-rank, rank) and appears once.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs AnyRankedTensor:$result);
}

def Train_ReduceSumOp : Train_ReduceOp<"reduce_sum", "a sum">;
def Train_ReduceMeanOp : Train_ReduceOp<"reduce_mean", "a mean">;
def Train_ReduceMaxOp : Train_ReduceOp<"reduce_max", "a maximum">;

//===----------------------------------------------------------------------===//
// Randomness and losses
//===----------------------------------------------------------------------===//

def Train_DropoutOp : Train_ComputeOp<"dropout"> {
  let summary = "training-mode dropout";
  let description = [{
    Zeroes each element with probability `ratio` and scales the others by
    `1 / (1 - ratio)`; also yields the keep mask. The mask is drawn from a
    counter-based generator keyed by (run seed and `site`, step, global
    element index), so it does not depend on how the tensor is split. `site`
    numbers the model's dropout ops (the importer gives each its own): two
    sites draw unrelated masks, and a copy of an op (recomputation) draws
    the same mask as the op. With `mesh_axis` and `mesh_dim` (sequence
    parallelism), the input is this rank's slice along `mesh_dim` of a
    tensor split over the mesh axis, and the mask is that slice of the
    whole tensor's.

    Example:

    ```mlir
    %y, %mask = train.dropout %x {ratio = 1.0e-01 : f32, site = 2 : i64} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xi1>)
    ```

    Constraints:
    - `ratio` lies in [0, 1);
    - `y` has the input's type, `mask` its shape with i1 elements.
  }];
  let arguments = (ins AnyRankedTensor:$input, F32Attr:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$site,
                       OptionalAttr<StrAttr>:$mesh_axis, OptionalAttr<I64Attr>:$mesh_dim);
  let results = (outs AnyRankedTensor:$output, TensorOf<[I1]>:$mask);
}

def Train_SoftmaxCrossEntropyLossOp
    : Train_ComputeOp<"softmax_cross_entropy_loss"> {
  let summary = "ONNX SoftmaxCrossEntropyLoss";
  let description = [{
    Cross-entropy of `softmax(scores)` along axis 1 against integer `labels`,
    as ONNX SoftmaxCrossEntropyLoss: scores `[N, C, d1..dk]`, labels
    `[N, d1..dk]`; labels equal to `ignore_index` contribute nothing and are
    not counted by `mean`. Raised to `train.cross_entropy`.

    Example:

    ```mlir
    %l = train.softmax_cross_entropy_loss %s, %t {reduction = "mean"} : (tensor<16x64xf32>, tensor<16xi64>) -> tensor<f32>
    ```

    Constraints:
    - scores have rank >= 2; labels have the scores' shape without axis 1;
    - labels are integers; `weights`, when present, is a vector of size C;
    - `reduction` is "none", "sum" or "mean".
  }];
  let arguments = (ins AnyRankedTensor:$scores, AnyRankedTensor:$labels,
                       Optional<AnyRankedTensor>:$weights,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AnyRankedTensor:$loss);
}

def Train_NegativeLogLikelihoodLossOp
    : Train_ComputeOp<"nll_loss"> {
  let summary = "ONNX NegativeLogLikelihoodLoss";
  let description = [{
    `-log_probs[n, labels[n, ...], ...]`, reduced; layout and `ignore_index`
    as in `train.softmax_cross_entropy_loss`. LogSoftmax followed by this op is
    raised to `train.cross_entropy`.

    Example:

    ```mlir
    %l = train.nll_loss %lp, %t {reduction = "mean"} : (tensor<16x64xf32>, tensor<16xi64>) -> tensor<f32>
    ```

    Constraints:
    - as for `train.softmax_cross_entropy_loss`.
  }];
  let arguments = (ins AnyRankedTensor:$log_probs, AnyRankedTensor:$labels,
                       Optional<AnyRankedTensor>:$weights,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AnyRankedTensor:$loss);
}

def Train_CrossEntropyOp : Train_ComputeOp<"cross_entropy"> {
  let summary = "softmax cross-entropy over class axis 1 (raised)";
  let description = [{
    The fused loss the kernels and vocabulary-parallel partitioning work on:
    `-log_softmax(logits, axis=1)[n, labels[n, ...], ...]`, reduced by
    `reduction`, skipping `ignore_index`.

    Example:

    ```mlir
    %l = train.cross_entropy %logits, %t {reduction = "mean"} : (tensor<16x64xf32>, tensor<16xi64>) -> tensor<f32>
    ```

    With `mesh_axis` (vocabulary parallelism, inserted by partitioning), each
    rank of that mesh axis holds the columns `[r * C, (r + 1) * C)` of the
    logits (`C` their class count here, `r` the rank's index on the axis) and
    the loss is over all of the axis's classes: the row maxima, the softmax
    denominators and the labels' logits are summed over the axis (the
    labels stay global), so no rank holds whole logits. Every rank gets the
    whole loss. `classes`, when set, is how many of the axis's columns are
    classes: the rest pad the vocabulary to a multiple of the ranks and
    take no part.

    With `token_axis` (sequence parallelism), each rank of that mesh axis
    holds its own rows (its tokens) of the logits and labels: the loss sums
    and the counted labels are summed over the axis, so every rank gets the
    loss over all the rows. Both may be set (tensor and sequence axes
    together): each row's loss is over `mesh_axis`'s classes, and the rows'
    sums over `token_axis`.

    Constraints:
    - as for `train.softmax_cross_entropy_loss`, without class weights.
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$labels,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<StrAttr>:$mesh_axis, OptionalAttr<I64Attr>:$classes,
                       OptionalAttr<StrAttr>:$token_axis);
  let results = (outs AnyRankedTensor:$loss);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Train_GatherOp : Train_ComputeOp<"gather"> {
  let summary = "gathers slices along an axis by integer indices";
  let description = [{
    ONNX Gather: `result` has shape `data[:axis] + indices + data[axis+1:]`.
    An embedding lookup is a gather on axis 0 of the table.

    Example:

    ```mlir
    %e = train.gather %wte, %ids {axis = 0 : i64} : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
    ```

    With `mesh_axis` (a vocabulary-parallel embedding, inserted by
    partitioning), `data` is this rank's slice of the table along `axis`:
    rows `[r * R, (r + 1) * R)` of the whole table (`R` its rows here, `r` the
    rank's index on the mesh axis). Indices stay global; those outside the
    slice give zeros, so the ranks' results sum to the whole gather.

    Constraints:
    - `axis` lies in [-rank, rank); indices are integers.
  }];
  let arguments = (ins AnyRankedTensor:$data, AnyRankedTensor:$indices, I64Attr:$axis,
                       OptionalAttr<StrAttr>:$mesh_axis);
  let results = (outs AnyRankedTensor:$result);
}

def Train_SliceOp : Train_ComputeOp<"slice"> {
  let summary = "strided slice with one start, limit and step per dimension";
  let description = [{
    Takes elements `starts[d], starts[d] + steps[d], ...` stopping before
    `limits[d]` in every dimension d (a negative step walks backwards). The
    importer normalises ONNX Slice (clamping, negative indices, omitted axes)
    into these per-dimension values.

    Example:

    ```mlir
    %r = train.slice %x {starts = array<i64: 0, 32>, limits = array<i64: 8, 64>, steps = array<i64: 1, 1>}
        : (tensor<8x96xf32>) -> tensor<8x32xf32>
    ```

    Constraints:
    - `starts`, `limits` and `steps` have one value per dimension;
    - steps are non-zero; starts lie within the dimension.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$steps);
  let results = (outs AnyRankedTensor:$result);
}

def Train_ConcatOp : Train_ComputeOp<"concat"> {
  let summary = "concatenates along an axis";
  let description = [{
    Joins the inputs along `axis`; every other dimension agrees.

    Example:

    ```mlir
    %r = train.concat %a, %b {axis = -1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
    ```

    Constraints:
    - at least one input; all have one rank and element type;
    - `axis` lies in [-rank, rank); the other dimensions agree.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
}

def Train_SplitOp : Train_ComputeOp<"split"> {
  let summary = "splits along an axis into pieces of the given sizes";
  let description = [{
    Cuts `input` along `axis` into consecutive pieces of `sizes`.

    Example:

    ```mlir
    %q, %k, %v = train.split %qkv {axis = 2 : i64, sizes = array<i64: 32, 32, 32>}
        : (tensor<2x8x96xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>)
    ```

    Constraints:
    - `axis` lies in [-rank, rank); sizes are non-negative and sum to the dimension.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<AnyRankedTensor>:$results);
}

def Train_ReshapeOp : Train_Op<"reshape", [Pure, ShardingRuleOpInterface]> {
  let summary = "reinterprets the shape (row-major order kept)";
  let description = [{
    Same elements in row-major order under a new static shape. ONNX Reshape,
    Flatten, Squeeze and Unsqueeze all import as this op.

    Example:

    ```mlir
    %r = train.reshape %x : (tensor<2x8x32xf32>) -> tensor<16x32xf32>
    ```

    Constraints:
    - the element counts and element types agree.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Train_TransposeOp : Train_ComputeOp<"transpose"> {
  let summary = "permutes dimensions";
  let description = [{
    `result` dimension i is `input` dimension `perm[i]`.

    Example:

    ```mlir
    %r = train.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
    ```

    Constraints:
    - `perm` is a permutation of [0, rank).
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyRankedTensor:$result);
  let hasFolder = 1;
}

def Train_BroadcastOp : Train_Op<"broadcast", [Pure, ShardingRuleOpInterface]> {
  let summary = "broadcasts to a larger shape (ONNX Expand)";
  let description = [{
    Stretches size-1 dimensions and prepends dimensions, numpy style.

    Example:

    ```mlir
    %r = train.broadcast %x : (tensor<1x8xf32>) -> tensor<4x8xf32>
    ```

    Constraints:
    - the operand's shape broadcasts to the result's; element types agree.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Train_TriluOp : Train_ComputeOp<"trilu"> {
  let summary = "keeps the upper or lower triangle of the last two dimensions";
  let description = [{
    ONNX Trilu: zeroes elements below (upper) or above (lower) diagonal `k`.

    Example:

    ```mlir
    %r = train.trilu %x {upper = true, k = 1 : i64} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    ```

    Constraints:
    - the operand has rank >= 2; the result type equals the operand type.
  }];
  let arguments = (ins AnyRankedTensor:$input, BoolAttr:$upper, DefaultValuedAttr<I64Attr, "0">:$k);
  let results = (outs AnyRankedTensor:$result);
}

//===----------------------------------------------------------------------===//
// Gradients (produced by train-autodiff)
//===----------------------------------------------------------------------===//

// A backward op: pure, result types given by its builder (the autodiff pass
// knows them: each gradient has its primal's type).
class Train_GradOp<string mnemonic, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [Pure])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Train_GeluGradOp : Train_GradOp<"gelu_grad"> {
  let summary = "gradient of train.gelu: dy * gelu'(x)";
  let description = [{
    Example:

    ```mlir
    %dx = train.gelu_grad %x, %dy {approximate = "tanh"} : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    ```

    Constraints:
    - `x`, `dy` and the result have the same type.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$result_grad,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs AnyRankedTensor:$input_grad);
}

def Train_SiluGradOp : Train_GradOp<"silu_grad"> {
  let summary = "gradient of train.silu: dy * s(x) (1 + x (1 - s(x))), s the sigmoid";
  let description = [{
    Constraints:
    - `x`, `dy` and the result have the same type.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$result_grad);
  let results = (outs AnyRankedTensor:$input_grad);
}

def Train_LayerNormGradOp : Train_GradOp<"layer_norm_grad"> {
  let summary = "gradients of train.layer_norm (statistics recomputed from the input)";
  let description = [{
    Yields the input gradient, and the scale and bias gradients (summed over
    the leading dimensions) for the operands the forward op had; their
    results are present exactly when the forward op had a scale and a bias.

    Constraints:
    - `dy` has the input's type; `scale` the forward op's scale type.
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$scale, AnyRankedTensor:$result_grad,
                       DefaultValuedAttr<I64Attr, "-1">:$axis, DefaultValuedAttr<F32Attr, "1e-5f">:$epsilon,
                       DefaultValuedAttr<BoolAttr, "false">:$has_bias);
  let results = (outs Variadic<AnyRankedTensor>:$grads);
}

def Train_RmsNormGradOp : Train_GradOp<"rms_norm_grad"> {
  let summary = "gradients of train.rms_norm (statistics recomputed from the input)";
  let description = [{
    Yields the input gradient and, when the forward op had a scale, its
    gradient.
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$scale, AnyRankedTensor:$result_grad,
                       DefaultValuedAttr<I64Attr, "-1">:$axis, DefaultValuedAttr<F32Attr, "1e-6f">:$epsilon);
  let results = (outs Variadic<AnyRankedTensor>:$grads);
}

def Train_AttentionGradOp : Train_GradOp<"attention_grad"> {
  let summary = "gradients of train.attention for query, key and value";
  let description = [{
    Recomputes the attention probabilities (as the fused backward kernels do:
    no s x s matrix is kept from the forward pass) and yields dq, dk, dv
    (under grouped-query attention, dk and dv summed over each group). The
    mask, when present, receives no gradient; dropout draws the forward
    op's masks again (`dropout`, `dropout_site`, `dropout_axis` as there).
    With `ring_axis`, the forward ring runs again, then the keys and values
    go around once more with their gradients' partial sums, which end on the
    ranks that hold them.
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key, AnyRankedTensor:$value,
                       Optional<AnyRankedTensor>:$mask, AnyRankedTensor:$result_grad, F32Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal, OptionalAttr<StrAttr>:$ring_axis,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout, DefaultValuedAttr<I64Attr, "0">:$dropout_site,
                       OptionalAttr<StrAttr>:$dropout_axis);
  let results = (outs AnyRankedTensor:$query_grad, AnyRankedTensor:$key_grad, AnyRankedTensor:$value_grad);
}

def Train_CrossEntropyGradOp : Train_GradOp<"cross_entropy_grad"> {
  let summary = "gradient of train.cross_entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * dloss`, divided by the number of
    counted labels under `mean`; rows labelled `ignore_index` get zero. With
    `mesh_axis`, the logits are this rank's columns (as for
    `train.cross_entropy`): the softmax's maxima and denominators are summed
    over the axis again, and the result is this rank's columns of the
    gradient. With `token_axis`, the logits are this rank's rows: under
    `mean` the counted labels are summed over the axis.
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$labels, AnyRankedTensor:$loss_grad,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduction, OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<StrAttr>:$mesh_axis, OptionalAttr<I64Attr>:$classes,
                       OptionalAttr<StrAttr>:$token_axis);
  let results = (outs AnyRankedTensor:$logits_grad);
}

def Train_NllLossGradOp : Train_GradOp<"nll_loss_grad"> {
  let summary = "gradient of train.nll_loss with respect to the log-probabilities";
  let description = [{
    Zero except at each counted label: `-weights[label] * dloss`, divided
    under `mean` by the summed weights of the counted labels (their count
    without `weights`), as the forward op divides. The result has the
    log-probabilities' type; only their shape is needed, so they are not an
    operand and need not be kept for the backward pass.

    Example:

    ```mlir
    %d = train.nll_loss_grad %t, %w, %dl {reduction = "mean"} : (tensor<16xi64>, tensor<64xf32>, tensor<f32>) -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$labels, Optional<AnyRankedTensor>:$weights, AnyRankedTensor:$loss_grad,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduction, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AnyRankedTensor:$log_probs_grad);
}

def Train_GatherGradOp : Train_GradOp<"gather_grad"> {
  let summary = "gradient of train.gather: scatter-add into zeros of the data's shape";
  let description = [{
    Repeated indices add up (an embedding row used twice gets both
    gradients); negative indices count from the end, as in the forward op.
    With `mesh_axis`, the result is this rank's slice of the table's
    gradient (as for `train.gather`): indices outside it add nothing.
  }];
  let arguments = (ins AnyRankedTensor:$indices, AnyRankedTensor:$result_grad, I64Attr:$axis,
                       OptionalAttr<StrAttr>:$mesh_axis);
  let results = (outs AnyRankedTensor:$data_grad);
}

def Train_SliceGradOp : Train_GradOp<"slice_grad"> {
  let summary = "gradient of train.slice: the result gradient placed into zeros of the input's shape";
  let arguments = (ins AnyRankedTensor:$result_grad, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$limits,
                       DenseI64ArrayAttr:$steps);
  let results = (outs AnyRankedTensor:$input_grad);
}

def Train_ConvGradOp : Train_GradOp<"conv_grad"> {
  let summary = "gradients of train.conv for its input and weight";
  let description = [{
    The input gradient is the transposed convolution of the result gradient
    with the weight; the weight gradient correlates the input with the
    result gradient. Attributes as on the forward op. (The bias gradient is
    a sum of the result gradient, built from train.reduce_sum.)
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight, AnyRankedTensor:$result_grad,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs AnyRankedTensor:$input_grad, AnyRankedTensor:$weight_grad);
}

//===----------------------------------------------------------------------===//
// Optimizer (produced by train-optimizer)
//===----------------------------------------------------------------------===//

def Train_OptimizerUpdateOp : Train_Op<"optimizer_update", [Pure, AttrSizedOperandSegments]> {
  let summary = "one fused multi-tensor optimizer update (LAMB, AdamW, SGD or LARS)";
  let description = [{
    Updates every trainable tensor at once from its gradient: the new weights
    and the new optimizer state. The results are the new `params`, then the
    new `moment1`, then the new `moment2`, each list in operand order.

    - `lamb` (the default of colossal-compile): Adam moments with bias
      correction, the update `u = m^ / (sqrt(v^) + eps) + wd w`, then
      `w -= lr * (||w|| / ||u||) u` per tensor (ratio 1 when a norm is 0);
    - `adamw`: torch.optim.AdamW (decay `w *= 1 - lr wd` first);
    - `sgd`: torch.optim.SGD with momentum (`nesterov`), `moment1` the
      momentum buffer and no `moment2`;
    - `lars`: SGD with momentum scaled per tensor by
      `eta ||w|| / (||g|| + wd ||w||)`, no `moment2`.

    `lr` is the step's learning rate (the schedule's value), `step` the
    1-based count of updates (bias correction), and `grad_scale` multiplies
    every gradient before use: the inverse loss scale times the clipping
    factor from the global gradient norm, which the trainer computes because
    it also decides whether an fp16 step is skipped. `decay[i]` says whether
    tensor i takes weight decay; `trust_ratio[i]` whether it is scaled by its
    trust ratio (LAMB and LARS; AdamW and SGD have none). Norms are per
    whole tensor: a partitioned program completes them across shards.

    Lowered to the runtime's fused kernels (`colossal/runtime/kernels/Optimizers.h`).

    Example:

    ```mlir
    %r:4 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w, %b) grads(%gw, %gb)
        moment1(%mw, %mb) moment2() {kind = "sgd", momentum = 9.0e-01 : f64, weight_decay = 0.0 : f64,
        decay = array<i1: true, true>, trust_ratio = array<i1: false, false>}
        : (tensor<f32>, tensor<i64>, tensor<f32>, ...) -> (...)
    ```

    Constraints:
    - `kind` is lamb, adamw, sgd or lars; `moment2` has one tensor per
      parameter for lamb and adamw and none for sgd and lars;
    - `params`, `grads`, `moment1` (and `moment2`) have the same length and
      type per position, a float32 tensor; the results repeat those types;
    - `lr` and `grad_scale` are float32 scalars, `step` an int64 scalar;
    - `decay` and `trust_ratio` have one entry per parameter; betas lie in
      [0, 1), `eps` > 0, `weight_decay` >= 0, `momentum` >= 0, `eta` > 0;
    - lamb gives every tensor a trust ratio; adamw and sgd give none.
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step, 0DTensorOf<[F32]>:$grad_scale,
                       Variadic<AnyRankedTensor>:$params, Variadic<AnyRankedTensor>:$grads,
                       Variadic<AnyRankedTensor>:$moment1, Variadic<AnyRankedTensor>:$moment2,
                       StrAttr:$kind,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1, DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-6">:$eps, DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "0.9">:$momentum,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov,
                       DefaultValuedAttr<F64Attr, "1e-3">:$eta,
                       DenseBoolArrayAttr:$decay, DenseBoolArrayAttr:$trust_ratio);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `lr` `(` $lr `)` `step` `(` $step `)` `grad_scale` `(` $grad_scale `)` `params` `(` $params `)`
    `grads` `(` $grads `)` `moment1` `(` $moment1 `)` `moment2` `(` $moment2 `)` attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the kind keeps a second moment (LAMB and AdamW).
    static bool hasSecondMoment(::llvm::StringRef kind) { return kind == "lamb" || kind == "adamw"; }
    ::mlir::ResultRange getNewParams() { return getResults().take_front(getParams().size()); }
    ::mlir::ResultRange getNewMoment1() {
      return getResults().drop_front(getParams().size()).take_front(getMoment1().size());
    }
    ::mlir::ResultRange getNewMoment2() {
      return getResults().drop_front(getParams().size() + getMoment1().size());
    }
  }];
}

#endif // COLOSSAL_TRAIN_OPS
