// RUN: colossal-opt %s -split-input-file -train-autodiff -verify-diagnostics

module {
  train.parameter @w : tensor<4xf32> {trainable}
  // expected-error @below {{the first result of @forward must be a floating-point scalar loss}}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = train.param @w : tensor<4xf32>
    %y = train.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @below {{no trainable parameter}}
module {
  train.parameter @w : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %w = train.param @w : tensor<4xf32>
    %y = train.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = train.reduce_max %y {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  train.parameter @w : tensor<2x3xf32> {trainable}
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %w = train.param @w : tensor<2x3xf32>
    %s = train.mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %labels = train.constant dense<[0, 2]> : tensor<2xi64>
    %weights = train.constant dense<[1.0, 2.0, 0.5]> : tensor<3xf32>
    // expected-error @below {{autodiff: no gradient rule for train.softmax_cross_entropy_loss}}
    %l = train.softmax_cross_entropy_loss %s, %labels, %weights : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
