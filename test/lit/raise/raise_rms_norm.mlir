// RUN: colossal-opt %s -train-raise-rms-norm | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @llama_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<16xf32>)
func.func @llama_form(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>) -> tensor<2x8x16xf32> {
  // CHECK: %[[N:.*]] = train.rms_norm %[[X]], %[[W]] {axis = 2 : i64} :
  // CHECK-NEXT: return %[[N]]
  %two = train.constant dense<2.0> : tensor<f32>
  %eps = train.constant dense<1.0e-6> : tensor<f32>
  %one = train.constant dense<1.0> : tensor<f32>
  %sq = train.pow %x, %two : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %ms = train.reduce_mean %sq {axes = array<i64: 2>} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %a = train.add %ms, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %r = train.sqrt %a : (tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %inv = train.div %one, %r : (tensor<f32>, tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %n = train.mul %x, %inv : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %y = train.mul %w, %n : (tensor<16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// Dividing a different tensor by the RMS of x is not RMSNorm.
// CHECK-LABEL: func.func @other_numerator_stays
func.func @other_numerator_stays(%x: tensor<8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK-NOT: train.rms_norm
  %two = train.constant dense<2.0> : tensor<f32>
  %eps = train.constant dense<1.0e-6> : tensor<f32>
  %sq = train.pow %x, %two : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %ms = train.reduce_mean %sq {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<1xf32>
  %a = train.add %ms, %eps : (tensor<1xf32>, tensor<f32>) -> tensor<1xf32>
  %r = train.sqrt %a : (tensor<1xf32>) -> tensor<1xf32>
  %n = train.div %z, %r : (tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
  return %n : tensor<8xf32>
}
