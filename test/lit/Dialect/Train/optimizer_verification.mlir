// RUN: colossal-opt %s -split-input-file -verify-diagnostics

// A well-formed LAMB update of two tensors round-trips.
func.func @lamb(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<4x2xf32>, %b: tensor<2xf32>,
                %gw: tensor<4x2xf32>, %gb: tensor<2xf32>, %mw: tensor<4x2xf32>, %mb: tensor<2xf32>,
                %vw: tensor<4x2xf32>, %vb: tensor<2xf32>) {
  %r:6 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w, %b) grads(%gw, %gb) moment1(%mw, %mb)
      moment2(%vw, %vb) {kind = "lamb", decay = array<i1: true, false>, trust_ratio = array<i1: true, true>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<4x2xf32>, tensor<2xf32>, tensor<4x2xf32>, tensor<2xf32>,
         tensor<4x2xf32>, tensor<2xf32>, tensor<4x2xf32>, tensor<2xf32>)
      -> (tensor<4x2xf32>, tensor<2xf32>, tensor<4x2xf32>, tensor<2xf32>, tensor<4x2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @unknown_kind(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xf32>, %g: tensor<2xf32>,
                        %m: tensor<2xf32>) {
  // expected-error@+1 {{kind must be lamb, adamw, sgd or lars, got "adam"}}
  %r:2 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2()
      {kind = "adam", decay = array<i1: true>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @adamw_needs_second_moment(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xf32>,
                                     %g: tensor<2xf32>, %m: tensor<2xf32>) {
  // expected-error@+1 {{adamw keeps a second moment per parameter: expected 1 moment2 tensors, got 0}}
  %r:2 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2()
      {kind = "adamw", decay = array<i1: true>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @gradient_of_another_shape(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xf32>,
                                     %g: tensor<3xf32>, %m: tensor<2xf32>) {
  // expected-error@+1 {{grad 0 has type 'tensor<3xf32>', its param 'tensor<2xf32>'}}
  %r:2 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2()
      {kind = "sgd", decay = array<i1: true>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xf32>, tensor<3xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @sixteen_bit_master(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xbf16>,
                              %g: tensor<2xbf16>, %m: tensor<2xbf16>) {
  // expected-error@+1 {{param 0 has type 'tensor<2xbf16>'; weights are float32 masters}}
  %r:2 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2()
      {kind = "sgd", decay = array<i1: true>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xbf16>, tensor<2xbf16>, tensor<2xbf16>) -> (tensor<2xbf16>, tensor<2xbf16>)
  return
}

// -----

func.func @mask_per_parameter(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xf32>,
                              %g: tensor<2xf32>, %m: tensor<2xf32>) {
  // expected-error@+1 {{decay and trust_ratio need one entry per parameter (1), got 2 and 1}}
  %r:2 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2()
      {kind = "lars", decay = array<i1: true, true>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @lamb_always_has_a_trust_ratio(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xf32>,
                                         %g: tensor<2xf32>, %m: tensor<2xf32>, %v: tensor<2xf32>) {
  // expected-error@+1 {{lamb scales every tensor by its trust ratio; trust_ratio[0] says otherwise}}
  %r:3 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2(%v)
      {kind = "lamb", decay = array<i1: false>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
      -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @beta_below_one(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xf32>,
                          %g: tensor<2xf32>, %m: tensor<2xf32>, %v: tensor<2xf32>) {
  // expected-error@+1 {{beta1 and beta2 must lie in [0, 1)}}
  %r:3 = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2(%v)
      {kind = "adamw", beta2 = 1.0 : f64, decay = array<i1: true>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
      -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @results_replace_operands(%lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>, %w: tensor<2xf32>,
                                    %g: tensor<2xf32>, %m: tensor<2xf32>) {
  // expected-error@+1 {{yields 1 results; expected 2 (new params, then new moments)}}
  %r = train.optimizer_update lr(%lr) step(%step) grad_scale(%s) params(%w) grads(%g) moment1(%m) moment2()
      {kind = "sgd", decay = array<i1: true>, trust_ratio = array<i1: false>}
      : (tensor<f32>, tensor<i64>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}
