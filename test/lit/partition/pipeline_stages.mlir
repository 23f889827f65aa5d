// RUN: colossal-opt %s -train-pipeline-stages | FileCheck %s --check-prefix=STAGES
// RUN: colossal-opt %s -train-pipeline-stages -train-autodiff -train-split-stages | FileCheck %s --check-prefix=SPLIT

// Two identical layers (linear, gelu, residual add) between an embedding
// and a head tied to it, on two pipeline stages: one layer each, the
// embedding on the first, the head and the loss on the last. The tied
// weight is read on both stages, and each stage's backward returns its
// part of its gradient.
module attributes {dist.plan = #dist.plan<pp = 2>} {
  train.parameter @embed : tensor<16x32xf32> {trainable}
  train.parameter @layers.0.w : tensor<32x32xf32> {trainable}
  train.parameter @layers.1.w : tensor<32x32xf32> {trainable}
  func.func @forward(%ids: tensor<4xi64> {train.name = "ids"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    // STAGES: %[[E1:.*]] = train.param @embed {{.*}}dist.stage = 1
    // STAGES: %[[E0:.*]] = train.param @embed {{.*}}dist.stage = 0
    // STAGES: train.gather %[[E0]], {{.*}}dist.stage = 0
    // STAGES: train.linear {{.*}}dist.stage = 0
    // STAGES: train.linear {{.*}}dist.stage = 1
    // STAGES: train.add {{.*}}dist.stage = 1
    // STAGES: train.transpose %[[E1]] {{.*}}dist.stage = 1
    // STAGES: train.cross_entropy {{.*}}dist.stage = 1
    %we = train.param @embed : tensor<16x32xf32>
    %e = train.gather %we, %ids {axis = 0 : i64} : (tensor<16x32xf32>, tensor<4xi64>) -> tensor<4x32xf32>
    %w0 = train.param @layers.0.w : tensor<32x32xf32>
    %h0 = train.linear %e, %w0 : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %a0 = train.gelu %h0 : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %r0 = train.add %e, %a0 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %w1 = train.param @layers.1.w : tensor<32x32xf32>
    %h1 = train.linear %r0, %w1 : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %a1 = train.gelu %h1 : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %r1 = train.add %r0, %a1 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %head = train.transpose %we {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
    %logits = train.matmul %r1, %head : (tensor<4x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// SPLIT-NOT: func.func @forward_backward
// SPLIT-LABEL: func.func @stage0_forward(
// SPLIT-SAME: {train.name = "ids"}
// SPLIT-SAME: {dist.to = 1 : i64, train.name = "send:[[ACT:[0-9]+]]"}
// SPLIT-NOT: train.cross_entropy
// SPLIT: return
// SPLIT-LABEL: func.func @stage0_backward(
// SPLIT-SAME: {dist.from = 1 : i64, train.name = "recv:[[GRAD:[0-9]+]]"}
// SPLIT-SAME: {train.name = "grad:embed"}, tensor<32x32xf32> {train.name = "grad:layers.0.w"})
// SPLIT: train.gather_grad
// SPLIT-LABEL: func.func @stage1_forward(
// SPLIT-SAME: {dist.from = 0 : i64, train.name = "recv:[[ACT]]"}
// SPLIT-SAME: {train.name = "labels"}
// SPLIT-SAME: -> (tensor<f32> {train.name = "loss"}
// SPLIT: train.param @embed
// SPLIT: train.cross_entropy
// SPLIT-LABEL: func.func @stage1_backward(
// SPLIT-SAME: {dist.to = 0 : i64, train.name = "send:[[GRAD]]"}
// SPLIT-SAME: {train.name = "grad:embed"}
// SPLIT-SAME: {train.name = "grad:layers.1.w"}
