// RUN: colossal-opt %s -train-mixed-precision=precision=bf16 | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -train-mixed-precision=precision=fp16 -train-autodiff=loss-scale-argument=true | FileCheck %s --check-prefix=FP16
// RUN: not colossal-opt %s -train-mixed-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=BAD

// The linear layers read their float32 master weights through casts and
// compute in bf16; GELU follows its bf16 operand; the bias add mixes bf16
// with a float32 parameter and computes in float32; layer_norm and the loss
// compute in float32 whatever feeds them.
module {
  train.parameter @w1 : tensor<16x32xf32> {trainable}
  train.parameter @b1 : tensor<32xf32> {trainable}
  train.parameter @w2 : tensor<32x10xf32> {trainable}
  train.parameter @b2 : tensor<10xf32> {trainable}
  // CHECK: module attributes {train.precision = "bf16"}
  // CHECK-LABEL: func.func @forward
  // CHECK-SAME: -> (tensor<f32> {train.name = "loss"})
  // CHECK-DAG: %[[W1:.*]] = train.param @w1 : tensor<16x32xf32>
  // CHECK-DAG: %[[B1:.*]] = train.param @b1 : tensor<32xf32>
  // CHECK: %[[X16:.*]] = train.cast %arg0 {to = bf16} : (tensor<4x16xf32>) -> tensor<4x16xbf16>
  // CHECK: %[[W116:.*]] = train.cast %[[W1]] {to = bf16}
  // CHECK: %[[B116:.*]] = train.cast %[[B1]] {to = bf16}
  // CHECK: %[[H:.*]] = train.linear %[[X16]], %[[W116]], %[[B116]] : {{.*}} -> tensor<4x32xbf16>
  // CHECK: %[[A:.*]] = train.gelu %[[H]] : (tensor<4x32xbf16>) -> tensor<4x32xbf16>
  // CHECK: %[[A32:.*]] = train.cast %[[A]] {to = f32}
  // CHECK: train.layer_norm %[[A32]]{{.*}} -> tensor<4x32xf32>
  // CHECK: %[[LOGITS:.*]] = train.linear {{.*}} -> tensor<4x10xbf16>
  // CHECK: %[[LOGITS32:.*]] = train.cast %[[LOGITS]] {to = f32}
  // CHECK: %[[BIASED:.*]] = train.add %[[LOGITS32]], %{{.*}} : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  // CHECK: train.cross_entropy %[[BIASED]], %arg1 {{.*}} -> tensor<f32>

  // fp16 seeds the backward pass with the loss scale, a last argument; the
  // gradients of the float32 master weights come back float32 through the
  // casts' gradients.
  // FP16: module attributes {train.precision = "fp16"}
  // FP16-LABEL: func.func @forward_backward
  // FP16-SAME: %[[SCALE:[^:]*]]: tensor<f32> {train.name = "loss_scale"}
  // FP16-SAME: tensor<16x32xf32> {train.name = "grad:w1"}
  // FP16: train.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SCALE]]
  // FP16: train.cast %{{.*}} {to = f32} : (tensor<16x32xf16>) -> tensor<16x32xf32>

  // BAD: mixed precision: expected bf16 or fp16, not 'fp8'
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w1 = train.param @w1 : tensor<16x32xf32>
    %b1 = train.param @b1 : tensor<32xf32>
    %h = train.linear %x, %w1, %b1 : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %a = train.gelu %h : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %n = train.layer_norm %a {axis = 1 : i64} : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %w2 = train.param @w2 : tensor<32x10xf32>
    %logits = train.linear %n, %w2 : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %b2 = train.param @b2 : tensor<10xf32>
    %biased = train.add %logits, %b2 : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %biased, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
