// RUN: colossal-opt %s -train-tensor-grid="ranks=8 depth=2" | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -train-tensor-grid="ranks=8 depth=2" -train-autodiff -train-lower-resharding | FileCheck %s --check-prefix=GRAD
// RUN: not colossal-opt %s -train-tensor-grid="ranks=8 depth=3" 2>&1 | FileCheck %s --check-prefix=DEPTH

// 2.5D: two layers of a 2 x 2 grid. The 8 rows are split over the layers,
// then over each layer's rows (tp_depth major): 2 rows per rank. Each layer
// runs SUMMA with the same weight blocks, read as copies over tp_depth; the
// bias and the norm's scale are copies over every row; the norm's row
// statistics are completed over tp_col; the loss sums its rows over
// tp_rows (one grid column across the layers).
// CHECK-LABEL: module attributes {train.tensor_grid = 2 : i64, train.tensor_grid_depth = 2 : i64, train.tensor_parallel = 8 : i64}
// CHECK: dist.mesh @tp_grid {axes = ["tp_depth", "tp_row", "tp_col"], sizes = array<i64: 2, 2, 2>}
// CHECK: train.parameter @fc : tensor<16x4xf32> {block_splits = array<i64: 2, 2>, dist.sharding = #dist.sharding<[tp_col, tp_row]>, trainable}
// CHECK: %[[X:.*]] = dist.reshard %arg0 {from = #dist.sharding<[-, -]>, mesh = @tp_grid, to = #dist.sharding<[tp_depth*tp_row, tp_col]>} : (tensor<8x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[W:.*]] = train.param @fc : tensor<16x4xf32>
// CHECK: %[[WS:.*]] = dist.reshard %[[W]] {from = #dist.sharding<[tp_col, tp_row]>, mesh = @tp_grid, to = #dist.sharding<[tp_col, tp_row] copies(tp_depth)>} : (tensor<16x4xf32>) -> tensor<16x4xf32>
// CHECK: %[[WT:.*]] = train.transpose %[[WS]]
// CHECK: dist.grid_linear %[[X]], %[[WT]] {column_axis = "tp_row", row_axis = "tp_col"} : (tensor<2x4xf32>, tensor<4x16xf32>) -> tensor<2x16xf32>
// CHECK: dist.reshard %{{.*}} {from = #dist.sharding<[tp_col]>, mesh = @tp_grid, to = #dist.sharding<[tp_col] copies(tp_depth,tp_row)>} : (tensor<16xf32>) -> tensor<16xf32>
// CHECK: dist.reshard %{{.*}} {from = #dist.sharding<[tp_depth*tp_row, -] sum(tp_col)>, mesh = @tp_grid, to = #dist.sharding<[tp_depth*tp_row, -] copies(tp_col)>} : (tensor<2x1xf32>) -> tensor<2x1xf32>
// CHECK: %[[T:.*]] = dist.reshard %arg1 {from = #dist.sharding<[-]>, mesh = @tp_grid, to = #dist.sharding<[tp_depth*tp_row]>} : (tensor<8xi64>) -> tensor<2xi64>
// CHECK: train.cross_entropy %{{.*}}, %[[T]] {mesh_axis = "tp_col", token_axis = "tp_rows"} : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<f32>
// The backward pass: each layer's weight gradient (its rows' part) summed
// over tp_depth; the inputs sliced layer first, then row.
// GRAD-LABEL: func.func @forward_backward
// GRAD: dist.rank_slice %arg0 {axis = "tp_depth", dim = 0 : i64} : (tensor<8x8xf32>) -> tensor<4x8xf32>
// GRAD-NEXT: dist.rank_slice %{{.*}} {axis = "tp_row", dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
// GRAD: %{{.*}}, %[[DW:.*]] = dist.grid_linear_grad %{{.*}} : (tensor<2x16xf32>, tensor<16x6xf32>, tensor<2x6xf32>) -> (tensor<2x16xf32>, tensor<16x6xf32>)
// GRAD-NEXT: dist.all_reduce %[[DW]] {axis = "tp_depth"} : tensor<16x6xf32>
// GRAD: return
// DEPTH: tp_mode=2.5d with tp_depth=3 needs tp = q x q x 3 tensor ranks (3 layers of a q x q grid), not tp=8
module {
  train.parameter @fc : tensor<32x8xf32> {trainable}
  train.parameter @fc_bias : tensor<32xf32> {trainable}
  train.parameter @gamma : tensor<32xf32> {trainable}
  train.parameter @out : tensor<32x12xf32> {trainable}
  func.func @forward(%x: tensor<8x8xf32> {train.name = "x"}, %t: tensor<8xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @fc : tensor<32x8xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %b = train.param @fc_bias : tensor<32xf32>
    %h = train.linear %x, %wt, %b : (tensor<8x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    %g = train.param @gamma : tensor<32xf32>
    %n = train.rms_norm %h, %g {axis = -1 : i64, epsilon = 1.0e-5 : f32} : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    %o = train.param @out : tensor<32x12xf32>
    %l = train.linear %n, %o : (tensor<8x32xf32>, tensor<32x12xf32>) -> tensor<8x12xf32>
    %loss = train.cross_entropy %l, %t : (tensor<8x12xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
