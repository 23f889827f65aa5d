//===- Passes.td - raising ONNX-level op chains to named ops -*- tablegen -*-===//

#ifndef COLOSSAL_PASSES_RAISE
#define COLOSSAL_PASSES_RAISE

include "mlir/Pass/PassBase.td"

def RaiseGelu : Pass<"train-raise-gelu", "mlir::func::FuncOp"> {
  let summary = "raises the erf and tanh forms of GELU to train.gelu";
  let description = [{
    PyTorch exports `gelu(x)` as `x * 0.5 * (1 + erf(x / sqrt(2)))` (exact) or
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (approximate). Both
    become one op so the kernels and the planner see a single activation.

    Before:
    ```mlir
    %d = train.div %x, %sqrt2
    %e = train.erf %d
    %a = train.add %e, %one
    %m = train.mul %x, %a
    %g = train.mul %m, %half
    ```
    After:
    ```mlir
    %g = train.gelu %x {approximate = "none"}
    ```
    Constants are matched by value (within 1e-4 relative), operands of
    commutative ops in either order. A chain that differs stays as it is.
  }];
  let dependentDialects = ["::colossal::train::TrainDialect"];
}

def RaiseLayerNorm : Pass<"train-raise-layer-norm", "mlir::func::FuncOp"> {
  let summary = "raises decomposed layer normalisation to train.layer_norm";
  let description = [{
    Exports below opset 17 write layer norm as
    `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma + beta` over the
    last axis. The chain becomes `train.layer_norm`; gamma and beta are folded
    in when present.

    Before:
    ```mlir
    %mu = train.reduce_mean %x {axes = array<i64: -1>, keepdims = true}
    %c = train.sub %x, %mu
    %sq = train.pow %c, %two
    %var = train.reduce_mean %sq {axes = array<i64: -1>, keepdims = true}
    %ve = train.add %var, %eps
    %sd = train.sqrt %ve
    %n = train.div %c, %sd
    %s = train.mul %n, %gamma
    %y = train.add %s, %beta
    ```
    After:
    ```mlir
    %y = train.layer_norm %x, %gamma, %beta {axis = -1 : i64, epsilon = 1.0e-05 : f32}
    ```
  }];
  let dependentDialects = ["::colossal::train::TrainDialect"];
}

def RaiseRmsNorm : Pass<"train-raise-rms-norm", "mlir::func::FuncOp"> {
  let summary = "raises RMSNorm chains to train.rms_norm";
  let description = [{
    `x * 1/sqrt(mean(x^2) + eps) * w` (the reciprocal may be a `div`) becomes
    `train.rms_norm`.

    Before:
    ```mlir
    %sq = train.pow %x, %two
    %ms = train.reduce_mean %sq {axes = array<i64: -1>, keepdims = true}
    %a = train.add %ms, %eps
    %r = train.sqrt %a
    %inv = train.reciprocal %r
    %n = train.mul %x, %inv
    %y = train.mul %w, %n
    ```
    After:
    ```mlir
    %y = train.rms_norm %x, %w {axis = -1 : i64, epsilon = 1.0e-06 : f32}
    ```
  }];
  let dependentDialects = ["::colossal::train::TrainDialect"];
}

def RaiseSilu : Pass<"train-raise-silu", "mlir::func::FuncOp"> {
  let summary = "raises x * sigmoid(x) to train.silu";
  let description = [{
    Before:
    ```mlir
    %s = train.sigmoid %x
    %y = train.mul %x, %s
    ```
    After:
    ```mlir
    %y = train.silu %x
    ```
  }];
  let dependentDialects = ["::colossal::train::TrainDialect"];
}

