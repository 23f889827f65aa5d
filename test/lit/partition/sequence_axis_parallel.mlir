// RUN: colossal-opt %s -split-input-file -train-sequence-axis-parallel="ranks=2 algorithm=all-to-all" -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -split-input-file -train-sequence-axis-parallel="ranks=2 algorithm=all-to-all" -train-autodiff -train-lower-resharding -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// A one-layer language model with two heads of attention over 4 tokens.
// The token ids and labels are cut to the rank's 2 tokens; everything runs
// on them but attention, whose queries, keys and values trade the tokens'
// split for the heads' ([2, 2, 2, 4] -> [2, 1, 4, 4]) and back; the
// weights enter through copies (one per value: the tied table twice, as a
// table and transposed), the position embedding is cut to the rank's
// tokens, and the loss sums the rank's 4 rows over the axis.
// CHECK-LABEL: module attributes {train.sequence_parallel = "all-to-all", train.sequence_parallel_ranks = 2 : i64}
// CHECK: %[[IDS:.*]] = dist.reshard %arg0 {from = #dist.sharding<[-, -]>, mesh = @sp, to = #dist.sharding<[-, sp]>} : (tensor<2x4xi64>) -> tensor<2x2xi64>
// CHECK: %[[LABELS:.*]] = dist.reshard %arg1 {from = #dist.sharding<[-, -]>, mesh = @sp, to = #dist.sharding<[-, sp]>} : (tensor<2x4xi64>) -> tensor<2x2xi64>
// CHECK: %[[T:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-, -]>, mesh = @sp, to = #dist.sharding<[-, -] copies(sp)>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[P:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-, -]>, mesh = @sp, to = #dist.sharding<[sp, -]>} : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[TOK:.*]] = train.gather %[[T]], %[[IDS]] {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2x2xi64>) -> tensor<2x2x8xf32>
// CHECK: train.add %[[TOK]], %[[P]] : (tensor<2x2x8xf32>, tensor<2x8xf32>) -> tensor<2x2x8xf32>
// CHECK: train.layer_norm {{.*}} -> tensor<2x2x8xf32>
// CHECK-COUNT-3: dist.reshard %{{.*}} {from = #dist.sharding<[-, -, sp, -]>, mesh = @sp, to = #dist.sharding<[-, sp, -, -]>} : (tensor<2x2x2x4xf32>) -> tensor<2x1x4x4xf32>
// CHECK: %[[O:.*]] = train.attention {{.*}} -> tensor<2x1x4x4xf32>
// CHECK: dist.reshard %[[O]] {from = #dist.sharding<[-, sp, -, -]>, mesh = @sp, to = #dist.sharding<[-, -, sp, -]>} : (tensor<2x1x4x4xf32>) -> tensor<2x2x2x4xf32>
// CHECK: %[[ROWS:.*]] = train.reshape %{{.*}} : (tensor<2x2x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[L:.*]] = train.reshape %[[LABELS]] : (tensor<2x2xi64>) -> tensor<4xi64>
// CHECK: train.cross_entropy %[[ROWS]], %[[L]] {token_axis = "sp"} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
// The backward pass trades back (each all-to-all's gradient the other
// way), sums the weights' gradients over the ranks' tokens, gathers the
// position embedding's whole, and the loss's gradient counts every rank's
// labels.
// GRAD-LABEL: func.func @forward_backward
// GRAD-DAG: train.cross_entropy_grad {{.*}}token_axis = "sp"
// GRAD-DAG: dist.all_to_all %{{.*}} {axis = "sp", concat_dim = 1 : i64, split_dim = 2 : i64} : (tensor<2x1x4x4xf32>) -> tensor<2x2x2x4xf32>
// GRAD-DAG: dist.all_to_all %{{.*}} {axis = "sp", concat_dim = 2 : i64, split_dim = 1 : i64} : (tensor<2x2x2x4xf32>) -> tensor<2x1x4x4xf32>
// GRAD-DAG: dist.all_gather %{{.*}} {axis = "sp", dim = 0 : i64} : (tensor<2x8xf32>) -> tensor<4x8xf32>
// GRAD-DAG: dist.all_reduce %{{.*}} {axis = "sp"} : tensor<8xf32>
// GRAD-DAG: dist.all_reduce %{{.*}} {axis = "sp"} : tensor<8x8xf32>
module {
  train.parameter @wte : tensor<8x8xf32> {trainable}
  train.parameter @wpe : tensor<4x8xf32> {trainable}
  train.parameter @scale : tensor<8xf32> {trainable}
  train.parameter @wq : tensor<8x8xf32> {trainable}
  train.parameter @wk : tensor<8x8xf32> {trainable}
  train.parameter @wv : tensor<8x8xf32> {trainable}
  train.parameter @wo : tensor<8x8xf32> {trainable}
  func.func @forward(%ids: tensor<2x4xi64> {train.name = "input_ids"}, %labels: tensor<2x4xi64> {train.name = "labels"})
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
    %o = train.attention %qh, %kh, %vh {causal = true, scale = 0.5 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
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

// -----

// A mean over the tokens mixes them outside attention.
module {
  train.parameter @w : tensor<8x8xf32> {trainable}
  func.func @forward(%x: tensor<2x4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @w : tensor<8x8xf32>
    %h = train.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %q = train.reshape %h : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %qh = train.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %o = train.attention %qh, %qh, %qh {scale = 0.5 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    // expected-error @+1 {{does not compute each token on its own}}
    %m = train.reduce_mean %o {axes = array<i64: 2>, keepdims = false} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4xf32>
    %s = train.reduce_sum %m {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x2x4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// One head cannot be split over two ranks.
module {
  train.parameter @w : tensor<4x4xf32> {trainable}
  func.func @forward(%x: tensor<2x4x4xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @w : tensor<4x4xf32>
    %h = train.linear %x, %w : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %q = train.reshape %h : (tensor<2x4x4xf32>) -> tensor<2x4x1x4xf32>
    %qh = train.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x1x4xf32>) -> tensor<2x1x4x4xf32>
    // expected-error @+1 {{gives each of the 2 ranks its heads of attention (all-to-all), and 'tensor<2x1x4x4xf32>' has 1 heads}}
    %o = train.attention %qh, %qh, %qh {scale = 0.5 : f32} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
    %s = train.reduce_sum %o {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<2x1x4x4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Without attention there is nothing to trade the tokens for.
module {
  train.parameter @w : tensor<4x4xf32> {trainable}
  // expected-error @+1 {{@forward has no train.attention}}
  func.func @forward(%x: tensor<2x4x4xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @w : tensor<4x4xf32>
    %h = train.linear %x, %w : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %s = train.reduce_sum %h {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x4x4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}
