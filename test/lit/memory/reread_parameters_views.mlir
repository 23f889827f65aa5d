// RUN: colossal-opt %s -train-autodiff -train-recompute-layers -train-reread-parameters | FileCheck %s

// A weight's view the backward pass reads twice (a recomputed layer's
// linear, then its input gradient) is made again before each reader from the
// one backward read, so neither copy is held across the layer's backward pass
// (the input gradient's, transposed back, is the weight itself).
module {
  train.parameter @embed : tensor<16x32xf32> {trainable}
  train.parameter @layers.0.w : tensor<32x32xf32> {trainable}
  train.parameter @layers.1.w : tensor<32x32xf32> {trainable}
  train.parameter @head : tensor<32x10xf32> {trainable}
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %we = train.param @embed : tensor<16x32xf32>
    %e = train.linear %x, %we : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
    %w0 = train.param @layers.0.w : tensor<32x32xf32>
    %w0t = train.transpose %w0 {perm = array<i64: 1, 0>} : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %h0 = train.linear %e, %w0t : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %a0 = train.gelu %h0 : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %r0 = train.add %e, %a0 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %w1 = train.param @layers.1.w : tensor<32x32xf32>
    %w1t = train.transpose %w1 {perm = array<i64: 1, 0>} : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %h1 = train.linear %r0, %w1t : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %a1 = train.gelu %h1 : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %r1 = train.add %r0, %a1 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %wh = train.param @head : tensor<32x10xf32>
    %logits = train.linear %r1, %wh : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK:       train.cross_entropy_grad
// CHECK:       %[[W:.*]] = train.param @layers.1.w
// CHECK-NEXT:  %[[V1:.*]] = train.transpose %[[W]]
// CHECK-NEXT:  train.linear %{{.*}}, %[[V1]]
// The input gradient's view, transposed back, is the weight itself: it
// reads the one backward read, and the first view is not held for it.
// CHECK-NOT:   %[[V1]]
// CHECK:       train.matmul %{{.*}}, %[[W]]
// CHECK-NOT:   %[[V1]]
// CHECK:       train.param @layers.0.w
