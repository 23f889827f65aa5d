// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -train-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// An MLP block (a linear whose weight is read through a transpose, GELU, a
// linear with a bias): the first weight and bias split by output columns,
// the second weight by input rows; the input enters through copy_to_ranks,
// the partial products are summed, then the second bias is added.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @fc : tensor<16x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @fc_bias : tensor<16xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @proj : tensor<16x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @proj_bias : tensor<8xf32> {trainable}
// CHECK: %[[FC:.*]] = train.param @fc : tensor<16x8xf32>
// CHECK: %[[FCT:.*]] = train.transpose %[[FC]] {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK: %[[IN:.*]] = train.copy_to_ranks %arg0 {axis = "tp"} : tensor<4x8xf32>
// CHECK: %[[H:.*]] = train.linear %[[IN]], %[[FCT]], %{{.*}} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK: %[[A:.*]] = train.gelu %[[H]] : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[P:.*]] = train.linear %[[A]], %{{.*}} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = train.all_reduce %[[P]] {axis = "tp"} : tensor<4x8xf32>
// CHECK: train.add %[[S]], %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// The backward pass: the sum's gradient passes through; the copy's is
// summed over the ranks.
// GRAD-LABEL: func.func @forward_backward
// GRAD: train.all_reduce
// GRAD: train.all_reduce
// GRAD-NOT: train.all_reduce
// GRAD: return
module {
  train.parameter @fc : tensor<32x8xf32> {trainable}
  train.parameter @fc_bias : tensor<32xf32> {trainable}
  train.parameter @proj : tensor<32x8xf32> {trainable}
  train.parameter @proj_bias : tensor<8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @fc : tensor<32x8xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %b = train.param @fc_bias : tensor<32xf32>
    %h = train.linear %x, %wt, %b : (tensor<4x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %a = train.gelu %h : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %p = train.param @proj : tensor<32x8xf32>
    %pb = train.param @proj_bias : tensor<8xf32>
    %y = train.linear %a, %p, %pb : (tensor<4x32xf32>, tensor<32x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %sq = train.mul %y, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %sq {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// SwiGLU (LLaMA): two column linears of one input, multiplied, then the
// row linear; one copy of the input serves both.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @gate : tensor<8x8xf32> {split_dim = 1 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @up : tensor<8x8xf32> {split_dim = 1 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @down : tensor<8x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK-COUNT-1: train.copy_to_ranks
// CHECK: train.mul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: train.all_reduce
module {
  train.parameter @gate : tensor<8x16xf32> {trainable}
  train.parameter @up : tensor<8x16xf32> {trainable}
  train.parameter @down : tensor<16x8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %g = train.param @gate : tensor<8x16xf32>
    %gh = train.linear %x, %g : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %s = train.silu %gh : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %u = train.param @up : tensor<8x16xf32>
    %uh = train.linear %x, %u : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %m = train.mul %s, %uh : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %d = train.param @down : tensor<16x8xf32>
    %y = train.linear %m, %d : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A hidden width that does not divide by the ranks is an error at the op.
module {
  train.parameter @a : tensor<8x5xf32> {trainable}
  train.parameter @b : tensor<5x8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %a = train.param @a : tensor<8x5xf32>
    %h = train.linear %x, %a : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    %r = train.relu %h : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %b = train.param @b : tensor<5x8xf32>
    // expected-error@+1 {{tensor parallelism over 2 ranks splits this linear layer's 5 input features, which do not divide by 2}}
    %y = train.linear %r, %b : (tensor<4x5xf32>, tensor<5x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A weight read twice (tied) cannot be split for one of its uses; with no
// other pair, there is nothing to split.
module {
  train.parameter @w : tensor<8x8xf32> {trainable}
  // expected-error@+1 {{tensor parallelism splits column-then-row pairs of linear layers}}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @w : tensor<8x8xf32>
    %h = train.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %r = train.relu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w2 = train.param @w : tensor<8x8xf32>
    %y = train.linear %r, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
