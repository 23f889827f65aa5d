// RUN: colossal-opt %s -train-raise-gelu | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @erf_form
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>)
func.func @erf_form(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // CHECK: %[[G:.*]] = train.gelu %[[X]] : (tensor<4x32xf32>) -> tensor<4x32xf32>
  // CHECK-NEXT: return %[[G]]
  %sqrt2 = train.constant dense<1.41421354> : tensor<f32>
  %one = train.constant dense<1.0> : tensor<f32>
  %half = train.constant dense<0.5> : tensor<f32>
  %0 = train.div %x, %sqrt2 : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %1 = train.erf %0 : (tensor<4x32xf32>) -> tensor<4x32xf32>
  %2 = train.add %1, %one : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %3 = train.mul %x, %2 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %4 = train.mul %3, %half : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  return %4 : tensor<4x32xf32>
}

// CHECK-LABEL: func.func @tanh_form
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
func.func @tanh_form(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: %[[G:.*]] = train.gelu %[[X]] {approximate = "tanh"}
  // CHECK-NEXT: return %[[G]]
  %c = train.constant dense<4.471500e-02> : tensor<f32>
  %k = train.constant dense<0.797884583> : tensor<f32>
  %one = train.constant dense<1.0> : tensor<f32>
  %half = train.constant dense<0.5> : tensor<f32>
  %0 = train.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = train.mul %x, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = train.mul %c, %1 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = train.add %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = train.mul %k, %3 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = train.tanh %4 : (tensor<8xf32>) -> tensor<8xf32>
  %6 = train.add %one, %5 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = train.mul %x, %6 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %8 = train.mul %half, %7 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  return %8 : tensor<8xf32>
}

// A different constant is not GELU: the chain stays.
// CHECK-LABEL: func.func @wrong_constant_stays
func.func @wrong_constant_stays(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK-NOT: train.gelu
  // CHECK: train.erf
  %two = train.constant dense<2.0> : tensor<f32>
  %one = train.constant dense<1.0> : tensor<f32>
  %half = train.constant dense<0.5> : tensor<f32>
  %0 = train.div %x, %two : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = train.erf %0 : (tensor<8xf32>) -> tensor<8xf32>
  %2 = train.add %1, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = train.mul %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = train.mul %3, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %4 : tensor<8xf32>
}
