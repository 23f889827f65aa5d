// RUN: colossal-opt %s -split-input-file -train-tensor-grid=ranks=4 -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: colossal-opt %s -split-input-file -train-tensor-grid=ranks=4 -train-autodiff -train-lower-resharding -verify-diagnostics | FileCheck %s --check-prefix=GRAD
// RUN: colossal-opt %s -split-input-file -train-tensor-grid=ranks=4 -train-autodiff -train-lower-resharding -train-fold-transposes -verify-diagnostics | FileCheck %s --check-prefix=FOLD

// An MLP on a 2 x 2 grid: the input enters as the rank's block (rows over
// tp_row, features over tp_col), each linear is SUMMA's product of blocks
// with its weight a quarter of the whole (rows of [k, n] over tp_row,
// columns over tp_col, seen through the transpose of the [n, k] parameter)
// and its bias split over tp_col, read as copies over the rows; GELU works
// on the block; the loss is vocabulary-parallel over tp_col, its rows
// summed over tp_row.
// CHECK-LABEL: module attributes {train.tensor_grid = 2 : i64, train.tensor_parallel = 4 : i64}
// CHECK: dist.mesh @tp_grid {axes = ["tp_row", "tp_col"], sizes = array<i64: 2, 2>}
// CHECK: train.parameter @fc : tensor<16x4xf32> {block_splits = array<i64: 2, 2>, dist.sharding = #dist.sharding<[tp_col, tp_row]>, trainable}
// CHECK: train.parameter @fc_bias : tensor<16xf32> {block_splits = array<i64: 2>, dist.sharding = #dist.sharding<[tp_col]>, trainable}
// CHECK: train.parameter @out : tensor<16x6xf32> {block_splits = array<i64: 2, 2>, dist.sharding = #dist.sharding<[tp_row, tp_col]>, trainable}
// CHECK: %[[X:.*]] = dist.reshard %arg0 {from = #dist.sharding<[-, -]>, mesh = @tp_grid, to = #dist.sharding<[tp_row, tp_col]>} : (tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[WT:.*]] = train.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<16x4xf32>) -> tensor<4x16xf32>
// CHECK: %[[Y:.*]] = dist.grid_linear %[[X]], %[[WT]] {column_axis = "tp_row", row_axis = "tp_col"} : (tensor<2x4xf32>, tensor<4x16xf32>) -> tensor<2x16xf32>
// CHECK: %[[B:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[tp_col]>, mesh = @tp_grid, to = #dist.sharding<[tp_col] copies(tp_row)>} : (tensor<16xf32>) -> tensor<16xf32>
// CHECK: %[[H:.*]] = train.add %[[Y]], %[[B]] : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
// CHECK: %[[A:.*]] = train.gelu %[[H]] : (tensor<2x16xf32>) -> tensor<2x16xf32>
// CHECK: %[[L:.*]] = dist.grid_linear %[[A]], %{{.*}} {column_axis = "tp_row", row_axis = "tp_col"} : (tensor<2x16xf32>, tensor<16x6xf32>) -> tensor<2x6xf32>
// CHECK: %[[T:.*]] = dist.reshard %arg1 {from = #dist.sharding<[-]>, mesh = @tp_grid, to = #dist.sharding<[tp_row]>} : (tensor<4xi64>) -> tensor<2xi64>
// CHECK: train.cross_entropy %[[L]], %[[T]] {mesh_axis = "tp_col", token_axis = "tp_row"} : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<f32>
// The backward pass: SUMMA's steps on the duals; the bias gradient summed
// over the grid's rows (the copies' dual); the input's slices need no
// gradient.
// GRAD-LABEL: func.func @forward_backward
// GRAD: dist.grid_linear_grad %{{.*}}, %{{.*}}, %{{.*}} {column_axis = "tp_row", row_axis = "tp_col"} : (tensor<2x16xf32>, tensor<16x6xf32>, tensor<2x6xf32>) -> (tensor<2x16xf32>, tensor<16x6xf32>)
// GRAD: dist.all_reduce %{{.*}} {axis = "tp_row"} : tensor<16xf32>
// GRAD: dist.grid_linear_grad %{{.*}}, %{{.*}}, %{{.*}} {column_axis = "tp_row", row_axis = "tp_col"} : (tensor<2x4xf32>, tensor<4x16xf32>, tensor<2x16xf32>) -> (tensor<2x4xf32>, tensor<4x16xf32>)
// GRAD: return
// The weight stored [out, in] is read transposed in place, and its
// gradient made in that layout (no transposed copies either way).
// FOLD-LABEL: func.func @forward_backward
// FOLD: dist.grid_linear %{{.*}}, %{{.*}} {column_axis = "tp_row", row_axis = "tp_col", transpose_weight} : (tensor<2x4xf32>, tensor<16x4xf32>) -> tensor<2x16xf32>
// FOLD: dist.grid_linear_grad %{{.*}}, %{{.*}}, %{{.*}} {column_axis = "tp_row", row_axis = "tp_col", transpose_weight} : (tensor<2x4xf32>, tensor<16x4xf32>, tensor<2x16xf32>) -> (tensor<2x4xf32>, tensor<16x4xf32>)
// FOLD-NOT: train.transpose
// FOLD: return
module {
  train.parameter @fc : tensor<32x8xf32> {trainable}
  train.parameter @fc_bias : tensor<32xf32> {trainable}
  train.parameter @out : tensor<32x12xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}, %t: tensor<4xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @fc : tensor<32x8xf32>
    %wt = train.transpose %w {perm = array<i64: 1, 0>} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %b = train.param @fc_bias : tensor<32xf32>
    %h = train.linear %x, %wt, %b : (tensor<4x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %a = train.gelu %h : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %o = train.param @out : tensor<32x12xf32>
    %l = train.linear %a, %o : (tensor<4x32xf32>, tensor<32x12xf32>) -> tensor<4x12xf32>
    %loss = train.cross_entropy %l, %t : (tensor<4x12xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// What the grid does not split computes on whole values: a softmax over
// the features reads the linear's blocks gathered over both axes, and its
// output enters the next linear as the rank's block again.
// CHECK-LABEL: module attributes {train.tensor_grid = 2 : i64, train.tensor_parallel = 4 : i64}
// CHECK: %[[Y:.*]] = dist.grid_linear
// CHECK: %[[W:.*]] = dist.reshard %[[Y]] {from = #dist.sharding<[tp_row, tp_col]>, mesh = @tp_grid, to = #dist.sharding<[-, -]>} : (tensor<2x8xf32>) -> tensor<4x16xf32>
// CHECK: %[[N:.*]] = train.softmax %[[W]]
// CHECK: %[[S:.*]] = dist.reshard %[[N]] {from = #dist.sharding<[-, -]>, mesh = @tp_grid, to = #dist.sharding<[tp_row, tp_col]>} : (tensor<4x16xf32>) -> tensor<2x8xf32>
// CHECK: dist.grid_linear %[[S]]
module {
  train.parameter @a : tensor<8x16xf32> {trainable}
  train.parameter @b : tensor<16x4xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @a : tensor<8x16xf32>
    %h = train.linear %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %n = train.softmax %h {axis = -1 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %v = train.param @b : tensor<16x4xf32>
    %y = train.linear %n, %v : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32>
    %sq = train.mul %y, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %loss = train.reduce_mean %sq {axes = array<i64>, keepdims = false} : (tensor<4x4xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A layer norm over a block's features (Optimus): the rank's sums of each
// row, completed over tp_col (a partial sum read as copies: an all-reduce
// forward, and one of the gradient backward), the block centred and scaled
// on its own; scale and bias split over the columns, read as copies over
// the rows.
// CHECK-LABEL: module attributes {train.tensor_grid = 2 : i64, train.tensor_parallel = 4 : i64}
// CHECK: train.parameter @g : tensor<8xf32> {block_splits = array<i64: 2>, dist.sharding = #dist.sharding<[tp_col]>, trainable}
// CHECK: %[[Y:.*]] = dist.grid_linear
// CHECK: %[[S1:.*]] = train.reduce_sum %[[Y]] {axes = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
// CHECK: %[[C1:.*]] = dist.reshard %[[S1]] {from = #dist.sharding<[tp_row, -] sum(tp_col)>, mesh = @tp_grid, to = #dist.sharding<[tp_row, -] copies(tp_col)>} : (tensor<2x1xf32>) -> tensor<2x1xf32>
// CHECK: %[[M:.*]] = train.mul %[[C1]], %{{.*}} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
// CHECK: %[[X:.*]] = train.sub %[[Y]], %[[M]] : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
// CHECK: train.reduce_sum
// CHECK: dist.reshard {{.*}} sum(tp_col)>
// CHECK: train.sqrt
// CHECK: train.reciprocal
// CHECK: %[[G:.*]] = dist.reshard %{{.*}} {from = #dist.sharding<[tp_col]>, mesh = @tp_grid, to = #dist.sharding<[tp_col] copies(tp_row)>} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: train.mul %{{.*}}, %[[G]] : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NOT: train.layer_norm
// CHECK: dist.grid_linear
module {
  train.parameter @a : tensor<8x16xf32> {trainable}
  train.parameter @g : tensor<16xf32> {trainable}
  train.parameter @beta : tensor<16xf32> {trainable}
  train.parameter @b : tensor<16x4xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @a : tensor<8x16xf32>
    %h = train.linear %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %g = train.param @g : tensor<16xf32>
    %beta = train.param @beta : tensor<16xf32>
    %n = train.layer_norm %h, %g, %beta {axis = -1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %v = train.param @b : tensor<16x4xf32>
    %y = train.linear %n, %v : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32>
    %sq = train.mul %y, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %loss = train.reduce_mean %sq {axes = array<i64>, keepdims = false} : (tensor<4x4xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A dimension the grid does not divide is refused, naming the layer.
module {
  train.parameter @a : tensor<8x5xf32> {trainable}
  func.func @forward(%x: tensor<4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %w = train.param @a : tensor<8x5xf32>
    // expected-error @+1 {{tensor parallelism on a 2 x 2 grid (2D) splits this linear layer's 4 rows in 2 and its 8 input and 5 output features in 2, which must divide}}
    %h = train.linear %x, %w : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    %loss = train.reduce_mean %h {axes = array<i64>, keepdims = false} : (tensor<4x5xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Attention by heads on the grid: the projections' blocks reshape into the
// rank's heads of its rows (the features' split leads the heads), the
// transposes carry the split, and each rank attends with its heads; the
// output reshapes back into the next product's block. Nothing is gathered.
// CHECK-LABEL: module attributes {train.tensor_grid = 2 : i64, train.tensor_parallel = 4 : i64}
// CHECK: %[[Q:.*]] = dist.grid_linear {{.*}} -> tensor<1x4x4xf32>
// CHECK-NOT: to = #dist.sharding<[-, -, -]>
// CHECK: %[[QH:.*]] = train.reshape %[[Q]] : (tensor<1x4x4xf32>) -> tensor<1x4x1x4xf32>
// CHECK: %[[QT:.*]] = train.transpose %[[QH]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x1x4xf32>) -> tensor<1x1x4x4xf32>
// CHECK: %[[A:.*]] = train.attention %[[QT]], %{{.*}}, %{{.*}} {causal = true, scale = 5.000000e-01 : f32} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
// CHECK: %[[AT:.*]] = train.transpose %[[A]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x4x1x4xf32>
// CHECK: %[[AR:.*]] = train.reshape %[[AT]] : (tensor<1x4x1x4xf32>) -> tensor<1x4x4xf32>
// CHECK-NOT: to = #dist.sharding<[-, -, -]>
// CHECK: dist.grid_linear %[[AR]], %{{.*}} -> tensor<1x4x4xf32>
module {
  train.parameter @wq : tensor<8x8xf32> {trainable}
  train.parameter @wk : tensor<8x8xf32> {trainable}
  train.parameter @wv : tensor<8x8xf32> {trainable}
  train.parameter @wo : tensor<8x8xf32> {trainable}
  func.func @forward(%x: tensor<2x4x8xf32> {train.name = "x"}) -> (tensor<f32> {train.name = "loss"}) {
    %wq = train.param @wq : tensor<8x8xf32>
    %q = train.linear %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %wk = train.param @wk : tensor<8x8xf32>
    %k = train.linear %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %wv = train.param @wv : tensor<8x8xf32>
    %v = train.linear %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %qh = train.reshape %q : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %kh = train.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %vh = train.reshape %v : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %qt = train.transpose %qh {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %kt = train.transpose %kh {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %vt = train.transpose %vh {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %a = train.attention %qt, %kt, %vt {causal = true, scale = 0.5 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %at = train.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
    %ar = train.reshape %at : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
    %wo = train.param @wo : tensor<8x8xf32>
    %o = train.linear %ar, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %sq = train.mul %o, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %loss = train.reduce_sum %sq {axes = array<i64>, keepdims = false} : (tensor<2x4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// An embedding looked up by token ids (Colossal-AI's vocabulary-parallel
// 2D embedding): the table [V, h] in quarters, its vocabulary rows over
// tp_row and its features over tp_col; each rank looks every id up in its
// rows (ids outside them give zeros), and the partial sums over tp_row are
// reduce-scattered into the rank's block. A table of positions looked up
// by constants stays whole, its result sliced into the block, and so does
// a table whose vocabulary the grid does not divide (15 rows). The lookup's
// gradient is the block's gathered over the rows, scattered into the
// rank's vocabulary rows.
// CHECK-LABEL: module attributes
// CHECK: train.parameter @wte : tensor<8x4xf32> {block_splits = array<i64: 2, 2>, dist.sharding = #dist.sharding<[tp_row, tp_col]>, trainable}
// CHECK: train.parameter @pos : tensor<4x8xf32> {trainable}
// CHECK: train.parameter @odd : tensor<15x8xf32> {trainable}
// CHECK: %[[E:.*]] = train.gather %{{.*}}, %arg0 {axis = 0 : i64, mesh_axis = "tp_row"} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK: %[[B:.*]] = dist.reshard %[[E]] {from = #dist.sharding<[-, -, tp_col] sum(tp_row)>, mesh = @tp_grid, to = #dist.sharding<[tp_row, -, tp_col]>} : (tensor<2x4x4xf32>) -> tensor<1x4x4xf32>
// CHECK: %[[P:.*]] = train.gather %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
// CHECK: %[[PB:.*]] = dist.reshard %[[P]] {{.*}} -> tensor<4x4xf32>
// CHECK: train.add %[[B]], %[[PB]] : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
// GRAD-LABEL: func.func @forward_backward
// GRAD: train.gather_grad %arg0, %{{.*}} {axis = 0 : i64, mesh_axis = "tp_row"} : (tensor<2x4xi64>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
module {
  train.parameter @wte : tensor<16x8xf32> {trainable}
  train.parameter @pos : tensor<4x8xf32> {trainable}
  train.parameter @odd : tensor<15x8xf32> {trainable}
  train.parameter @w : tensor<8x8xf32> {trainable}
  func.func @forward(%ids: tensor<2x4xi64> {train.name = "input_ids"}) -> (tensor<f32> {train.name = "loss"}) {
    %wte = train.param @wte : tensor<16x8xf32>
    %e = train.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %pos = train.param @pos : tensor<4x8xf32>
    %at = train.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %p = train.gather %pos, %at {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %x0 = train.add %e, %p : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %odd = train.param @odd : tensor<15x8xf32>
    %o = train.gather %odd, %ids {axis = 0 : i64} : (tensor<15x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %x = train.add %x0, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %w = train.param @w : tensor<8x8xf32>
    %y = train.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %sq = train.mul %y, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %loss = train.reduce_sum %sq {axes = array<i64>, keepdims = false} : (tensor<2x4x8xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A table tied to the output layer (GPT-2's): split as that layer's SUMMA
// weight is, the vocabulary (the product's columns) over tp_col and the
// features over tp_row; the lookup's partial sums over tp_col, whose
// features lie over tp_row, are moved into the block (an all-to-all of
// tp_row into the rows, a reduce-scatter of the sum into the features).
// CHECK-LABEL: module attributes
// CHECK: train.parameter @wte : tensor<8x4xf32> {block_splits = array<i64: 2, 2>, dist.sharding = #dist.sharding<[tp_col, tp_row]>, trainable}
// CHECK: %[[T:.*]] = train.param @wte : tensor<8x4xf32>
// CHECK: %[[E:.*]] = train.gather %[[T]], %arg0 {axis = 0 : i64, mesh_axis = "tp_col"} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK: dist.reshard %[[E]] {from = #dist.sharding<[-, -, tp_row] sum(tp_col)>, mesh = @tp_grid, to = #dist.sharding<[tp_row, -, tp_col]>} : (tensor<2x4x4xf32>) -> tensor<1x4x4xf32>
// CHECK: %[[V:.*]] = train.transpose %[[T]] {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK: dist.grid_linear %{{.*}}, %[[V]] {column_axis = "tp_row", row_axis = "tp_col"} : (tensor<1x4x4xf32>, tensor<4x8xf32>) -> tensor<1x4x8xf32>
module {
  train.parameter @wte : tensor<16x8xf32> {trainable}
  func.func @forward(%ids: tensor<2x4xi64> {train.name = "input_ids"}, %t: tensor<8xi64> {train.name = "labels"}) -> (tensor<f32> {train.name = "loss"}) {
    %wte = train.param @wte : tensor<16x8xf32>
    %e = train.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %g = train.gelu %e : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %wt = train.transpose %wte {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %logits = train.linear %g, %wt : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %flat = train.reshape %logits : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
    %loss = train.cross_entropy %flat, %t : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
