// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -split-input-file -train-tensor-parallel=ranks=2 -train-autodiff -train-lower-resharding -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// An MLP block (a linear whose weight is read through a transpose, GELU, a
// linear with a bias): the first weight and bias split by output columns,
// the second weight by input rows; the input enters as copies over tp, the
// partial products are summed, then the second bias is added (reshardings,
// lowered after differentiation: the GRAD lines).
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @fc : tensor<16x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @fc_bias : tensor<16xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @proj : tensor<16x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @proj_bias : tensor<8xf32> {trainable}
// CHECK: %[[FC:.*]] = train.param @fc : tensor<16x8xf32>
// CHECK: %[[FCT:.*]] = train.transpose %[[FC]] {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK: %[[IN:.*]] = dist.reshard %arg0 {from = #dist.sharding<[-, -]>, mesh = @tp, to = #dist.sharding<[-, -] copies(tp)>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[H:.*]] = train.linear %[[IN]], %[[FCT]], %{{.*}} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK: %[[A:.*]] = train.gelu %[[H]] : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[P:.*]] = train.linear %[[A]], %{{.*}} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = dist.reshard %[[P]] {from = #dist.sharding<[-, -] sum(tp)>, mesh = @tp, to = #dist.sharding<[-, -]>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: train.add %[[S]], %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// The backward pass: the sum's gradient passes through; the copy's is
// summed over the ranks.
// GRAD-LABEL: func.func @forward_backward
// GRAD: dist.all_reduce
// GRAD: dist.all_reduce
// GRAD-NOT: dist.all_reduce
// GRAD: return
module {
  train.parameter @fc : tensor<32x8xf32> {trainable}
  train.parameter @fc_bias : tensor<32xf32> {trainable}
  train.parameter @proj : tensor<32x8xf32> {trainable}
  train.parameter @proj_bias : tensor<8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @fc : tensor<32x8xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %b = train.param @fc_bias : tensor<32xf32>
    %h = train.linear %x, %wt, %b : (tensor<4x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %a = train.gelu %h : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %p = train.param @proj : tensor<32x8xf32>
    %pb = train.param @proj_bias : tensor<8xf32>
    %y = train.linear %a, %p, %pb : (tensor<4x32xf32>, tensor<32x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %sq = train.mul %y, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %sq {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// SwiGLU (LLaMA): two column linears of one input, multiplied, then the
// row linear; one copy of the input serves both.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @gate : tensor<8x8xf32> {split_dim = 1 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @up : tensor<8x8xf32> {split_dim = 1 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @down : tensor<8x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK-COUNT-1: copies(tp)
// CHECK: train.mul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: dist.reshard {{.*}} sum(tp)>, mesh = @tp, to = #dist.sharding<[{{[-, ]*}}]>}
module {
  train.parameter @gate : tensor<8x16xf32> {trainable}
  train.parameter @up : tensor<8x16xf32> {trainable}
  train.parameter @down : tensor<16x8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %g = train.param @gate : tensor<8x16xf32>
    %gh = train.linear %x, %g : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %s = train.silu %gh : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %u = train.param @up : tensor<8x16xf32>
    %uh = train.linear %x, %u : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %m = train.mul %s, %uh : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %d = train.param @down : tensor<16x8xf32>
    %y = train.linear %m, %d : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A hidden width that does not divide by the ranks is an error at the op.
module {
  train.parameter @a : tensor<8x5xf32> {trainable}
  train.parameter @b : tensor<5x8xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %a = train.param @a : tensor<8x5xf32>
    %h = train.linear %x, %a : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    %r = train.relu %h : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %b = train.param @b : tensor<5x8xf32>
    // expected-error@+1 {{tensor parallelism over 2 ranks splits this linear layer's 5 input features, which do not divide by 2}}
    %y = train.linear %r, %b : (tensor<4x5xf32>, tensor<5x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A weight read twice (tied) cannot be split for one of its uses; with no
// other pair, there is nothing to split.
module {
  train.parameter @w : tensor<8x8xf32> {trainable}
  // expected-error@+1 {{tensor parallelism splits column-then-row pairs of linear layers}}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @w : tensor<8x8xf32>
    %h = train.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %r = train.relu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w2 = train.param @w : tensor<8x8xf32>
    %y = train.linear %r, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Attention with separate query, key and value projections (LLaMA, BERT):
// split by heads. The projections' outputs, the reshapes to heads and the
// transposes carry the split to the heads dimension; a rotary-like table of
// size 1 along the heads enters through a copy; the attention op runs on
// each rank's heads; the output projection's rows are split and summed.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @q : tensor<8x4xf32> {split_dim = 1 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @k : tensor<8x4xf32> {split_dim = 1 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @v : tensor<8x4xf32> {split_dim = 1 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @o : tensor<4x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: train.reshape %{{.*}} : (tensor<2x3x4xf32>) -> tensor<2x3x1x4xf32>
// CHECK: train.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x1x4xf32>) -> tensor<2x1x3x4xf32>
// CHECK: %[[TABLE:.*]] = dist.reshard %arg1 {from = #dist.sharding<[-, -, -, -]>, mesh = @tp, to = #dist.sharding<[-, -, -, -] copies(tp)>} : (tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
// CHECK: train.mul %{{.*}}, %[[TABLE]] : (tensor<2x1x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<2x1x3x4xf32>
// CHECK: train.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 5.000000e-01 : f32} : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x3x4xf32>
// CHECK: train.reshape %{{.*}} : (tensor<2x3x1x4xf32>) -> tensor<2x3x4xf32>
// CHECK: train.linear %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
// CHECK: dist.reshard {{.*}} sum(tp)>, mesh = @tp, to = #dist.sharding<[{{[-, ]*}}]>}
module {
  train.parameter @q : tensor<8x8xf32> {trainable}
  train.parameter @k : tensor<8x8xf32> {trainable}
  train.parameter @v : tensor<8x8xf32> {trainable}
  train.parameter @o : tensor<8x8xf32> {trainable}
  func.func @forward(%x: tensor<2x3x8xf32> {train.name = "x"}, %table: tensor<1x1x3x4xf32> {train.name = "table"}) -> (tensor<f32> {train.name = "loss"}) {
    %wq = train.param @q : tensor<8x8xf32>
    %q = train.linear %x, %wq : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %q4 = train.reshape %q : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
    %qh = train.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
    %qr = train.mul %qh, %table : (tensor<2x2x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<2x2x3x4xf32>
    %wk = train.param @k : tensor<8x8xf32>
    %k = train.linear %x, %wk : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %k4 = train.reshape %k : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
    %kh = train.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
    %wv = train.param @v : tensor<8x8xf32>
    %v = train.linear %x, %wv : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %v4 = train.reshape %v : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
    %vh = train.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
    %a = train.attention %qr, %kh, %vh {causal = true, scale = 0.5 : f32} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
    %at = train.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x3x4xf32>) -> tensor<2x3x2x4xf32>
    %ar = train.reshape %at : (tensor<2x3x2x4xf32>) -> tensor<2x3x8xf32>
    %wo = train.param @o : tensor<8x8xf32>
    %y = train.linear %ar, %wo : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<2x3x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A fused QKV projection (GPT-2's c_attn: one linear to 3 x hidden, sliced
// into query, key and value): its weight and bias split in 3 groups, rank t
// holding its heads of each; the slices take the rank's thirds.
// CHECK-LABEL: module attributes {train.tensor_parallel = 2 : i64}
// CHECK: train.parameter @qkv : tensor<12x8xf32> {split_dim = 0 : i64, split_groups = 3 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @qkv_bias : tensor<12xf32> {split_dim = 0 : i64, split_groups = 3 : i64, splits = 2 : i64, trainable}
// CHECK: train.parameter @o : tensor<4x8xf32> {split_dim = 0 : i64, splits = 2 : i64, trainable}
// CHECK: %[[F:.*]] = train.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x8xf32>, tensor<8x12xf32>, tensor<12xf32>) -> tensor<2x3x12xf32>
// CHECK: train.slice %[[F]] {limits = array<i64: 2, 3, 4>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x12xf32>) -> tensor<2x3x4xf32>
// CHECK: train.slice %[[F]] {limits = array<i64: 2, 3, 8>, starts = array<i64: 0, 0, 4>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x12xf32>) -> tensor<2x3x4xf32>
// CHECK: train.slice %[[F]] {limits = array<i64: 2, 3, 12>, starts = array<i64: 0, 0, 8>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x12xf32>) -> tensor<2x3x4xf32>
// CHECK: train.attention {{.*}} -> tensor<2x1x3x4xf32>
// CHECK: dist.reshard {{.*}} sum(tp)>, mesh = @tp, to = #dist.sharding<[{{[-, ]*}}]>}
module {
  train.parameter @qkv : tensor<24x8xf32> {trainable}
  train.parameter @qkv_bias : tensor<24xf32> {trainable}
  train.parameter @o : tensor<8x8xf32> {trainable}
  func.func @forward(%x: tensor<2x3x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @qkv : tensor<24x8xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<24x8xf32>) -> tensor<8x24xf32>
    %b = train.param @qkv_bias : tensor<24xf32>
    %f = train.linear %x, %wt, %b : (tensor<2x3x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<2x3x24xf32>
    %q = train.slice %f {limits = array<i64: 2, 3, 8>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x24xf32>) -> tensor<2x3x8xf32>
    %k = train.slice %f {limits = array<i64: 2, 3, 16>, starts = array<i64: 0, 0, 8>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x24xf32>) -> tensor<2x3x8xf32>
    %v = train.slice %f {limits = array<i64: 2, 3, 24>, starts = array<i64: 0, 0, 16>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x24xf32>) -> tensor<2x3x8xf32>
    %q4 = train.reshape %q : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
    %qh = train.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
    %k4 = train.reshape %k : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
    %kh = train.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
    %v4 = train.reshape %v : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
    %vh = train.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
    %a = train.attention %qh, %kh, %vh {causal = true, scale = 0.5 : f32} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
    %at = train.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x3x4xf32>) -> tensor<2x3x2x4xf32>
    %ar = train.reshape %at : (tensor<2x3x2x4xf32>) -> tensor<2x3x8xf32>
    %wo = train.param @o : tensor<8x8xf32>
    %y = train.linear %ar, %wo : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<2x3x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Heads that do not divide by the ranks are an error naming the block, even
// when the width does (3 heads of 2).
module {
  train.parameter @q : tensor<8x6xf32> {trainable}
  train.parameter @o : tensor<6x8xf32> {trainable}
  func.func @forward(%x: tensor<2x3x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %wq = train.param @q : tensor<8x6xf32>
    %q = train.linear %x, %wq : (tensor<2x3x8xf32>, tensor<8x6xf32>) -> tensor<2x3x6xf32>
    %q4 = train.reshape %q : (tensor<2x3x6xf32>) -> tensor<2x3x3x2xf32>
    %qh = train.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
    %a = train.attention %qh, %qh, %qh {scale = 0.5 : f32} : (tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
    %at = train.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
    %ar = train.reshape %at : (tensor<2x3x3x2xf32>) -> tensor<2x3x6xf32>
    %wo = train.param @o : tensor<6x8xf32>
    // expected-error@+1 {{along a dimension of size 3 ('tensor<2x3x3x2xf32>'; attention heads), which does not divide by 2}}
    %y = train.linear %ar, %wo : (tensor<2x3x6xf32>, tensor<6x8xf32>) -> tensor<2x3x8xf32>
    %loss = train.reduce_mean %y {axes = array<i64>, keepdims = false} : (tensor<2x3x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
