// RUN: colossal-opt %s -train-autodiff -train-recompute-layers | FileCheck %s
// RUN: not colossal-opt %s -train-recompute-layers 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: colossal-opt %s -train-autodiff -train-recompute-layers -train-reread-parameters | FileCheck %s --check-prefix=REREAD

// Two identical layers (linear, gelu, residual add) between an embedding
// and a head. Full recomputation keeps each layer's checkpoints (its input
// and its output, which leave the layer) and re-runs the rest where the
// layer's backward first needs it: gelu_grad reads the linear's output, so
// each layer's linear runs again right before it, from the kept input; the
// forward's results are freed after their forward uses.
module {
  train.parameter @embed : tensor<16x32xf32> {trainable}
  train.parameter @layers.0.w : tensor<32x32xf32> {trainable}
  train.parameter @layers.1.w : tensor<32x32xf32> {trainable}
  train.parameter @head : tensor<32x10xf32> {trainable}
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %we = train.param @embed : tensor<16x32xf32>
    %e = train.linear %x, %we : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
    %w0 = train.param @layers.0.w : tensor<32x32xf32>
    %h0 = train.linear %e, %w0 : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %a0 = train.gelu %h0 : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %r0 = train.add %e, %a0 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %w1 = train.param @layers.1.w : tensor<32x32xf32>
    %h1 = train.linear %r0, %w1 : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %a1 = train.gelu %h1 : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %r1 = train.add %r0, %a1 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %wh = train.param @head : tensor<32x10xf32>
    %logits = train.linear %r1, %wh : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK:       %[[E:.*]] = train.linear %arg0
// CHECK-NEXT:  %[[W0:.*]] = train.param @layers.0.w
// CHECK-NEXT:  %[[H0:.*]] = train.linear %[[E]], %[[W0]]
// CHECK-NEXT:  train.gelu %[[H0]]
// CHECK:       %[[R0:.*]] = train.add %[[E]]
// CHECK-NEXT:  %[[W1:.*]] = train.param @layers.1.w
// CHECK-NEXT:  %[[H1:.*]] = train.linear %[[R0]], %[[W1]]
// CHECK:       train.cross_entropy_grad
// The backward reads the re-run results, not the forward's.
// CHECK-NOT:   train.gelu_grad %[[H1]]
// CHECK:       %[[H1B:.*]] = train.linear %[[R0]], %[[W1]]
// CHECK-NEXT:  train.gelu_grad %[[H1B]]
// CHECK-NOT:   train.gelu_grad %[[H0]]
// CHECK:       %[[H0B:.*]] = train.linear %[[E]], %[[W0]]
// CHECK-NEXT:  train.gelu_grad %[[H0B]]
// CHECK:       return

// Under ZeRO-3 the re-run layers read their weights again, from the second
// reads the backward gets.
// REREAD-LABEL: func.func @forward_backward
// REREAD:       train.cross_entropy_grad
// REREAD:       %[[W1B:.*]] = train.param @layers.1.w
// REREAD-NEXT:  train.linear %{{.*}}, %[[W1B]]
// REREAD:       %[[W0B:.*]] = train.param @layers.0.w
// REREAD-NEXT:  train.linear %{{.*}}, %[[W0B]]

// FIRST: error: recomputation needs @forward and @forward_backward (run train-autodiff first)
