// RUN: colossal-opt %s -split-input-file -verify-diagnostics

func.func @softmax_axis_in_range(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{axis 2 is out of range for rank 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.softmax %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale_covers_normalized_shape(%x: tensor<2x8x16xf32>, %g: tensor<8xf32>) {
  // expected-error@+2 {{scale of shape [8] does not broadcast to the normalised shape [16]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.layer_norm %x, %g {axis = -1 : i64} : (tensor<2x8x16xf32>, tensor<8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @rms_norm_axis_in_range(%x: tensor<2x8xf32>) {
  // expected-error@+2 {{axis is out of range for rank 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.rms_norm %x {axis = -3 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @attention_head_sizes_agree(%q: tensor<2x8x16xf32>, %k: tensor<2x8x8xf32>) {
  // expected-error@+2 {{query and key head sizes differ}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.attention %q, %k, %q {scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_key_heads_divide_query_heads(%q: tensor<2x6x8x16xf32>, %k: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{query and key batch dimensions differ (only key/value heads that divide the query heads may)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<2x6x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x6x8x16xf32>
  return
}

// -----

func.func @attention_grouped_batches_agree(%q: tensor<2x4x8x16xf32>, %k: tensor<1x2x8x16xf32>) {
  // expected-error@+2 {{query and key batch dimensions differ}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_key_value_lengths_agree(%q: tensor<2x8x16xf32>, %v: tensor<2x4x16xf32>) {
  // expected-error@+2 {{key and value lengths differ}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.attention %q, %q, %v {scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x4x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_mask_broadcasts(%q: tensor<2x8x16xf32>, %m: tensor<3x8xf32>) {
  // expected-error@+2 {{mask does not broadcast to the scores [2, 8, 8]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.attention %q, %q, %q, %m {scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<3x8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_dropout_is_probability(%q: tensor<2x8x16xf32>) {
  // expected-error@+2 {{dropout must lie in [0, 1)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.attention %q, %q, %q {scale = 1.0 : f32, dropout = 1.5 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @reduce_axes_unique(%x: tensor<2x8xf32>) {
  // expected-error@+2 {{axis -1 appears twice}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.reduce_sum %x {axes = array<i64: 1, -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @dropout_ratio_is_probability(%x: tensor<2x8xf32>) {
  // expected-error@+2 {{ratio must lie in [0, 1), got 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0, %1 = train.dropout %x {ratio = 1.0 : f32} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xi1>)
  return
}

// -----

func.func @loss_labels_match_scores(%s: tensor<4x10xf32>, %l: tensor<5xi64>) {
  // expected-error@+2 {{labels of shape [5] do not match scores without the class axis [4]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.cross_entropy %s, %l : (tensor<4x10xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_labels_are_integers(%s: tensor<4x10xf32>, %l: tensor<4xf32>) {
  // expected-error@+2 {{labels must be integers, got 'f32'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.nll_loss %s, %l : (tensor<4x10xf32>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @loss_reduction_is_known(%s: tensor<4x10xf32>, %l: tensor<4xi64>) {
  // expected-error@+2 {{reduction must be none, sum or mean, got "avg"}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.softmax_cross_entropy_loss %s, %l {reduction = "avg"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}
