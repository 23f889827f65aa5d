// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -train-autodiff -train-lower-resharding -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// A tied embedding and output layer (GPT-2, BERT): the table splits by
// vocabulary rows. The lookup of token ids gathers from the rank's rows and
// the ranks' parts are summed; the output layer's input enters through a
// copy, its logits are the rank's columns (16 of 32) through the reshape
// and the vocabulary bias (split with them), and the loss takes them split.
// Position embeddings, looked up by constant positions, stay whole.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @wte : tensor<16x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @wpe : tensor<4x8xf32> {trainable}
// CHECK: train.parameter @vocab_bias : tensor<16xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: %[[T:.*]] = train.param @wte : tensor<16x8xf32>
// CHECK: %[[E:.*]] = train.gather %[[T]], %arg0 {axis = 0 : i64, mesh_axis = "tp"} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// CHECK: %[[ES:.*]] = dist.reshard %[[E]] {from = #dist.sharding<[-, -, -] sum(tp)>, mesh = @tp, to = #dist.sharding<[-, -, -]>} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: train.gather %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
// CHECK: train.add %[[ES]]
// CHECK: %[[TT:.*]] = train.transpose %[[T]] {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK: %[[IN:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[-, -, -]>, mesh = @tp, to = #dist.sharding<[-, -, -] copies(tp)>} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[L:.*]] = train.linear %[[IN]], %[[TT]] : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[LB:.*]] = train.add %[[L]], %{{.*}} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[R:.*]] = train.reshape %[[LB]] : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
// CHECK: train.cross_entropy %[[R]], %{{.*}} {ignore_index = -100 : i64, mesh_axis = "tp"} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// The backward pass: the loss's gradient and the lookup's are the rank's
// slices; the output layer's input gradient is summed over the ranks.
// GRAD-LABEL: func.func @forward_backward
// GRAD: train.cross_entropy_grad {{.*}} mesh_axis = "tp"} : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
// GRAD: dist.all_reduce %{{.*}} {axis = "tp"} : tensor<2x4x8xf32>
// GRAD: train.gather_grad %arg0, %{{.*}} {axis = 0 : i64, mesh_axis = "tp"} : (tensor<2x4xi64>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
module {
  train.parameter @wte : tensor<32x8xf32> {trainable}
  train.parameter @wpe : tensor<4x8xf32> {trainable}
  train.parameter @vocab_bias : tensor<32xf32> {trainable}
  func.func @forward(%ids: tensor<2x4xi64> {train.name = "input_ids"}, %labels: tensor<2x4xi64> {train.name = "labels"})
      -> (tensor<f32> {train.name = "loss"}) {
    %positions = train.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %t = train.param @wte : tensor<32x8xf32>
    %e = train.gather %t, %ids {axis = 0 : i64} : (tensor<32x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %p = train.param @wpe : tensor<4x8xf32>
    %pe = train.gather %p, %positions {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %x = train.add %e, %pe : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %h = train.tanh %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %tt = train.transpose %t {perm = array<i64: 1, 0>} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %logits = train.linear %h, %tt : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %vb = train.param @vocab_bias : tensor<32xf32>
    %biased = train.add %logits, %vb : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32>
    %flat = train.reshape %biased : (tensor<2x4x32xf32>) -> tensor<8x32xf32>
    %l = train.reshape %labels : (tensor<2x4xi64>) -> tensor<8xi64>
    %loss = train.cross_entropy %flat, %l {ignore_index = -100 : i64} : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// An untied output layer (LLaMA's lm_head, [vocab, hidden] read transposed)
// scaled by a constant: the scale is replicated and enters through a copy.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @head : tensor<8x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.linear {{.*}} -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[]>, mesh = @tp, to = #dist.sharding<[] copies(tp)>} : (tensor<f32>) -> tensor<f32>
// CHECK: train.mul %{{.*}}, %[[S]] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK: train.cross_entropy %{{.*}}, %arg1 {mesh_axis = "tp"}
module {
  train.parameter @head : tensor<16x8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"})
      -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @head : tensor<16x8xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %logits = train.linear %x, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %scale = train.constant dense<0.5> : tensor<f32>
    %scaled = train.mul %logits, %scale : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
    %loss = train.cross_entropy %scaled, %labels : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A vocabulary the ranks do not divide is padded with rows of zeros to a
// multiple of them (5 rows to 6, 3 per rank); the loss counts the real
// classes only. An output layer whose logits do not reach a cross-entropy
// is no vocabulary and stays whole.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @odd : tensor<3x8xf32> {padding = 1 : i64, split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @head : tensor<16x8xf32> {trainable}
// CHECK: train.gather %{{.*}}, %arg0 {axis = 0 : i64, mesh_axis = "tp"} : (tensor<3x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
// CHECK: train.linear {{.*}} -> tensor<4x3xf32>
// CHECK: train.cross_entropy %{{.*}}, %arg1 {classes = 5 : i64, mesh_axis = "tp"} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
module {
  train.parameter @odd : tensor<5x8xf32> {trainable}
  train.parameter @head : tensor<16x8xf32> {trainable}
  func.func @forward(%ids: tensor<4xi64> {train.name = "ids"}, %labels: tensor<4xi64> {train.name = "labels"})
      -> (tensor<f32> {train.name = "loss"}) {
    %t = train.param @odd : tensor<5x8xf32>
    %e = train.gather %t, %ids {axis = 0 : i64} : (tensor<5x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %w = train.param @head : tensor<16x8xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %h = train.linear %e, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %sq = train.mul %h, %h : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %d = train.reduce_mean %sq {axes = array<i64: 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<4xf32>
    %t2 = train.transpose %t {perm = array<i64: 1, 0>} : (tensor<5x8xf32>) -> tensor<8x5xf32>
    %logits = train.linear %e, %t2 : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    %loss = train.cross_entropy %logits, %labels : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A vocabulary so small that a rank would hold padding only (1 row on 2
// ranks) stays whole; with nothing else to split, that is an error.
module {
  train.parameter @tiny : tensor<1x8xf32> {trainable}
  // expected-error@+1 {{and vocabulary tables (embeddings of token ids, output layers scoring a cross-entropy), and @forward has none}}
  func.func @forward(%ids: tensor<4xi64> {train.name = "ids"}) -> (tensor<f32> {train.name = "loss"}) {
    %t = train.param @tiny : tensor<1x8xf32>
    %e = train.gather %t, %ids {axis = 0 : i64} : (tensor<1x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %e {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
