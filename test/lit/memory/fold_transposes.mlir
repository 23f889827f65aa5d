// RUN: colossal-opt %s -train-autodiff -train-reread-parameters -train-fold-transposes | FileCheck %s

// A linear's weight gradient through its transposed view is one product in
// the weight's layout (dw = dy^T x): neither the input nor the gradient is
// copied transposed; the linear itself reads the weight transposed in place. A product of matrices reads a transposed operand in
// place; a batched product keeps its transposes.
module {
  train.parameter @w : tensor<32x16xf32> {trainable}
  train.parameter @m : tensor<32x10xf32> {trainable}
  func.func @forward(%x: tensor<2x4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @w : tensor<32x16xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %h = train.linear %x, %wt : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
    %ht = train.transpose %h {perm = array<i64: 0, 2, 1>} : (tensor<2x4x32xf32>) -> tensor<2x32x4xf32>
    %s = train.matmul %h, %ht : (tensor<2x4x32xf32>, tensor<2x32x4xf32>) -> tensor<2x4x4xf32>
    %s2 = train.reshape %s : (tensor<2x4x4xf32>) -> tensor<4x8xf32>
    %g = train.reshape %h : (tensor<2x4x32xf32>) -> tensor<8x32xf32>
    %c = train.matmul %s2, %g : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %wm = train.param @m : tensor<32x10xf32>
    %logits = train.matmul %c, %wm : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// The forward function, which the planner reads, is left as it is.
// CHECK-LABEL: func.func @forward(
// CHECK:       train.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
// CHECK:       train.linear %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<16x32xf32>)
// CHECK:       train.matmul %{{.*}}, %{{.*}} : (tensor<4x32xf32>, tensor<32x10xf32>)
// CHECK-LABEL: func.func @forward_backward
// The step's linear reads its weight, stored [out, in], transposed in place.
// CHECK:       %[[W:.*]] = train.param @w
// CHECK-NOT:   train.transpose %[[W]]
// CHECK:       train.linear %{{.*}}, %[[W]] {transpose_weight = true} : (tensor<2x4x16xf32>, tensor<32x16xf32>)
// The head's gradients: dc = dlogits m^T and dm = c^T dlogits, matrices.
// CHECK:       %[[DL:.*]] = train.cross_entropy_grad
// CHECK:       train.gemm %[[DL]], %{{.*}} {trans_b = true} : {{.*}} -> tensor<4x32xf32>
// CHECK:       train.gemm %{{.*}}, %[[DL]] {trans_a = true} : {{.*}} -> tensor<32x10xf32>
// The batched product's gradients keep their transposes.
// CHECK:       train.transpose %{{.*}} {perm = array<i64: 0, 2, 1>}
// CHECK:       train.matmul %{{.*}} : (tensor<2x4x4xf32>, tensor<2x4x32xf32>)
// The linear's weight gradient: one product, the weight's shape, no
// transposed copy of the input or of the gradient before or after it.
// CHECK:       %[[DY:.*]] = train.reshape %{{.*}} : (tensor<2x4x32xf32>) -> tensor<8x32xf32>
// CHECK-NOT:   train.transpose
// CHECK:       train.gemm %[[DY]], %{{.*}} {trans_a = true} : {{.*}} -> tensor<32x16xf32>
// CHECK-NOT:   train.transpose
// CHECK:       return
