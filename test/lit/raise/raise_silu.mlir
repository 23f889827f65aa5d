// RUN: colossal-opt %s -train-raise-silu | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @sigmoid_times_input
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>, %[[Y:.*]]: tensor<8xf32>)
func.func @sigmoid_times_input(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[S:.*]] = train.silu %[[X]]
  %s = train.sigmoid %x : (tensor<8xf32>) -> tensor<8xf32>
  %0 = train.mul %s, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  // A gate on another tensor (GLU) is not SiLU.
  // CHECK: %[[G:.*]] = train.mul %{{.*}}, %[[Y]]
  %1 = train.mul %s, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  // CHECK: return %[[S]], %[[G]]
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}
