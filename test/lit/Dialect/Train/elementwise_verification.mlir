// RUN: colossal-opt %s -split-input-file -verify-diagnostics

func.func @binary_shapes_must_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error@+2 {{shapes do not broadcast: [2, 3] and [4]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @binary_element_types_must_match(%a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error@+2 {{operand element types differ}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.mul %a, %b : (tensor<2xf32>, tensor<2xf16>) -> tensor<2xf32>
  return
}

// -----

func.func @binary_result_must_be_broadcast_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.sub %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @compare_result_is_i1(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error@+1 {{result #0 must be tensor of 1-bit signless integer values}}
  %0 = train.equal %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @unary_keeps_type(%a: tensor<2xf32>) {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = train.exp %a : (tensor<2xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @gelu_approximation_is_known(%a: tensor<2xf32>) {
  // expected-error@+1 {{approximate must be "none" or "tanh", got "fast"}}
  %0 = train.gelu %a {approximate = "fast"} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @where_condition_is_i1(%c: tensor<2xf32>, %a: tensor<2xf32>) {
  // expected-error@+1 {{operand #0 must be tensor of 1-bit signless integer values}}
  %0 = train.where %c, %a, %a : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @where_condition_must_broadcast(%c: tensor<3xi1>, %a: tensor<2xf32>) {
  // expected-error@+2 {{condition shape does not broadcast with the branches}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.where %c, %a, %a : (tensor<3xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @cast_keeps_shape(%a: tensor<2xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<2xf16>' are incompatible}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.cast %a {to = f16} : (tensor<2xf32>) -> tensor<3xf16>
  return
}
