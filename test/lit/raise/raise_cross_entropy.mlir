// RUN: colossal-opt %s -train-raise-cross-entropy | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @softmax_cross_entropy_loss
// CHECK-SAME: (%[[S:.*]]: tensor<16x32xf32>, %[[L:.*]]: tensor<16xi64>)
func.func @softmax_cross_entropy_loss(%s: tensor<16x32xf32>, %l: tensor<16xi64>) -> tensor<f32> {
  // CHECK: train.cross_entropy %[[S]], %[[L]] {ignore_index = -100 : i64}
  %0 = train.softmax_cross_entropy_loss %s, %l {ignore_index = -100 : i64} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @log_softmax_nll
// CHECK-SAME: (%[[S:.*]]: tensor<16x32xf32>, %[[L:.*]]: tensor<16xi64>)
func.func @log_softmax_nll(%s: tensor<16x32xf32>, %l: tensor<16xi64>) -> tensor<f32> {
  // CHECK: train.cross_entropy %[[S]], %[[L]] {reduction = "sum"}
  %lp = train.log_softmax %s {axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %0 = train.nll_loss %lp, %l {reduction = "sum"} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Class weights have no fused form: the loss stays.
// CHECK-LABEL: func.func @weighted_stays
func.func @weighted_stays(%s: tensor<16x32xf32>, %l: tensor<16xi64>, %w: tensor<32xf32>) -> tensor<f32> {
  // CHECK: train.softmax_cross_entropy_loss
  %0 = train.softmax_cross_entropy_loss %s, %l, %w : (tensor<16x32xf32>, tensor<16xi64>, tensor<32xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
