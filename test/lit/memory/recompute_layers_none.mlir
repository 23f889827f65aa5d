// RUN: not colossal-opt %s -train-autodiff -train-recompute-layers 2>&1 | FileCheck %s
// RUN: colossal-opt %s --dist-apply-plan -train-autodiff -train-recompute-layers | FileCheck %s --check-prefix=PLANNED
// RUN: not colossal-opt %s --dist-apply-plan=strategy=recompute=full -train-autodiff -train-recompute-layers 2>&1 | FileCheck %s

// A model without repeated layers has nothing to recompute by layer: it
// says so instead of silently keeping everything.
module {
  train.parameter @w : tensor<16x10xf32> {trainable}
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @w : tensor<16x10xf32>
    %logits = train.linear %x, %w : (tensor<4x16xf32>, tensor<16x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK: error: recomputation re-runs repeated layers, and no two consecutive blocks of @forward are identical

// A module whose plan asks for no recomputation is left as it is.
// PLANNED: func.func @forward_backward
