// RUN: colossal-opt %s -split-input-file -verify-diagnostics

train.parameter @w : tensor<4x4xf32> {trainable}

func.func @param_refers_to_parameter() {
  // expected-error@+1 {{refers to @missing, which is not a train.parameter}}
  %0 = train.param @missing : tensor<4x4xf32>
  return
}

// -----

train.parameter @w : tensor<4x4xf32> {trainable}

func.func @param_type_matches_declaration() {
  // expected-error@+1 {{result type 'tensor<4x5xf32>' differs from parameter @w of type 'tensor<4x4xf32>'}}
  %0 = train.param @w : tensor<4x5xf32>
  return
}

// -----

// expected-error@+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor}}
train.parameter @dynamic : tensor<?x4xf32>

// -----

module {
  // expected-error @+1 {{'train.parameter' op block_splits needs one count of at least 1 per dimension of 'tensor<4x8xf32>'}}
  train.parameter @w : tensor<4x8xf32> {block_splits = array<i64: 2>}
}

// -----

module {
  // expected-error @+1 {{'train.parameter' op is cut both into blocks and along split_dim}}
  train.parameter @w : tensor<4x8xf32> {block_splits = array<i64: 2, 2>, split_dim = 0 : i64, splits = 2 : i64}
}

// -----

module {
  // expected-error @+1 {{'train.parameter' op block_groups needs block_splits and one count per dimension of 'tensor<6x8xf32>', at most one of them above 1}}
  train.parameter @w : tensor<6x8xf32> {block_groups = array<i64: 3, 1>}
}

// -----

module {
  // expected-error @+1 {{'train.parameter' op block_groups 4 do not divide the block's 6 elements along dimension 0}}
  train.parameter @w : tensor<6x8xf32> {block_splits = array<i64: 2, 2>, block_groups = array<i64: 4, 1>}
}
