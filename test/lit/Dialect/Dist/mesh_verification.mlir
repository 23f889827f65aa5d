// RUN: colossal-opt %s -split-input-file -verify-diagnostics

// A mesh with its placement reads back.
module {
  dist.mesh @grid {axes = ["tp", "dp"], sizes = array<i64: 8, 4>, per_node = array<i64: 8, 1>}
}

// -----

module {
  // expected-error @+1 {{'dist.mesh' op has 2 axes and 1 sizes}}
  dist.mesh @m {axes = ["tp", "dp"], sizes = array<i64: 2>}
}

// -----

module {
  // expected-error @+1 {{'dist.mesh' op axis 'tp' appears twice}}
  dist.mesh @m {axes = ["tp", "tp"], sizes = array<i64: 2, 2>}
}

// -----

module {
  // expected-error @+1 {{'dist.mesh' op axis 'tp' has 0 ranks}}
  dist.mesh @m {axes = ["tp"], sizes = array<i64: 0>}
}

// -----

module {
  // expected-error @+1 {{'dist.mesh' op has 1 axes and 2 per_node entries}}
  dist.mesh @m {axes = ["tp"], sizes = array<i64: 4>, per_node = array<i64: 2, 2>}
}

// -----

module {
  // expected-error @+1 {{'dist.mesh' op axis 'tp' of 4 ranks cannot have 3 of a group on one node}}
  dist.mesh @m {axes = ["tp"], sizes = array<i64: 4>, per_node = array<i64: 3>}
}
