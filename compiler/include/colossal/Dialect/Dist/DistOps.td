//===- DistOps.td - operations of the dist dialect ---------*- tablegen -*-===//
//
// How values move between the ranks of a mesh: the general resharding the
// partitioners insert (dist.reshard, between layouts), and the single-axis
// collectives it lowers to (all-reduce, all-gather, reduce-scatter,
// all-to-all, a rank's slice, copies entering a split region). Each op's
// gradient is another op of this dialect (passes/autodiff/GradientRules.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_DIST_OPS
#define COLOSSAL_DIST_OPS

include "colossal/Dialect/Dist/DistAttrs.td"
include "colossal/Dialect/Dist/DistDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_MeshOp : Dist_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a device mesh: named axes and their sizes";
  let description = [{
    Declares a mesh the program's reshardings refer to by symbol: its axes,
    innermost first (`tp` inside a node before `dp` across nodes), the ranks
    of each and, on a planned module, where they sit: `per_node`, for each
    axis, how many ranks of one group share a node (the size when the group
    is inside a node, 1 when each member is on another), from the plan's
    cluster. The partitioning passes declare the axes they split over.

    Example:

    ```mlir
    dist.mesh @tp {axes = ["tp"], sizes = array<i64: 2>, per_node = array<i64: 2>}
    ```

    Constraints:
    - as many sizes as axes, each at least 1;
    - axis names are letters, digits and `_`, each once;
    - `per_node`, when present, has an entry per axis that divides its size.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes, DenseI64ArrayAttr:$sizes,
                       OptionalAttr<DenseI64ArrayAttr>:$per_node);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The ranks of `axis`; 0 when the mesh has no such axis.
    int64_t sizeOf(::llvm::StringRef axis);
  }];
}

//===----------------------------------------------------------------------===//
// Collectives over a mesh axis (inserted by partitioning and lowering)
//===----------------------------------------------------------------------===//

