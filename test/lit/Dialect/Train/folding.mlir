// RUN: colossal-opt %s -canonicalize | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @transposes_compose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @transposes_compose(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // CHECK-NOT: train.transpose
  // CHECK: return %[[X]]
  %0 = train.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %1 = train.transpose %0 {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @transposes_merge
func.func @transposes_merge(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  // CHECK: %[[T:.*]] = train.transpose %{{.*}} {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK-NEXT: return %[[T]]
  %0 = train.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %1 = train.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<2x4x3xf32>) -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// CHECK-LABEL: func.func @reshapes_merge
func.func @reshapes_merge(%x: tensor<2x8x16xf32>) -> tensor<256xf32> {
  // CHECK: %[[R:.*]] = train.reshape %{{.*}} : (tensor<2x8x16xf32>) -> tensor<256xf32>
  // CHECK-NEXT: return %[[R]]
  %0 = train.reshape %x : (tensor<2x8x16xf32>) -> tensor<16x16xf32>
  %1 = train.reshape %0 : (tensor<16x16xf32>) -> tensor<256xf32>
  return %1 : tensor<256xf32>
}

// CHECK-LABEL: func.func @reshape_of_constant_folds
func.func @reshape_of_constant_folds() -> tensor<2x2xi64> {
  // CHECK: %[[C:.*]] = train.constant dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi64>
  // CHECK-NEXT: return %[[C]]
  %0 = train.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %1 = train.reshape %0 : (tensor<4xi64>) -> tensor<2x2xi64>
  return %1 : tensor<2x2xi64>
}

// CHECK-LABEL: func.func @identity_reshape_folds
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
func.func @identity_reshape_folds(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: return %[[X]]
  %0 = train.reshape %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
