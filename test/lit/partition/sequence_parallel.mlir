// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -train-sequence-parallel -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -train-sequence-parallel -train-autodiff -train-lower-resharding -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// A tiny language model: a vocabulary-parallel embedding plus a position
// embedding, a pre-norm MLP block on the residual stream, a final norm and
// the tied output layer. The lookup's sum and the block's become
// reduce-scatters of the 4 tokens (2 per rank); the block's and the output
// layer's entries all-gathers; the residual adds, the norms and the bias
// after the block run on [2, 2, 8]; the norms' scales and the bias enter
// through copies, the position embedding is cut to the rank's tokens.
// CHECK-LABEL: module attributes {train.sequence_parallel = "megatron", train.tensor_parallel = 2 : i64}
// CHECK: %[[E:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-, -, -] sum(tp)>, mesh = @tp, to = #dist.sharding<[-, tp, -]>} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[P:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-, -]>, mesh = @tp, to = #dist.sharding<[tp, -]>} : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[X:.*]] = train.add %[[E]], %[[P]] : (tensor<2x2x8xf32>, tensor<2x8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[S:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-]>, mesh = @tp, to = #dist.sharding<[-] copies(tp)>} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: %[[N:.*]] = train.layer_norm %[[X]], %[[S]] {axis = 2 : i64} : (tensor<2x2x8xf32>, tensor<8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[G:.*]] = dist.reshard %[[N]] {from = #dist.sharding<[-, tp, -]>, mesh = @tp, to = #dist.sharding<[-, -, -] copies(tp)>} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
// CHECK: train.linear %[[G]], %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[R:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-, -, -] sum(tp)>, mesh = @tp, to = #dist.sharding<[-, tp, -]>} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[B:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-]>, mesh = @tp, to = #dist.sharding<[-] copies(tp)>} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: train.add %[[R]], %[[B]] : (tensor<2x2x8xf32>, tensor<8xf32>) -> tensor<2x2x8xf32>
// CHECK: train.layer_norm {{.*}} -> tensor<2x2x8xf32>
// CHECK: dist.reshard %{{.*}} {from = #dist.sharding<[-, tp, -]>, mesh = @tp, to = #dist.sharding<[-, -, -] copies(tp)>} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT: dist.reshard {{.*}} sum(tp)>, mesh = @tp, to = #dist.sharding<[{{[-, ]*}}]>}
// CHECK: train.cross_entropy %{{.*}}, %{{.*}} {mesh_axis = "tp"} : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
// The backward pass mirrors them: the exits' gradients gathered, the
// entries' reduce-scattered, the position embedding's gathered whole, the
// replicated weights' gradients summed over the ranks' tokens.
// GRAD-LABEL: func.func @forward_backward
// GRAD-DAG: dist.all_gather %{{.*}} {axis = "tp", dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
// GRAD-DAG: dist.reduce_scatter %{{.*}} {axis = "tp", dim = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
// GRAD-DAG: dist.all_gather %{{.*}} {axis = "tp", dim = 0 : i64} : (tensor<2x8xf32>) -> tensor<4x8xf32>
// GRAD-DAG: dist.all_reduce %{{.*}} {axis = "tp"} : tensor<8xf32>
module {
  train.parameter @wte : tensor<8x8xf32> {trainable}
  train.parameter @wpe : tensor<4x8xf32> {trainable}
  train.parameter @scale : tensor<8xf32> {trainable}
  train.parameter @fc : tensor<8x16xf32> {trainable}
  train.parameter @proj : tensor<16x8xf32> {trainable}
  train.parameter @proj_bias : tensor<8xf32> {trainable}
  train.parameter @final : tensor<8xf32> {trainable}
  func.func @forward(%ids: tensor<2x4xi64> {train.name = "input_ids"}, %labels: tensor<2x4xi64> {train.name = "labels"})
      -> (tensor<f32> {train.name = "loss"}) {
    %t = train.param @wte : tensor<8x8xf32>
    %pos = train.param @wpe : tensor<4x8xf32>
    %tok = train.gather %t, %ids {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %e = train.add %tok, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %s = train.param @scale : tensor<8xf32>
    %n = train.layer_norm %e, %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %w = train.param @fc : tensor<8x16xf32>
    %h = train.linear %n, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %a = train.gelu %h : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
    %p = train.param @proj : tensor<16x8xf32>
    %pb = train.param @proj_bias : tensor<8xf32>
    %y = train.linear %a, %p, %pb : (tensor<2x4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %r = train.add %e, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %f = train.param @final : tensor<8xf32>
    %fn = train.layer_norm %r, %f {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %tt = train.transpose %t {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %logits = train.linear %fn, %tt : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %flat = train.reshape %logits : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
    %l = train.reshape %labels : (tensor<2x4xi64>) -> tensor<8xi64>
    %loss = train.cross_entropy %flat, %l : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// What reads the token-split activations must compute each token on its
// own: a mean over them is refused at the op.
module {
  train.parameter @fc : tensor<8x16xf32> {trainable}
  train.parameter @proj : tensor<16x8xf32> {trainable}
  func.func @forward(%x: tensor<2x4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @fc : tensor<8x16xf32>
    %h = train.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %a = train.gelu %h : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
    %p = train.param @proj : tensor<16x8xf32>
    %y = train.linear %a, %p : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    // expected-error@+1 {{sequence parallelism computes the activations between tensor-parallel blocks on each rank's tokens, and this op reads them but does not compute each token on its own}}
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<2x4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Dropout on the token-split activations draws the rank's slice of the
// whole tensor's mask (mesh_axis, mesh_dim).
// CHECK-LABEL: module attributes {train.sequence_parallel = "megatron", train.tensor_parallel = 2 : i64}
// CHECK: train.relu
// CHECK: %[[R:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-, -, -] sum(tp)>, mesh = @tp, to = #dist.sharding<[-, tp, -]>} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
// CHECK-NEXT: train.dropout %[[R]] {mesh_axis = "tp", mesh_dim = 1 : i64, ratio = 2.500000e-01 : f32, site = 3 : i64} : (tensor<2x2x8xf32>) -> (tensor<2x2x8xf32>, tensor<2x2x8xi1>)
module {
  train.parameter @wte : tensor<8x8xf32> {trainable}
  train.parameter @fc : tensor<8x16xf32> {trainable}
  train.parameter @proj : tensor<16x8xf32> {trainable}
  func.func @forward(%ids: tensor<2x4xi64> {train.name = "input_ids"}, %labels: tensor<2x4xi64> {train.name = "labels"})
      -> (tensor<f32> {train.name = "loss"}) {
    %t = train.param @wte : tensor<8x8xf32>
    %x = train.gather %t, %ids {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %w = train.param @fc : tensor<8x16xf32>
    %h = train.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %a = train.relu %h : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
    %p = train.param @proj : tensor<16x8xf32>
    %y = train.linear %a, %p : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %d, %mask = train.dropout %y {ratio = 0.25 : f32, site = 3 : i64} : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xi1>)
    %r = train.add %x, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %tt = train.transpose %t {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %logits = train.linear %r, %tt : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %flat = train.reshape %logits : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
    %l = train.reshape %labels : (tensor<2x4xi64>) -> tensor<8xi64>
    %loss = train.cross_entropy %flat, %l : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
