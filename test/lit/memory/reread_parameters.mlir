// RUN: colossal-opt %s -train-autodiff -train-reread-parameters | FileCheck %s
// RUN: not colossal-opt %s -train-reread-parameters 2>&1 | FileCheck %s --check-prefix=FIRST

// A weight read in the forward pass and needed by the backward one (w2: the
// input gradient of the head reads it) gets a second read there, ZeRO-3
// gathering it again instead of keeping it whole across the step; its view
// (the transpose), transposed back by the gradient, composes away. A bias, which no gradient
// reads, keeps its one read; so does the first layer's weight (no gradient
// flows to the input x, so nothing in the backward reads w1).
module {
  train.parameter @w1 : tensor<16x32xf32> {trainable}
  train.parameter @b1 : tensor<32xf32> {trainable}
  train.parameter @w2 : tensor<10x32xf32> {trainable}
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w1 = train.param @w1 : tensor<16x32xf32>
    %b1 = train.param @b1 : tensor<32xf32>
    %h = train.linear %x, %w1, %b1 : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %a = train.gelu %h : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %w2 = train.param @w2 : tensor<10x32xf32>
    %w2t = train.transpose %w2 {perm = array<i64: 1, 0>} : (tensor<10x32xf32>) -> tensor<32x10xf32>
    %logits = train.linear %a, %w2t : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK:       %[[W1:.*]] = train.param @w1
// CHECK-NEXT:  %[[B1:.*]] = train.param @b1
// CHECK-NEXT:  train.linear %{{.*}}, %[[W1]], %[[B1]]
// CHECK:       %[[W2:.*]] = train.param @w2
// CHECK-NEXT:  %[[W2T:.*]] = train.transpose %[[W2]]
// CHECK-NEXT:  train.linear %{{.*}}, %[[W2T]]
// CHECK-NEXT:  %[[LOSS:.*]] = train.cross_entropy
// CHECK:       train.cross_entropy_grad
// The backward reads w2 again just before the head's input gradient needs
// it; that gradient transposes the transposed view back, which is w2
// itself: the matmul reads the weight, no copy. Nothing else is read again.
// CHECK-NEXT:  %[[W2B:.*]] = train.param @w2
// CHECK-NEXT:  train.matmul %{{.*}}, %[[W2B]]
// CHECK-NOT:   train.param
// CHECK:       return %[[LOSS]]

// FIRST: train-reread-parameters needs @forward_backward (run train-autodiff first)
