// RUN: colossal-opt %s -train-raise-linear -canonicalize | FileCheck %s --enable-var-scope

train.parameter @w : tensor<64x16xf32> {trainable}
train.parameter @b : tensor<64xf32> {trainable}

// CHECK-LABEL: func.func @matmul_transposed_weight_plus_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>)
func.func @matmul_transposed_weight_plus_bias(%x: tensor<2x8x16xf32>) -> tensor<2x8x64xf32> {
  // CHECK-DAG: %[[W:.*]] = train.param @w
  // CHECK-DAG: %[[B:.*]] = train.param @b
  // CHECK-DAG: %[[WT:.*]] = train.transpose %[[W]]
  // CHECK: train.linear %[[X]], %[[WT]], %[[B]] : (tensor<2x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %w = train.param @w : tensor<64x16xf32>
  %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<64x16xf32>) -> tensor<16x64xf32>
  %0 = train.matmul %x, %wt : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  %b = train.param @b : tensor<64xf32>
  %1 = train.add %b, %0 : (tensor<64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %1 : tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @gemm_with_trans_b
func.func @gemm_with_trans_b(%x: tensor<4x16xf32>) -> tensor<4x64xf32> {
  // CHECK: train.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %w = train.param @w : tensor<64x16xf32>
  %b = train.param @b : tensor<64xf32>
  %0 = train.gemm %x, %w, %b {trans_b = true} : (tensor<4x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return %0 : tensor<4x64xf32>
}

// Activations times activations (attention scores) are not linear layers.
// CHECK-LABEL: func.func @activation_matmul_stays
func.func @activation_matmul_stays(%a: tensor<8x16xf32>, %b: tensor<16x8xf32>) -> tensor<8x8xf32> {
  // CHECK: train.matmul
  %0 = train.matmul %a, %b : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
