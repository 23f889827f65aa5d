// RUN: colossal-opt %s -train-autodiff -train-recompute-layers="granularity=selective" | FileCheck %s
// RUN: colossal-opt %s -train-autodiff -train-recompute-layers="granularity=full" | FileCheck %s --check-prefix=FULL
// RUN: not colossal-opt %s -train-autodiff -train-recompute-layers="granularity=some" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: colossal-opt %s -train-test-cost-graph -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST

// Two identical MLP layers (layer_norm, linear, gelu, linear, residual add).
// Selective recomputation keeps the contractions' results: the backward
// re-runs the norm (the first linear's weight gradient reads its output)
// from the kept layer input, and the gelu (the second linear's weight
// gradient reads its output) from the kept first linear's result; no
// linear runs again. Full recomputation re-runs the linears too.
module {
  train.parameter @embed : tensor<16x32xf32> {trainable}
  train.parameter @layers.0.up : tensor<32x64xf32> {trainable}
  train.parameter @layers.0.down : tensor<64x32xf32> {trainable}
  train.parameter @layers.1.up : tensor<32x64xf32> {trainable}
  train.parameter @layers.1.down : tensor<64x32xf32> {trainable}
  train.parameter @head : tensor<32x10xf32> {trainable}
  func.func @forward(%x: tensor<4x16xf32> {train.name = "x"}, %labels: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %we = train.param @embed : tensor<16x32xf32>
    %e = train.linear %x, %we : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
    %n0 = train.layer_norm %e : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %u0w = train.param @layers.0.up : tensor<32x64xf32>
    %u0 = train.linear %n0, %u0w : (tensor<4x32xf32>, tensor<32x64xf32>) -> tensor<4x64xf32>
    %g0 = train.gelu %u0 : (tensor<4x64xf32>) -> tensor<4x64xf32>
    %d0w = train.param @layers.0.down : tensor<64x32xf32>
    %d0 = train.linear %g0, %d0w : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
    %r0 = train.add %e, %d0 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %n1 = train.layer_norm %r0 : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %u1w = train.param @layers.1.up : tensor<32x64xf32>
    %u1 = train.linear %n1, %u1w : (tensor<4x32xf32>, tensor<32x64xf32>) -> tensor<4x64xf32>
    %g1 = train.gelu %u1 : (tensor<4x64xf32>) -> tensor<4x64xf32>
    %d1w = train.param @layers.1.down : tensor<64x32xf32>
    %d1 = train.linear %g1, %d1w : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
    %r1 = train.add %r0, %d1 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %wh = train.param @head : tensor<32x10xf32>
    %logits = train.linear %r1, %wh : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %loss = train.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK:       %[[E:.*]] = train.linear %arg0
// CHECK-NEXT:  %[[N0:.*]] = train.layer_norm %[[E]]
// CHECK:       %[[U0:.*]] = train.linear %[[N0]]
// CHECK:       %[[R0:.*]] = train.add %[[E]]
// CHECK:       %[[U1:.*]] = train.linear
// CHECK:       train.cross_entropy_grad
// Layer 1: the gelu again from the kept linear result, then the norm from
// the kept layer input; no linear is re-run.
// CHECK-NOT:   train.linear
// CHECK:       %[[G1B:.*]] = train.gelu %[[U1]]
// CHECK-NEXT:  train.transpose %[[G1B]]
// CHECK:       train.gelu_grad %[[U1]]
// CHECK:       %[[N1B:.*]] = train.layer_norm %[[R0]]
// CHECK-NEXT:  train.transpose %[[N1B]]
// Layer 0 likewise.
// CHECK-NOT:   train.linear
// CHECK:       %[[G0B:.*]] = train.gelu %[[U0]]
// CHECK:       train.gelu_grad %[[U0]]
// CHECK:       %[[N0B:.*]] = train.layer_norm %[[E]]
// CHECK-NEXT:  train.transpose %[[N0B]]
// CHECK-NOT:   train.linear
// CHECK:       return

// FULL-LABEL: func.func @forward_backward
// FULL:       train.cross_entropy_grad
// FULL:       train.layer_norm
// FULL-NEXT:  train.linear
// FULL-NEXT:  train.gelu
// FULL:       return

// The cost graph marks the same tensors: of the 7072 bytes kept for the
// backward pass (x 256, per layer the norm's input 512, the norm's output
// 512, the first linear's result 1024, the gelu's output 1024; the last
// residual 512, the logits 160), each layer's norm and gelu outputs are
// made again: 2 x (512 + 1024) = 3072.
// COST: remark: cost graph: 13 ops, {{[0-9]+}} parameters, {{[0-9]+}} model FLOPs, 7072 activation bytes (3072 made again under selective recomputation), 2 layers

// BAD: error: train-recompute-layers: granularity must be full or selective, not 'some'
