// RUN: colossal-opt %s -train-autodiff | FileCheck %s

// A weight read twice (tied embedding and head) gets the sum of both
// gradients; a frozen weight gets none; a trainable weight the loss does not
// use gets zeros.
module {
  train.parameter @embed : tensor<8x4xf32> {trainable}
  train.parameter @frozen : tensor<4xf32>
  train.parameter @unused : tensor<3xf32> {trainable}
  // CHECK-LABEL: func.func @forward_backward
  // CHECK-SAME: {train.name = "grad:embed"}, tensor<3xf32> {train.name = "grad:unused"})
  // CHECK: %[[G1:.*]] = train.gather_grad
  // CHECK: %[[SUM:.*]] = train.add %[[G1]], %{{.*}} : (tensor<8x4xf32>, tensor<8x4xf32>)
  // CHECK: %[[ZERO:.*]] = train.constant dense<0.000000e+00> : tensor<3xf32>
  // CHECK: return %{{.*}}, %[[SUM]], %[[ZERO]]
  func.func @forward(%ids: tensor<2xi64> {train.name = "ids"}, %labels: tensor<2xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %e = train.param @embed : tensor<8x4xf32>
    %x = train.gather %e, %ids {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %f = train.param @frozen : tensor<4xf32>
    %y = train.add %x, %f : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %e2 = train.param @embed : tensor<8x4xf32>
    %head = train.transpose %e2 {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %logits = train.matmul %y, %head : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %loss = train.cross_entropy %logits, %labels : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
