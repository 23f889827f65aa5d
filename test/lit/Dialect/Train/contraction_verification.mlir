// RUN: colossal-opt %s -split-input-file -verify-diagnostics

func.func @matmul_contracted_sizes_agree(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+2 {{contracted sizes differ: lhs has 3, rhs has 4}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_batch_dims_broadcast(%a: tensor<2x4x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error@+2 {{batch dimensions do not broadcast}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.matmul %a, %b : (tensor<2x4x3xf32>, tensor<3x3x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

func.func @matmul_vector_drops_dimension(%a: tensor<4x3xf32>, %v: tensor<3xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<4xf32>' are incompatible}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.matmul %a, %v : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @gemm_operands_are_matrices(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+2 {{gemm operands must be matrices}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.gemm %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gemm_transposes_b(%a: tensor<2x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+2 {{contracted sizes differ: a has 4, b has 5}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.gemm %a, %b {trans_b = true} : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gemm_bias_broadcasts(%a: tensor<2x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3xf32>) {
  // expected-error@+2 {{c of shape [3] does not broadcast to [2, 5]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.gemm %a, %b, %c : (tensor<2x4xf32>, tensor<4x5xf32>, tensor<3xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @linear_bias_matches_columns(%x: tensor<2x4xf32>, %w: tensor<4x5xf32>, %b: tensor<4xf32>) {
  // expected-error@+2 {{bias must be a vector of 5}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.linear %x, %w, %b : (tensor<2x4xf32>, tensor<4x5xf32>, tensor<4xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @linear_transposed_weight_contracts_its_columns(%x: tensor<2x4xf32>, %w: tensor<4x5xf32>) {
  // expected-error@+2 {{input features 4 differ from weight columns 5}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.linear %x, %w {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @conv_channels_match_group(%x: tensor<1x6x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error@+2 {{input channels 6 do not match weight 4 x group 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x6x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_attributes_per_spatial_dim(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error@+2 {{conv needs 2 strides and dilations and 4 pads}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_kernel_fits(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error@+2 {{kernel of extent 3 exceeds padded input of extent 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

func.func @einsum_is_explicit(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{equation "ij" must be explicit letters: "ab,bc->ac"}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.einsum %a {equation = "ij"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @einsum_letter_sizes_agree(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+2 {{letter 'j' has sizes 3 and 4}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.einsum %a, %b {equation = "ij,jk->ik"} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @einsum_term_rank(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{term "ijk" has 3 letters for an operand of rank 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.einsum %a {equation = "ijk->i"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}