def RaiseAttention : Pass<"train-raise-attention", "mlir::func::FuncOp"> {
  let summary = "raises the scaled dot-product chain to train.attention";
  let description = [{
    Matches `matmul(softmax(mask(scale(matmul(q, k^T)))), v)` where the scale
    is a multiplication or division by a constant (on the scores, or on q and
    k separately), the mask is an additive float tensor, a `where` selecting a
    large negative constant, or absent, and an optional dropout sits between
    softmax and the second matmul (its probability and site become the op's
    `dropout` and `dropout_site`, so the masks stay the ones it drew). A mask
    that is a lower-triangular constant (or a slice of one) becomes
    `causal = true`; others stay an operand.
    `k^T` may be a transpose of the last two dimensions of k. Keys and values
    whose heads are repeated for grouped-query attention (`[.., kv, s, d]`
    reshaped to `[.., kv, 1, s, d]`, broadcast to `[.., kv, g, s, d]`,
    reshaped to `[.., kv * g, s, d]`) are read unrepeated: the attention has
    kv key/value heads, each serving g query heads.

    Before:
    ```mlir
    %kt = train.transpose %k {perm = array<i64: 0, 1, 3, 2>}
    %s = train.matmul %q, %kt
    %ss = train.div %s, %c4
    %m = train.where %causal, %ss, %neg
    %p = train.softmax %m {axis = -1 : i64}
    %o = train.matmul %p, %v
    ```
    After:
    ```mlir
    %o = train.attention %q, %k, %v {causal = true, scale = 0.25 : f32, dropout = 0.0 : f32}
    ```
  }];
  let dependentDialects = ["::colossal::train::TrainDialect"];
}

def RaiseCrossEntropy : Pass<"train-raise-cross-entropy", "mlir::func::FuncOp"> {
  let summary = "raises LogSoftmax + NLL and SoftmaxCrossEntropyLoss to train.cross_entropy";
  let description = [{
    Both forms of the classification loss become the fused op the kernels and
    vocabulary-parallel partitioning use, including PyTorch's
    `F.nll_loss(F.log_softmax(x, -1).view(-1, C), y.view(-1))` (a
    log-softmax over the last axis flattened to rows of C classes). With
    class weights, which the fused op lacks, a SoftmaxCrossEntropyLoss
    becomes the weighted `train.nll_loss` of a `train.log_softmax` over axis
    1, and a weighted LogSoftmax + NLL stays as it is.

    Before:
    ```mlir
    %lp = train.log_softmax %logits {axis = 1 : i64}
    %l = train.nll_loss %lp, %labels {reduction = "mean"}
    ```
    After:
    ```mlir
    %l = train.cross_entropy %logits, %labels {reduction = "mean"}
    ```
  }];
  let dependentDialects = ["::colossal::train::TrainDialect"];
}

def RaiseLinear : Pass<"train-raise-linear", "mlir::func::FuncOp"> {
  let summary = "raises matmul by a 2-D parameter plus bias (and gemm) to train.linear";
  let description = [{
    A matmul whose right operand is a matrix, optionally followed by the
    addition of a vector, becomes `train.linear`: the unit that 1-D tensor
    parallelism splits by columns or rows. A Gemm with `trans_b`, unit alpha
    and beta and a vector bias becomes a linear on the transposed weight.

    Before:
    ```mlir
    %w = train.param @fc.weight : tensor<32x128xf32>
    %y = train.matmul %x, %w
    %z = train.add %y, %b
    ```
    After:
    ```mlir
    %z = train.linear %x, %w, %b
    ```
  }];
  let dependentDialects = ["::colossal::train::TrainDialect"];
}

def TestShardingRules : Pass<"train-test-sharding-rules", "mlir::func::FuncOp"> {
  let summary = "reports each op's sharding factor rule as a remark (for tests)";
  let description = [{
    Emits `remark: sharding rule: ([i, k], [k, j]) -> ([i, j]) {...}` on every
    op that implements ShardingRuleOpInterface, so lit tests can check rules
    with `-verify-diagnostics`.
  }];
}

#endif // COLOSSAL_PASSES_RAISE
