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

// Class weights have no fused form: the loss becomes the weighted
// likelihood of a log-softmax, each with its gradient rule.
// CHECK-LABEL: func.func @weighted_softmax_cross_entropy
// CHECK-SAME: (%[[S:.*]]: tensor<16x32xf32>, %[[L:.*]]: tensor<16xi64>, %[[W:.*]]: tensor<32xf32>)
func.func @weighted_softmax_cross_entropy(%s: tensor<16x32xf32>, %l: tensor<16xi64>, %w: tensor<32xf32>) -> tensor<f32> {
  // CHECK: %[[LP:.*]] = train.log_softmax %[[S]] {axis = 1 : i64}
  // CHECK: train.nll_loss %[[LP]], %[[L]], %[[W]] {ignore_index = -1 : i64, reduction = "sum"}
  // CHECK-NOT: train.softmax_cross_entropy_loss
  %0 = train.softmax_cross_entropy_loss %s, %l, %w {ignore_index = -1 : i64, reduction = "sum"} : (tensor<16x32xf32>, tensor<16xi64>, tensor<32xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// A weighted LogSoftmax + NLL stays as it is.
// CHECK-LABEL: func.func @weighted_nll_stays
func.func @weighted_nll_stays(%s: tensor<16x32xf32>, %l: tensor<16xi64>, %w: tensor<32xf32>) -> tensor<f32> {
  // CHECK: train.log_softmax
  // CHECK: train.nll_loss
  // CHECK-NOT: train.cross_entropy
  %lp = train.log_softmax %s {axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %0 = train.nll_loss %lp, %l, %w : (tensor<16x32xf32>, tensor<16xi64>, tensor<32xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// PyTorch's F.nll_loss(F.log_softmax(x, -1).view(-1, C), y.view(-1)): the
// logits are flattened instead, and the loss fused.
// CHECK-LABEL: func.func @flattened_log_softmax_nll
// CHECK-SAME: (%[[S:.*]]: tensor<2x8x32xf32>, %[[L:.*]]: tensor<16xi64>)
func.func @flattened_log_softmax_nll(%s: tensor<2x8x32xf32>, %l: tensor<16xi64>) -> tensor<f32> {
  // CHECK: %[[FLAT:.*]] = train.reshape %[[S]] : (tensor<2x8x32xf32>) -> tensor<16x32xf32>
  // CHECK: train.cross_entropy %[[FLAT]], %[[L]] {ignore_index = -100 : i64}
  // CHECK-NOT: train.nll_loss
  %lp = train.log_softmax %s {axis = -1 : i64} : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %flat = train.reshape %lp : (tensor<2x8x32xf32>) -> tensor<16x32xf32>
  %0 = train.nll_loss %flat, %l {ignore_index = -100 : i64} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// A flattening that mixes the classes with other positions is not a
// log-softmax over rows: the loss stays.
// CHECK-LABEL: func.func @mixed_flattening_stays
func.func @mixed_flattening_stays(%s: tensor<2x8x32xf32>, %l: tensor<32xi64>) -> tensor<f32> {
  // CHECK: train.nll_loss
  %lp = train.log_softmax %s {axis = -1 : i64} : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %flat = train.reshape %lp : (tensor<2x8x32xf32>) -> tensor<32x16xf32>
  %0 = train.nll_loss %flat, %l : (tensor<32x16xf32>, tensor<32xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}
