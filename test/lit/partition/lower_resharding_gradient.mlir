// RUN: colossal-opt %s -train-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: colossal-opt %s -train-autodiff -train-lower-resharding | FileCheck %s --check-prefix=LOWERED

// The gradient of a resharding is the resharding between the dual layouts
// (sums and copies swapped): the exit of a split region (a sum) passes its
// gradient on as copies; the entry (copies) gets its gradient summed; a
// slice's gradient is gathered.
// GRAD-LABEL: func.func @forward_backward
// GRAD: dist.reshard %{{.*}} {from = #dist.sharding<[-, tp]>, mesh = @tp, to = #dist.sharding<[-, -]>} : (tensor<4x4xf32>) -> tensor<4x8xf32>
// GRAD: dist.reshard %{{.*}} {from = #dist.sharding<[-, -]>, mesh = @tp, to = #dist.sharding<[-, -] copies(tp)>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// GRAD: dist.reshard %{{.*}} {from = #dist.sharding<[-, -] sum(tp)>, mesh = @tp, to = #dist.sharding<[-, -]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// Lowered: the slice's gradient an all-gather, the sum's nothing, the
// copies' an all-reduce (Megatron's f and g).
// LOWERED-LABEL: func.func @forward_backward
// LOWERED: dist.all_reduce %{{.*}} {axis = "tp"} : tensor<4x8xf32>
// LOWERED: dist.rank_slice %{{.*}} {axis = "tp", dim = 1 : i64}
// LOWERED: dist.all_gather %{{.*}} {axis = "tp", dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x8xf32>
// LOWERED: dist.all_reduce %{{.*}} {axis = "tp"} : tensor<4x8xf32>
// LOWERED-NOT: dist.reshard
module {
  dist.mesh @tp {axes = ["tp"], sizes = array<i64: 2>}
  train.parameter @e : tensor<4x8xf32> {trainable}
  train.parameter @w : tensor<8x8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %e = train.param @e : tensor<4x8xf32>
    %xe = train.add %x, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %in = dist.reshard %xe {from = #dist.sharding<[-, -]>, to = #dist.sharding<[-, -] copies(tp)>, mesh = @tp} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w = train.param @w : tensor<8x8xf32>
    %p = train.linear %in, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %s = dist.reshard %p {from = #dist.sharding<[-, -] sum(tp)>, to = #dist.sharding<[-, -]>, mesh = @tp} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %h = dist.reshard %s {from = #dist.sharding<[-, -]>, to = #dist.sharding<[-, tp]>, mesh = @tp} : (tensor<4x8xf32>) -> tensor<4x4xf32>
    %sq = train.mul %h, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %loss = train.reduce_mean %sq {axes = array<i64>, keepdims = false} : (tensor<4x4xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