def Dist_AllReduceOp : Dist_Op<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "sums a value over the ranks of a mesh axis";
  let description = [{
    Every rank of mesh axis `axis` gets the sum of the ranks' `input`s (the
    partial sums of a contraction split along its reduced dimension). Its
    gradient passes through unchanged: what reads the sum is replicated
    over the axis, so every rank already holds the whole gradient (Megatron's
    "g" operator).

    Example:

    ```mlir
    %y = dist.all_reduce %partial {axis = "tp"} : tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Dist_CopyToRanksOp : Dist_Op<"copy_to_ranks", [Pure, SameOperandsAndResultType]> {
  let summary = "a replicated value entering computation split over a mesh axis";
  let description = [{
    The identity: every rank of mesh axis `axis` holds the same `input` and
    computes its own part of what reads it. Its gradient is the sum of the
    ranks' partial gradients, an all-reduce over the axis (Megatron's "f"
    operator).

    Example:

    ```mlir
    %x1 = dist.copy_to_ranks %x {axis = "tp"} : tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Dist_AllGatherOp : Dist_Op<"all_gather", [Pure]> {
  let summary = "the ranks' slices of a value along a dimension, side by side";
  let description = [{
    Rank r of mesh axis `axis` holds slice r of a value along `dim`; every
    rank gets the whole value (Megatron sequence parallelism: the tokens of a
    sequence-split activation gathered before a tensor-parallel block).
    What reads the result is split over the axis, so its gradient is the
    reduce-scatter of the result's gradient.

    Example:

    ```mlir
    %x = dist.all_gather %part {axis = "tp", dim = 1 : i64} : (tensor<2x4x16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $result)";
}

def Dist_ReduceScatterOp : Dist_Op<"reduce_scatter", [Pure]> {
  let summary = "the sum of the ranks' values, each rank keeping its slice along a dimension";
  let description = [{
    Sums every rank's `input` over mesh axis `axis` and gives rank r slice r
    of the sum along `dim` (Megatron sequence parallelism: a tensor-parallel
    block's partial output, summed and split by tokens). What reads the
    result holds its own tokens, so the gradient is the all-gather of the
    result's gradient.

    Example:

    ```mlir
    %y = dist.reduce_scatter %partial {axis = "tp", dim = 1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $result)";
}

def Dist_AllToAllOp : Dist_Op<"all_to_all", [Pure]> {
  let summary = "one dimension's split traded for another's over a mesh axis";
  let description = [{
    Each rank of mesh axis `axis` holds slice r of a value along
    `concat_dim`; it cuts its `input` into as many equal parts along
    `split_dim` as the axis has ranks, sends part j to rank j, and puts the
    parts it receives side by side along `concat_dim`, so it ends holding
    slice r of the same value along `split_dim` instead (all-to-all
    sequence parallelism: queries, keys and values split by tokens become
    split by heads for attention, and back). Its gradient is the all-to-all
    the other way.

    Example:

    ```mlir
    %q = dist.all_to_all %x {axis = "sp", split_dim = 1 : i64, concat_dim = 2 : i64} : (tensor<2x4x4x8xf32>) -> tensor<2x2x8x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$split_dim, I64Attr:$concat_dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $result)";
}

def Dist_RankSliceOp : Dist_Op<"rank_slice", [Pure]> {
  let summary = "this rank's slice of a replicated value along a dimension";
  let description = [{
    Every rank of mesh axis `axis` holds the same `input` and keeps slice r
    of it along `dim` (a position embedding added to a sequence-split
    activation). The input's readers upstream are replicated, so its
    gradient is the all-gather of the slices' gradients.

    Example:

    ```mlir
    %p = dist.rank_slice %positions {axis = "tp", dim = 0 : i64} : (tensor<8x16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $result)";
}

def Dist_ReshardOp : Dist_Op<"reshard", [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a value moved from one layout on the mesh to another";
  let description = [{
    The partitioner's general collective: `input` is one rank's part of a
    value laid out by `from` (a `#dist.sharding`: for each dimension the mesh
    axes splitting it, major first; `sum(...)` the axes of pending partial
    sums; `copies(...)` the axes whose ranks read it each in their own way),
    and the result its part laid out by `to`. `mesh` names the `dist.mesh`
    that gives the size of every axis the layouts name.

    `train-lower-resharding` replaces it with the single-axis collectives
    above (all-reduce, reduce-scatter, all-gather, all-to-all, rank slice),
    the sequence the cost model prices (cost/Resharding.h: the cheapest in
    bus bytes). Its gradient is the resharding from the dual of `to` to the
    dual of `from` (sums and copies swapped): a partial sum's gradient is
    whole, copies read differently give partial gradients.

    The verifier checks the layouts against the shapes (the result is the
    input's whole value cut by `to`), and that neither direction has to
    invent a partial sum.

    Example (Megatron's sequence parallelism at a block's exit):

    ```mlir
    dist.mesh @tp {axes = ["tp"], sizes = array<i64: 2>}
    ...
    %y = dist.reshard %partial {from = #dist.sharding<[-, -, -] sum(tp)>, to = #dist.sharding<[-, tp, -]>,
                                mesh = @tp}
        : (tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Dist_ShardingAttr:$from, Dist_ShardingAttr:$to, FlatSymbolRefAttr:$mesh);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The layouts, read (the verifier has checked them).
    ::colossal::dist::Layout getFromLayout();
    ::colossal::dist::Layout getToLayout();
    /// Whether the layouts differ in copies only: no data moves.
    bool movesNothing();
    /// The mesh's axes and sizes, in its order (the verifier has checked
    /// that it exists).
    ::std::vector<::std::pair<::std::string, int64_t>> getMeshAxes();
  }];
}

//===----------------------------------------------------------------------===//
// Products on a tensor grid (2D tensor parallelism)
//===----------------------------------------------------------------------===//

def Dist_GridLinearOp : Dist_Op<"grid_linear", [Pure]> {
  let summary = "a rank's block of X W on a q x q grid (SUMMA)";
  let description = [{
    2D tensor parallelism's matrix product (Optimus, Xu et al. 2021, on
    SUMMA). On a q x q grid, the rank in row i (its rank on `column_axis`,
    whose groups are a grid column) and column j (its rank on `row_axis`,
    whose groups are a grid row) holds block (i, j) of X [m, k] as `input`
    (its m / q rows, leading dimensions flattened, and k / q features) and of
    W [k, n] as `weight` [k / q, n / q], and makes block (i, j) of X W. In
    each of q steps, X blocks are broadcast along the rows and W blocks
    along the columns (`runtime/kernels/GridLinear.h`). With
    `transpose_weight`, `weight` is the block of W^T [n / q, k / q] (a
    weight stored [out, in], read transposed in place). Its gradient is
    `dist.grid_linear_grad`.

    Example:

    ```mlir
    %y = dist.grid_linear %x, %w {row_axis = "tp_col", column_axis = "tp_row"}
        : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
    ```

    Constraints:
    - the input's last dimension is the weight's first (its second with
      `transpose_weight`); the result is the input with the weight's other
      dimension last;
    - the two axes differ.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight, StrAttr:$row_axis, StrAttr:$column_axis,
                       UnitAttr:$transpose_weight);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dist_GridLinearGradOp : Dist_Op<"grid_linear_grad", [Pure]> {
  let summary = "a rank's blocks of dX and dW of dist.grid_linear";
  let description = [{
    The backward pass of `dist.grid_linear` on the same grid: dX_ij =
    sum_t dY_it W_jt^T, reduced along row i, and dW_ij = sum_t X_ti^T dY_tj,
    reduced along column j (the steps of SUMMA on the duals). With
    `transpose_weight`, the weight and its gradient are W^T's blocks.

    Example:

    ```mlir
    %dx, %dw = dist.grid_linear_grad %x, %w, %dy {row_axis = "tp_col", column_axis = "tp_row"}
        : (tensor<2x8xf32>, tensor<8x16xf32>, tensor<2x16xf32>) -> (tensor<2x8xf32>, tensor<8x16xf32>)
    ```

    Constraints: those of `dist.grid_linear`; the results have the input's
    and the weight's types, `output_grad` the forward result's.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight, AnyRankedTensor:$output_grad,
                       StrAttr:$row_axis, StrAttr:$column_axis, UnitAttr:$transpose_weight);
  let results = (outs AnyRankedTensor:$input_grad, AnyRankedTensor:$weight_grad);
  let assemblyFormat = "$input `,` $weight `,` $output_grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // COLOSSAL_DIST_OPS
