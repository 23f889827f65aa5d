// RUN: colossal-opt %s -train-autodiff -train-optimizer | FileCheck %s --check-prefix=LAMB
// RUN: colossal-opt %s -train-autodiff '-train-optimizer=kind=sgd momentum=0.5 nesterov=true weight-decay=0' \
// RUN:   | FileCheck %s --check-prefix=SGD
// RUN: colossal-opt %s -train-autodiff -train-optimizer=kind=adamw | FileCheck %s --check-prefix=ADAMW
// RUN: colossal-opt %s -train-autodiff -train-optimizer=kind=lars | FileCheck %s --check-prefix=LARS
// RUN: not colossal-opt %s -train-optimizer 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: not colossal-opt %s -train-autodiff -train-optimizer=kind=adam 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not colossal-opt %s -train-autodiff '-train-optimizer=kind=adamw beta1=1.5' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BETA

// The MLP of mlp.mlir: two matrices and a bias are trainable, a frozen
// scale is not updated. (Settings at their defaults, beta1 = 0.9,
// beta2 = 0.999, eps = 1e-6, are elided from the printed op.) LAMB and LARS exempt the bias (rank 1) from weight
// decay; LAMB gives every tensor a trust ratio, LARS the matrices only;
// AdamW and SGD decay everything, as torch.optim does.
module {
  train.parameter @w1 : tensor<16x32xf32> {trainable}
  train.parameter @b1 : tensor<32xf32> {trainable}
  train.parameter @scale : tensor<32xf32>
  train.parameter @w2 : tensor<32x10xf32> {trainable}
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w1 = train.param @w1 : tensor<16x32xf32>
    %b1 = train.param @b1 : tensor<32xf32>
    %h = train.linear %x, %w1, %b1 : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %scale = train.param @scale : tensor<32xf32>
    %hs = train.mul %h, %scale : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %a = train.gelu %hs : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %w2 = train.param @w2 : tensor<32x10xf32>
    %logits = train.linear %a, %w2 : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// LAMB-LABEL: func.func @optimizer_step(
// LAMB-SAME: %[[LR:.*]]: tensor<f32> {train.name = "lr"}, %[[STEP:.*]]: tensor<i64> {train.name = "step"}, %[[SCALE:.*]]: tensor<f32> {train.name = "grad_scale"}
// LAMB-SAME: %[[GW1:.*]]: tensor<16x32xf32> {train.name = "grad:w1"}, %[[GB1:.*]]: tensor<32xf32> {train.name = "grad:b1"}, %[[GW2:.*]]: tensor<32x10xf32> {train.name = "grad:w2"}
// LAMB-SAME: {train.name = "optimizer.m:w1"}, %arg{{[0-9]+}}: tensor<{{[0-9x]+}}xf32> {train.name = "optimizer.m:b1"}, %arg{{[0-9]+}}: tensor<{{[0-9x]+}}xf32> {train.name = "optimizer.m:w2"}
// LAMB-SAME: {train.name = "optimizer.v:w1"}, %arg{{[0-9]+}}: tensor<{{[0-9x]+}}xf32> {train.name = "optimizer.v:b1"}, %arg{{[0-9]+}}: tensor<{{[0-9x]+}}xf32> {train.name = "optimizer.v:w2"})
// LAMB-SAME: -> (tensor<16x32xf32> {train.name = "w1"}, tensor<32xf32> {train.name = "b1"}, tensor<32x10xf32> {train.name = "w2"}, tensor<16x32xf32> {train.name = "optimizer.m:w1"}
// LAMB-NOT: @scale
// LAMB: %[[W1:.*]] = train.param @w1
// LAMB: %[[B1:.*]] = train.param @b1
// LAMB: %[[W2:.*]] = train.param @w2
// LAMB: %[[NEW:.*]]:9 = train.optimizer_update lr(%[[LR]]) step(%[[STEP]]) grad_scale(%[[SCALE]]) params(%[[W1]], %[[B1]], %[[W2]]) grads(%[[GW1]], %[[GB1]], %[[GW2]])
// LAMB-SAME: {decay = array<i1: true, false, true>, kind = "lamb", trust_ratio = array<i1: true, true, true>, weight_decay = 1.000000e-02 : f64}
// LAMB: return %[[NEW]]#0, %[[NEW]]#1, %[[NEW]]#2, %[[NEW]]#3, %[[NEW]]#4, %[[NEW]]#5, %[[NEW]]#6, %[[NEW]]#7, %[[NEW]]#8

// SGD-LABEL: func.func @optimizer_step(
// SGD-NOT: optimizer.v:
// SGD: train.optimizer_update {{.*}} moment2()
// SGD-SAME: {decay = array<i1: true, true, true>, kind = "sgd", momentum = 5.000000e-01 : f64, nesterov = true, trust_ratio = array<i1: false, false, false>}

// ADAMW: train.optimizer_update
// ADAMW-SAME: decay = array<i1: true, true, true>, eps = 1.000000e-08 : f64
// ADAMW-SAME: kind = "adamw"
// ADAMW-SAME: trust_ratio = array<i1: false, false, false>

// LARS: train.optimizer_update {{.*}} moment2()
// LARS-SAME: decay = array<i1: true, false, true>
// LARS-SAME: kind = "lars"
// LARS-SAME: trust_ratio = array<i1: true, false, true>

// FIRST: optimizer: the module has no @forward_backward (run train-autodiff first)
// KIND: optimizer: expected lamb, adamw, sgd or lars, not 'adam'
// BETA: beta1 and beta2 must lie in [0, 1)
