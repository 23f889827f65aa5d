// RUN: colossal-opt %s -train-tensor-grid="ranks=8 depth=2" | FileCheck %s --check-prefix=LAYERS
// RUN: colossal-opt %s -train-tensor-grid="ranks=8 cube=1" | FileCheck %s --check-prefix=CUBE
// RUN: colossal-opt %s -train-tensor-grid="ranks=8 depth=2" -train-autodiff -train-lower-resharding | FileCheck %s --check-prefix=LAYERS-GRAD

// A table tied to the output layer on 2.5D's layers: split as that layer's
// SUMMA weight (vocabulary over tp_col, features over tp_row) and read as
// copies over tp_depth, as every 2.5D weight; each layer looks up its own
// rows' ids only, so the sum of the table's gradient over tp_depth counts
// the lookup's once.
// LAYERS: train.parameter @wte : tensor<8x4xf32> {block_splits = array<i64: 2, 2>, dist.sharding = #dist.sharding<[tp_col, tp_row]>, trainable}
// LAYERS: %[[T:.*]] = train.param @wte : tensor<8x4xf32>
// LAYERS: %[[C:.*]] = dist.reshard %[[T]] {from = #dist.sharding<[tp_col, tp_row]>, mesh = @tp_grid, to = #dist.sharding<[tp_col, tp_row] copies(tp_depth)>}
// LAYERS: %[[IDS:.*]] = dist.reshard %arg0 {from = #dist.sharding<[-, -]>, mesh = @tp_grid, to = #dist.sharding<[tp_depth, -]>} : (tensor<4x4xi64>) -> tensor<2x4xi64>
// LAYERS: %[[E:.*]] = train.gather %[[C]], %[[IDS]] {axis = 0 : i64, mesh_axis = "tp_col"} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// LAYERS: dist.reshard %[[E]] {from = #dist.sharding<[tp_depth, -, tp_row] sum(tp_col)>, mesh = @tp_grid, to = #dist.sharding<[tp_depth*tp_row, -, tp_col]>}
// LAYERS: %[[V:.*]] = train.transpose %[[C]] {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
// LAYERS: dist.grid_linear %{{.*}}, %[[V]] {column_axis = "tp_row", row_axis = "tp_col"}
// LAYERS: train.cross_entropy {{.*}} {mesh_axis = "tp_col", token_axis = "tp_rows"}
// LAYERS-GRAD-LABEL: func.func @forward_backward
// LAYERS-GRAD: train.gather_grad {{.*}} {axis = 0 : i64, mesh_axis = "tp_col"} : (tensor<2x4xi64>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
// LAYERS-GRAD: dist.all_reduce %{{.*}} {axis = "tp_depth"} : tensor<8x4xf32>

// On the cube: split as an untied table (vocabulary over tp_in, features
// over tp_out and tp_w), the output layer's weight block for an input of
// variant 0; the product reads it gathered over tp_w. Nothing computes on
// whole logits: the loss is vocabulary-parallel over tp_in.
// CUBE: train.parameter @wte : tensor<8x2xf32> {block_splits = array<i64: 2, 4>, dist.sharding = #dist.sharding<[tp_in, tp_out*tp_w]>, trainable}
// CUBE: %[[T:.*]] = train.param @wte : tensor<8x2xf32>
// CUBE: train.gather %[[T]], %arg0 {axis = 0 : i64, mesh_axis = "tp_in"} : (tensor<8x2xf32>, tensor<4x4xi64>) -> tensor<4x4x2xf32>
// CUBE: %[[W:.*]] = dist.reshard %[[T]] {from = #dist.sharding<[tp_in, tp_out*tp_w]>, mesh = @tp_grid, to = #dist.sharding<[tp_in, tp_out] copies(tp_w)>} : (tensor<8x2xf32>) -> tensor<8x4xf32>
// CUBE: %[[V:.*]] = train.transpose %[[W]] {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CUBE: train.linear %{{.*}}, %[[V]] : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CUBE: train.cross_entropy {{.*}} {mesh_axis = "tp_in", token_axis = "tp_rows_in"}
module {
  train.parameter @wte : tensor<16x8xf32> {trainable}
  func.func @forward(%ids: tensor<4x4xi64> {train.name = "input_ids"}, %t: tensor<16xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %wte = train.param @wte : tensor<16x8xf32>
    %e = train.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4x4xi64>) -> tensor<4x4x8xf32>
    %g = train.gelu %e : (tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
    %wt = train.transpose %wte {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %logits = train.linear %g, %wt : (tensor<4x4x8xf32>, tensor<8x16xf32>) -> tensor<4x4x16xf32>
    %flat = train.reshape %logits : (tensor<4x4x16xf32>) -> tensor<16x16xf32>
    %loss = train.cross_entropy %flat, %t : (tensor<16x16xf32>, tensor<16xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
