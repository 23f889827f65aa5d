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
