// RUN: colossal-opt %s -split-input-file -verify-diagnostics

// SUMMA's product of blocks and its gradient read back.
func.func @ok(%x: tensor<2x3x8xf32>, %w: tensor<8x4xf32>, %dy: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %y = dist.grid_linear %x, %w {row_axis = "tp_col", column_axis = "tp_row"} : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %dx, %dw = dist.grid_linear_grad %x, %w, %dy {row_axis = "tp_col", column_axis = "tp_row"} : (tensor<2x3x8xf32>, tensor<8x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x8xf32>, tensor<8x4xf32>)
  return %y : tensor<2x3x4xf32>
}

// -----

func.func @inner(%x: tensor<2x8xf32>, %w: tensor<6x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'dist.grid_linear' op multiplies blocks 'tensor<2x8xf32>' and 'tensor<6x4xf32>' whose inner dimensions do not match}}
  %y = dist.grid_linear %x, %w {row_axis = "tp_col", column_axis = "tp_row"} : (tensor<2x8xf32>, tensor<6x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @result(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'dist.grid_linear' op makes 'tensor<2x8xf32>' from blocks 'tensor<2x8xf32>' and 'tensor<8x4xf32>'}}
  %y = dist.grid_linear %x, %w {row_axis = "tp_col", column_axis = "tp_row"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @axes(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'dist.grid_linear' op needs two grid axes, and both are 'tp'}}
  %y = dist.grid_linear %x, %w {row_axis = "tp", column_axis = "tp"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @grads(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %dy: tensor<2x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'dist.grid_linear_grad' op returns gradients of types other than its input's and weight's}}
  %dx, %dw = dist.grid_linear_grad %x, %w, %dy {row_axis = "tp_col", column_axis = "tp_row"} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<8x4xf32>)
  return %dw : tensor<8x4xf32>
}
