// RUN: colossal-opt %s -train-autodiff | FileCheck %s --enable-var-scope

// A two-layer MLP: the loss seeds the backward pass with 1, cross-entropy,
// GELU and linear layers use their rules, the input gets no gradient (no
// value of its type is computed), and
// the gradients come back in parameter order.
module {
  train.parameter @w1 : tensor<16x32xf32> {trainable}
  train.parameter @b1 : tensor<32xf32> {trainable}
  train.parameter @w2 : tensor<32x10xf32> {trainable}
  // CHECK-LABEL: func.func @forward_backward
  // CHECK-SAME: -> (tensor<f32> {train.name = "loss"}, tensor<16x32xf32> {train.name = "grad:w1"}, tensor<32xf32> {train.name = "grad:b1"}, tensor<32x10xf32> {train.name = "grad:w2"})
  // CHECK: %[[SEED:.*]] = train.constant dense<1.000000e+00> : tensor<f32>
  // CHECK: %[[DLOGITS:.*]] = train.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]
  // CHECK-NOT: -> tensor<4x16xf32>
  // CHECK: train.gelu_grad
  // CHECK-NOT: -> tensor<4x16xf32>
  // CHECK: return
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w1 = train.param @w1 : tensor<16x32xf32>
    %b1 = train.param @b1 : tensor<32xf32>
    %h = train.linear %x, %w1, %b1 : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %a = train.gelu %h : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %w2 = train.param @w2 : tensor<32x10xf32>
    %logits = train.linear %a, %w2 : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
