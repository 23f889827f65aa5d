// RUN: colossal-opt %s -train-sequence-axis-parallel="ranks=2 algorithm=ring" -train-lower-resharding | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -train-sequence-axis-parallel="ranks=2 algorithm=ring" -train-autodiff -train-lower-resharding | FileCheck %s --check-prefix=GRAD

// The one-layer language model of sequence_axis_parallel.mlir with a
// padding mask, split by ring attention: everything runs on the rank's 2
// tokens, attention included (on its queries, the keys and values and the
// mask's slice passed around the ring); nothing is traded or gathered.
// CHECK-LABEL: module attributes {train.sequence_parallel = "ring", train.sequence_parallel_ranks = 2 : i64}
// CHECK: %[[IDS:.*]] = dist.rank_slice %arg0 {axis = "sp", dim = 1 : i64} : (tensor<2x4xi64>) -> tensor<2x2xi64>
// CHECK: %[[KEEP:.*]] = dist.rank_slice %arg1 {axis = "sp", dim = 1 : i64} : (tensor<2x4xi64>) -> tensor<2x2xi64>
// CHECK: train.reshape %[[KEEP]] : (tensor<2x2xi64>) -> tensor<2x1x1x2xi64>
// CHECK: %[[MASK:.*]] = train.mul {{.*}} -> tensor<2x1x1x2xf32>
// CHECK-NOT: dist.all_to_all
// CHECK-NOT: dist.all_gather
// CHECK: train.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]] {causal = true, ring_axis = "sp", scale = 5.000000e-01 : f32} : (tensor<2x2x2x4xf32>, tensor<2x2x2x4xf32>, tensor<2x2x2x4xf32>, tensor<2x1x1x2xf32>) -> tensor<2x2x2x4xf32>
// CHECK: train.cross_entropy %{{.*}}, %{{.*}} {token_axis = "sp"} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
// GRAD-LABEL: func.func @forward_backward
// GRAD: train.attention_grad {{.*}}ring_axis = "sp"{{.*}} -> (tensor<2x2x2x4xf32>, tensor<2x2x2x4xf32>, tensor<2x2x2x4xf32>)
module {
  train.parameter @wte : tensor<8x8xf32> {trainable}
  train.parameter @wpe : tensor<4x8xf32> {trainable}
  train.parameter @scale : tensor<8xf32> {trainable}
  train.parameter @wq : tensor<8x8xf32> {trainable}
  train.parameter @wk : tensor<8x8xf32> {trainable}
  train.parameter @wv : tensor<8x8xf32> {trainable}
  train.parameter @wo : tensor<8x8xf32> {trainable}
  func.func @forward(%ids: tensor<2x4xi64> {train.name = "input_ids"}, %keep: tensor<2x4xi64> {train.name = "attention_mask"},
                     %labels: tensor<2x4xi64> {train.name = "labels"})
      -> (tensor<f32> {train.name = "loss"}) {
    %t = train.param @wte : tensor<8x8xf32>
    %pos = train.param @wpe : tensor<4x8xf32>
    %tok = train.gather %t, %ids {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %e = train.add %tok, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %s = train.param @scale : tensor<8xf32>
    %n = train.layer_norm %e, %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %wq = train.param @wq : tensor<8x8xf32>
    %wk = train.param @wk : tensor<8x8xf32>
    %wv = train.param @wv : tensor<8x8xf32>
    %q = train.linear %n, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %k = train.linear %n, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %v = train.linear %n, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %q4 = train.reshape %q : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %k4 = train.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %v4 = train.reshape %v : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %qh = train.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %kh = train.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %vh = train.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %keep4 = train.reshape %keep : (tensor<2x4xi64>) -> tensor<2x1x1x4xi64>
    %keepf = train.cast %keep4 {to = f32} : (tensor<2x1x1x4xi64>) -> tensor<2x1x1x4xf32>
    %big = train.constant dense<-1.000000e+04> : tensor<f32>
    %mask = train.mul %keepf, %big : (tensor<2x1x1x4xf32>, tensor<f32>) -> tensor<2x1x1x4xf32>
    %o = train.attention %qh, %kh, %vh, %mask {causal = true, scale = 0.5 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
    %ot = train.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
    %o3 = train.reshape %ot : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
    %wo = train.param @wo : tensor<8x8xf32>
    %y = train.linear %o3, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %r = train.add %e, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %tt = train.transpose %t {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %logits = train.linear %r, %tt : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %rows = train.reshape %logits : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
    %l = train.reshape %labels : (tensor<2x4xi64>) -> tensor<8xi64>
    %loss = train.cross_entropy %rows, %l : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
