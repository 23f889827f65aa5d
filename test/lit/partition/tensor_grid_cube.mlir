// RUN: colossal-opt %s -train-tensor-grid="ranks=8 cube=1" | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -train-tensor-grid="ranks=8 cube=1" -train-autodiff -train-lower-resharding -train-fold-transposes | FileCheck %s --check-prefix=GRAD
// RUN: not colossal-opt %s -train-tensor-grid="ranks=4 cube=1" 2>&1 | FileCheck %s --check-prefix=NOTCUBE

// 3D: a 2 x 2 x 2 cube, axes tp_in, tp_w, tp_out. The input enters with its
// rows over tp_w and tp_in and its features over tp_out (1/8 per rank);
// each linear gathers its input's rows over tp_in and its weight block
// (1/8 per rank: k over tp_out and tp_w, n over tp_in) over tp_w, multiplies
// locally and reduce-scatters the partial sums over tp_out into the rows:
// the result's rows are over tp_w and tp_out, its features over tp_in, and
// the next layer swaps the two back. The bias and the norm's scale are
// split over the features' axis, copies over the rows' (tp_out, then
// tp_w); the norm's statistics are completed over tp_in; the loss is
// vocabulary-parallel over tp_out, its rows summed over tp_rows_out.
// CHECK-LABEL: module attributes {train.tensor_cube, train.tensor_grid = 2 : i64, train.tensor_parallel = 8 : i64}
// CHECK: dist.mesh @tp_grid {axes = ["tp_in", "tp_w", "tp_out"], sizes = array<i64: 2, 2, 2>}
// CHECK: train.parameter @fc : tensor<16x2xf32> {block_splits = array<i64: 2, 4>, dist.sharding = #dist.sharding<[tp_in, tp_out*tp_w]>, trainable}
// CHECK: train.parameter @fc_bias : tensor<16xf32> {block_splits = array<i64: 2>, dist.sharding = #dist.sharding<[tp_in]>, trainable}
// CHECK: train.parameter @out : tensor<8x6xf32> {block_splits = array<i64: 4, 2>, dist.sharding = #dist.sharding<[tp_in*tp_w, tp_out]>, trainable}
// CHECK: %[[X:.*]] = dist.reshard %arg0 {from = #dist.sharding<[-, -]>, mesh = @tp_grid, to = #dist.sharding<[tp_w*tp_in, tp_out]>} : (tensor<8x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[XG:.*]] = dist.reshard %[[X]] {from = #dist.sharding<[tp_w*tp_in, tp_out]>, mesh = @tp_grid, to = #dist.sharding<[tp_w, tp_out] copies(tp_in)>} : (tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[W:.*]] = train.param @fc : tensor<16x2xf32>
// CHECK: %[[WG:.*]] = dist.reshard %[[W]] {from = #dist.sharding<[tp_in, tp_out*tp_w]>, mesh = @tp_grid, to = #dist.sharding<[tp_in, tp_out] copies(tp_w)>} : (tensor<16x2xf32>) -> tensor<16x4xf32>
// CHECK: %[[WT:.*]] = train.transpose %[[WG]] {perm = array<i64: 1, 0>} : (tensor<16x4xf32>) -> tensor<4x16xf32>
// CHECK: %[[P:.*]] = train.linear %[[XG]], %[[WT]] : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[Y:.*]] = dist.reshard %[[P]] {from = #dist.sharding<[tp_w, tp_in] sum(tp_out)>, mesh = @tp_grid, to = #dist.sharding<[tp_w*tp_out, tp_in]>} : (tensor<4x16xf32>) -> tensor<2x16xf32>
// CHECK: dist.reshard %{{.*}} {from = #dist.sharding<[tp_in]>, mesh = @tp_grid, to = #dist.sharding<[tp_in] copies(tp_out)>} : (tensor<16xf32>) -> tensor<16xf32>
// CHECK: dist.reshard %{{.*}} {from = #dist.sharding<[tp_in] copies(tp_out)>, mesh = @tp_grid, to = #dist.sharding<[tp_in] copies(tp_out,tp_w)>} : (tensor<16xf32>) -> tensor<16xf32>
// CHECK: dist.reshard %{{.*}} {from = #dist.sharding<[tp_w*tp_out, -] sum(tp_in)>, mesh = @tp_grid, to = #dist.sharding<[tp_w*tp_out, -] copies(tp_in)>} : (tensor<2x1xf32>) -> tensor<2x1xf32>
// CHECK: dist.reshard %{{.*}} {from = #dist.sharding<[tp_w*tp_out, tp_in]>, mesh = @tp_grid, to = #dist.sharding<[tp_w, tp_in] copies(tp_out)>} : (tensor<2x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[L:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[tp_w, tp_out] sum(tp_in)>, mesh = @tp_grid, to = #dist.sharding<[tp_w*tp_in, tp_out]>} : (tensor<4x6xf32>) -> tensor<2x6xf32>
// CHECK: train.cross_entropy %[[L]], %{{.*}} {mesh_axis = "tp_out", token_axis = "tp_rows_out"} : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<f32>
// The collectives: forward, the input's rows gathered over tp_in and the
// weight over tp_w, the partial sums reduce-scattered over tp_out; backward,
// their duals (the output gradient gathered over tp_out, the weight's
// gradient reduce-scattered over tp_w, the input's over tp_in).
// GRAD-LABEL: func.func @forward_backward
// GRAD: dist.all_gather %{{.*}} {axis = "tp_in", dim = 0 : i64} : (tensor<2x4xf32>) -> tensor<4x4xf32>
// GRAD: dist.all_gather %{{.*}} {axis = "tp_w", dim = 1 : i64} : (tensor<16x2xf32>) -> tensor<16x4xf32>
// GRAD: train.linear %{{.*}}, %{{.*}} {transpose_weight = true} : (tensor<4x4xf32>, tensor<16x4xf32>) -> tensor<4x16xf32>
// GRAD: dist.reduce_scatter %{{.*}} {axis = "tp_out", dim = 0 : i64} : (tensor<4x16xf32>) -> tensor<2x16xf32>
// GRAD: dist.all_gather %{{.*}} {axis = "tp_in", dim = 0 : i64} : (tensor<2x6xf32>) -> tensor<4x6xf32>
// GRAD: dist.reduce_scatter %{{.*}} {axis = "tp_w", dim = 0 : i64} : (tensor<16x6xf32>) -> tensor<8x6xf32>
// GRAD: dist.reduce_scatter %{{.*}} {axis = "tp_w", dim = 1 : i64} : (tensor<16x4xf32>) -> tensor<16x2xf32>
// GRAD: return
// NOTCUBE: tp_mode=3d needs a cube number of tensor ranks (q x q x q), not tp=4
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
