// RUN: colossal-opt %s -train-autodiff -train-regather-for-backward | FileCheck %s
// RUN: colossal-opt %s -train-autodiff | FileCheck %s --check-prefix=KEPT
// RUN: not colossal-opt %s -train-regather-for-backward 2>&1 | FileCheck %s --check-prefix=FIRST

// A sequence-parallel block's entry: the rank's tokens [2, 2, 8] gathered
// to [2, 4, 8] for a column-parallel layer. Its weight gradient reads the
// gathered input. With `train-regather-for-backward` the backward pass
// gathers the shard again just before that read, so the forward's gathered
// tensor dies after the forward's linear (Megatron-LM keeps the shard, not
// the gathered tensor); without it the forward's gather is read there.
module {
  train.parameter @w : tensor<8x8xf32> {trainable}
  func.func @forward(%x: tensor<2x2x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %g = dist.all_gather %x {axis = "tp", dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
    %w = train.param @w : tensor<8x8xf32>
    %y = train.linear %g, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %l = train.reduce_sum %y {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK:       %[[G:.*]] = dist.all_gather %arg0 {axis = "tp", dim = 1 : i64}
// CHECK:       train.linear %[[G]]
// CHECK:       train.reduce_sum
// CHECK-NOT:   %[[G]]
// CHECK:       %[[AGAIN:.*]] = dist.all_gather %arg0 {axis = "tp", dim = 1 : i64}
// CHECK-NOT:   %[[G]]
// CHECK:       train.reshape %[[AGAIN]]
// CHECK:       return

// KEPT-LABEL: func.func @forward_backward
// KEPT:       %[[G:.*]] = dist.all_gather %arg0
// KEPT-NOT:   dist.all_gather
// KEPT:       train.reshape %[[G]]

// FIRST: error: train-regather-for-backward needs @forward_backward (run train-autodiff first)
