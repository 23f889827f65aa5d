// RUN: colossal-opt %s -split-input-file -verify-diagnostics

func.func @gather_indices_are_integers(%t: tensor<8x4xf32>, %i: tensor<2xf32>) {
  // expected-error@+2 {{indices must be integers}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.gather %t, %i {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_within_bounds(%x: tensor<8xf32>) {
  // expected-error@+2 {{dimension 0: [2, 9) is not within [0, 8]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.slice %x {starts = array<i64: 2>, limits = array<i64: 9>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @slice_step_nonzero(%x: tensor<8xf32>) {
  // expected-error@+2 {{step of dimension 0 is zero}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.slice %x {starts = array<i64: 0>, limits = array<i64: 8>, steps = array<i64: 0>} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_other_dims_agree(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error@+2 {{inputs differ in dimension 0: 2 vs 3}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @split_sizes_sum_to_dimension(%x: tensor<2x8xf32>) {
  // expected-error@+2 {{split sizes sum to 7, dimension is 8}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = train.split %x {axis = 1 : i64, sizes = array<i64: 3, 4>} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @reshape_keeps_element_count(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{reshapes 16 elements into 15}}
  %0 = train.reshape %x : (tensor<2x8xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @transpose_perm_is_permutation(%x: tensor<2x8xf32>) {
  // expected-error@+2 {{perm [0, 0] is not a permutation}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x8xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @broadcast_is_compatible(%x: tensor<3x8xf32>) {
  // expected-error@+1 {{cannot broadcast [3, 8] to [4, 8]}}
  %0 = train.broadcast %x : (tensor<3x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @trilu_needs_matrix(%x: tensor<8xf32>) {
  // expected-error@+2 {{trilu needs rank >= 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.trilu %x {upper = true} : (tensor<8xf32>) -> tensor<8xf32>
  return
}
