// RUN: colossal-opt %s | colossal-opt | FileCheck %s --enable-var-scope
// Every op parses, verifies and prints back.

// CHECK: train.parameter @h.0.weight : tensor<16x48xf32> {data = "initializer", trainable}
train.parameter @"h.0.weight" : tensor<16x48xf32> {trainable, data = "initializer"}
// CHECK: train.parameter @frozen_table : tensor<32x16xf32>{{$}}
train.parameter @frozen_table : tensor<32x16xf32> {data = "none"}

// CHECK-LABEL: func.func @elementwise_and_compare
func.func @elementwise_and_compare(%a: tensor<2x8x16xf32>, %b: tensor<16xf32>) -> tensor<2x8x16xf32> {
  // CHECK: train.add %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %0 = train.add %a, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %1 = train.sub %0, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %2 = train.mul %1, %a : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %3 = train.div %2, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %4 = train.pow %3, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %5 = train.max %4, %a : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %6 = train.min %5, %a : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.equal %{{.*}} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xi1>
  %7 = train.equal %6, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xi1>
  %8 = train.less %6, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xi1>
  %9 = train.greater %6, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xi1>
  // CHECK: train.where
  %10 = train.where %9, %6, %a : (tensor<2x8x16xi1>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %11 = train.sqrt %10 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %12 = train.reciprocal %11 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %13 = train.neg %12 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %14 = train.abs %13 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %15 = train.exp %14 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %16 = train.log %15 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %17 = train.erf %16 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %18 = train.tanh %17 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %19 = train.sigmoid %18 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %20 = train.relu %19 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %21 = train.sin %20 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %22 = train.cos %21 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %23 = train.silu %22 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.gelu %{{.*}} {approximate = "tanh"}
  %24 = train.gelu %23 {approximate = "tanh"} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.cast %{{.*}} {to = bf16} : (tensor<2x8x16xf32>) -> tensor<2x8x16xbf16>
  %25 = train.cast %24 {to = bf16} : (tensor<2x8x16xf32>) -> tensor<2x8x16xbf16>
  return %24 : tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%x: tensor<2x8x16xf32>, %v: tensor<16xf32>, %img: tensor<2x3x8x8xf32>,
                        %k: tensor<4x3x4x4xf32>, %kb: tensor<4xf32>) -> tensor<2x8x48xf32> {
  %w = train.param @"h.0.weight" : tensor<16x48xf32>
  // CHECK: train.matmul %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
  %0 = train.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
  // CHECK: train.matmul {{.*}} -> tensor<2x8xf32>
  %1 = train.matmul %x, %v : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8xf32>
  %m = train.reshape %x : (tensor<2x8x16xf32>) -> tensor<16x16xf32>
  // CHECK: train.gemm {{.*}} {alpha = 2.000000e+00 : f32, trans_b = true}
  %2 = train.gemm %m, %m, %v {trans_b = true, alpha = 2.0 : f32} : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<16x16xf32>
  // CHECK: train.linear
  %3 = train.linear %x, %w : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
  // CHECK: train.conv {{.*}} -> tensor<2x4x2x2xf32>
  %4 = train.conv %img, %k, %kb {strides = array<i64: 4, 4>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x4x4xf32>, tensor<4xf32>) -> tensor<2x4x2x2xf32>
  // CHECK: train.einsum {{.*}} {equation = "bsh,hk->bsk"}
  %5 = train.einsum %x, %w {equation = "bsh,hk->bsk"} : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
  return %3 : tensor<2x8x48xf32>
}

// CHECK-LABEL: func.func @norms_attention_losses
func.func @norms_attention_losses(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %q: tensor<2x2x8x8xf32>,
                                  %logits: tensor<16x32xf32>, %labels: tensor<16xi64>) -> tensor<f32> {
  // CHECK: train.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999996E-13 : f32}
  %0 = train.layer_norm %x, %g, %g {axis = -1 : i64, epsilon = 1.0e-12 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %1 = train.layer_norm %x {axis = 2 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %2 = train.rms_norm %x, %g {axis = -1 : i64, epsilon = 1.0e-06 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %3 = train.softmax %x {axis = -1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %4 = train.log_softmax %logits {axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16x32xf32>
  // CHECK: train.attention {{.*}} {causal = true, dropout = 1.000000e-01 : f32, scale = 3.535500e-01 : f32}
  %5 = train.attention %q, %q, %q {causal = true, scale = 0.35355 : f32, dropout = 0.1 : f32} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %6 = train.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x8x16xf32>) -> tensor<8xf32>
  %7 = train.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %8 = train.reduce_max %x {axes = array<i64>, keepdims = false} : (tensor<2x8x16xf32>) -> tensor<f32>
  // CHECK: train.dropout {{.*}} -> (tensor<2x8x16xf32>, tensor<2x8x16xi1>)
  %9, %mask = train.dropout %x {ratio = 0.1 : f32} : (tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xi1>)
  %10 = train.softmax_cross_entropy_loss %logits, %labels {ignore_index = -100 : i64} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %11 = train.nll_loss %4, %labels {reduction = "sum"} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  // CHECK: train.cross_entropy {{.*}} {reduction = "none"} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<16xf32>
  %12 = train.cross_entropy %logits, %labels {reduction = "none"} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<16xf32>
  return %10 : tensor<f32>
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x8x48xf32>, %ids: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
  %table = train.param @frozen_table : tensor<32x16xf32>
  // CHECK: train.gather {{.*}} -> tensor<2x8x16xf32>
  %0 = train.gather %table, %ids {axis = 0 : i64} : (tensor<32x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  // CHECK: train.slice {{.*}} -> tensor<2x4x16xf32>
  %1 = train.slice %x {starts = array<i64: 0, 7, 0>, limits = array<i64: 2, -1, 16>, steps = array<i64: 1, -2, 1>} : (tensor<2x8x48xf32>) -> tensor<2x4x16xf32>
  %2 = train.concat %0, %0 {axis = 1 : i64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x16x16xf32>
  // CHECK: train.split {{.*}} -> (tensor<2x8x16xf32>, tensor<2x8x32xf32>)
  %3:2 = train.split %x {axis = 2 : i64, sizes = array<i64: 16, 32>} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x32xf32>)
  %4 = train.reshape %x : (tensor<2x8x48xf32>) -> tensor<16x48xf32>
  %5 = train.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x8x48xf32>) -> tensor<2x48x8xf32>
  %6 = train.broadcast %0 : (tensor<2x8x16xf32>) -> tensor<3x2x8x16xf32>
  %7 = train.trilu %5 {upper = true, k = 1 : i64} : (tensor<2x48x8xf32>) -> tensor<2x48x8xf32>
  %8 = train.constant dense<[1, 2]> : tensor<2xi64>
  return %0 : tensor<2x8x16xf32>
}
