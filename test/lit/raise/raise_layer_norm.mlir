// RUN: colossal-opt %s -train-raise-layer-norm | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @decomposed_with_affine
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[G:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>)
func.func @decomposed_with_affine(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x8x16xf32> {
  // CHECK: %[[N:.*]] = train.layer_norm %[[X]], %[[G]], %[[B]] {axis = 2 : i64, epsilon = 9.99999996E-13 : f32}
  // CHECK-NEXT: return %[[N]]
  %two = train.constant dense<2.0> : tensor<f32>
  %eps = train.constant dense<1.0e-12> : tensor<f32>
  %mu = train.reduce_mean %x {axes = array<i64: 2>} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %c = train.sub %x, %mu : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %sq = train.pow %c, %two : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %var = train.reduce_mean %sq {axes = array<i64: 2>} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %ve = train.add %var, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %sd = train.sqrt %ve : (tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %n = train.div %c, %sd : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %s = train.mul %n, %g : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %y = train.add %s, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// Normalising over a leading axis is not a layer norm over trailing axes.
// CHECK-LABEL: func.func @leading_axis_stays
func.func @leading_axis_stays(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK-NOT: train.layer_norm
  // CHECK: train.div
  %two = train.constant dense<2.0> : tensor<f32>
  %eps = train.constant dense<1.0e-5> : tensor<f32>
  %mu = train.reduce_mean %x {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %c = train.sub %x, %mu : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %sq = train.pow %c, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %var = train.reduce_mean %sq {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %ve = train.add %var, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %sd = train.sqrt %ve : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %n = train.div %c, %sd : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}
