// RUN: colossal-opt %s -split-input-file -train-lower-resharding -verify-diagnostics | FileCheck %s --enable-var-scope

// dist.reshard lowered to the single-axis collectives of the cost model's
// cheapest plan (cost/Resharding.h), on a mesh of two axes.

// The meshes (dist.mesh: axes and sizes) the cases below name.
dist.mesh @dp2tp2 {axes = ["dp", "tp"], sizes = array<i64: 2, 2>}
dist.mesh @sp2tp2 {axes = ["sp", "tp"], sizes = array<i64: 2, 2>}
dist.mesh @tp2 {axes = ["tp"], sizes = array<i64: 2>}
dist.mesh @tp4 {axes = ["tp"], sizes = array<i64: 4>}

// A pending sum over tp, wanted split by rows over tp: one reduce-scatter.
// CHECK-LABEL: func.func @scatter
// CHECK-NEXT: %[[R:.*]] = dist.reduce_scatter %arg0 {axis = "tp", dim = 0 : i64} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @scatter(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %y = dist.reshard %x {from = #dist.sharding<[-, -] sum(tp)>, to = #dist.sharding<[tp, -]>, mesh = @tp2} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// A split moving from the rows to the columns: one all-to-all.
// CHECK-LABEL: func.func @move
// CHECK-NEXT: %[[M:.*]] = dist.all_to_all %arg0 {axis = "tp", concat_dim = 0 : i64, split_dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: return %[[M]]
func.func @move(%x: tensor<4x4xf32>) -> tensor<8x2xf32> {
  %y = dist.reshard %x {from = #dist.sharding<[tp, -]>, to = #dist.sharding<[-, tp]>, mesh = @tp2} : (tensor<4x4xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// A pending sum over dp, wanted whole over dp and split by rows over tp:
// the rank's rows are cut first, so the all-reduce moves half the bytes.
// CHECK-LABEL: func.func @slice_first
// CHECK-NEXT: %[[S:.*]] = dist.rank_slice %arg0 {axis = "tp", dim = 0 : i64} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = dist.all_reduce %[[S]] {axis = "dp"} : tensor<4x4xf32>
// CHECK-NEXT: return %[[A]]
func.func @slice_first(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %y = dist.reshard %x {from = #dist.sharding<[-, -] sum(dp)>, to = #dist.sharding<[tp, -]>, mesh = @dp2tp2} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// Rows split by sp then tp, wanted whole: the minor split is gathered first.
// CHECK-LABEL: func.func @gather_two
// CHECK-NEXT: %[[T:.*]] = dist.all_gather %arg0 {axis = "tp", dim = 0 : i64} : (tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[T]] {axis = "sp", dim = 0 : i64} : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @gather_two(%x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  %y = dist.reshard %x {from = #dist.sharding<[sp*tp, -]>, to = #dist.sharding<[-, -]>, mesh = @sp2tp2} : (tensor<2x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// A pending sum over both axes, wanted whole: reduce-scattered over one
// axis, all-reduced over the other on the half, gathered back (fewer bus
// bytes than two all-reduces).
// CHECK-LABEL: func.func @sum_two
// CHECK-NEXT: dist.reduce_scatter %arg0 {{.*}} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: dist.all_reduce
// CHECK-NEXT: dist.all_gather {{.*}} -> tensor<8x4xf32>
func.func @sum_two(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %y = dist.reshard %x {from = #dist.sharding<[-, -] sum(sp,tp)>, to = #dist.sharding<[-, -]>, mesh = @sp2tp2} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// The same sum of a value with no dimension the axes divide (a rotary
// table's gradient on a tensor grid): no dimension is scattered; two
// all-reduces.
// CHECK-LABEL: func.func @sum_two_small
// CHECK-NEXT: %[[A:.*]] = dist.all_reduce %arg0 {{.*}} : tensor<1x1x3xf32>
// CHECK-NEXT: %[[B:.*]] = dist.all_reduce %[[A]] {{.*}} : tensor<1x1x3xf32>
// CHECK-NEXT: return %[[B]]
func.func @sum_two_small(%x: tensor<1x1x3xf32>) -> tensor<1x1x3xf32> {
  %y = dist.reshard %x {from = #dist.sharding<[-, -, -] sum(sp,tp)>, to = #dist.sharding<[-, -, -]>, mesh = @sp2tp2} : (tensor<1x1x3xf32>) -> tensor<1x1x3xf32>
  return %y : tensor<1x1x3xf32>
}

// Copies move nothing: the resharding goes away.
// CHECK-LABEL: func.func @copies
// CHECK-NEXT: return %arg0
func.func @copies(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %y = dist.reshard %x {from = #dist.sharding<[-, -]>, to = #dist.sharding<[-, -] copies(tp)>, mesh = @tp4} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// The verifier: layouts that do not fit the value or the mesh.
dist.mesh @tp2 {axes = ["tp"], sizes = array<i64: 2>}
func.func @rank(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{from = [-]: the layout has 1 dimension(s), the value 2}}
  %y = dist.reshard %x {from = #dist.sharding<[-]>, to = #dist.sharding<[-, -]>, mesh = @tp2} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

dist.mesh @tp2 {axes = ["tp"], sizes = array<i64: 2>}
func.func @unknown_axis(%x: tensor<4x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{mesh axis 'sp' has no size}}
  %y = dist.reshard %x {from = #dist.sharding<[-, -]>, to = #dist.sharding<[sp, -]>, mesh = @tp2} : (tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

dist.mesh @tp2 {axes = ["tp"], sizes = array<i64: 2>}
func.func @invented_sum(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{makes the value a partial sum over 'tp', which it is not in the input}}
  %y = dist.reshard %x {from = #dist.sharding<[-, -]>, to = #dist.sharding<[-, -] sum(tp)>, mesh = @tp2} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

dist.mesh @tp2 {axes = ["tp"], sizes = array<i64: 2>}
func.func @copies_dropped(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{the input is read as copies over 'tp' and the result is not}}
  %y = dist.reshard %x {from = #dist.sharding<[-, -] copies(tp)>, to = #dist.sharding<[-, -]>, mesh = @tp2} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

dist.mesh @dp2tp2 {axes = ["dp", "tp"], sizes = array<i64: 2, 2>}
func.func @shape(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{dimension 0 is 8 whole (4 per rank under the input's layout), so 4 part(s) of it under '[tp*dp, -]' are 2, not 4}}
  %y = dist.reshard %x {from = #dist.sharding<[tp, -]>, to = #dist.sharding<[tp*dp, -]>, mesh = @dp2tp2} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

dist.mesh @tp2 {axes = ["tp"], sizes = array<i64: 2>}
func.func @syntax(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // After the dimensions a sharding has only sum(...) and copies(...).
  // expected-error @+1 {{expected '>'}}
  %y = dist.reshard %x {from = #dist.sharding<[-, -] partial(tp)>, to = #dist.sharding<[-, -]>, mesh = @tp2} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

dist.mesh @tp2 {axes = ["tp"], sizes = array<i64: 2>}
func.func @twice(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{mesh axis 'tp' appears twice in the sharding}}
  %y = dist.reshard %x {from = #dist.sharding<[tp, -] sum(tp)>, to = #dist.sharding<[tp, -] sum(tp)>, mesh = @tp2} : (tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @no_mesh(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{mesh @tp is not a dist.mesh of the module}}
  %y = dist.reshard %x {from = #dist.sharding<[-, -] sum(tp)>, to = #dist.sharding<[-, -]>, mesh = @tp} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// expected-error @+1 {{has 2 axes and 1 sizes}}
dist.mesh @bad {axes = ["dp", "tp"], sizes = array<i64: 2>}

// -----

// expected-error @+1 {{axis 'tp' has 0 ranks}}
dist.mesh @empty {axes = ["tp"], sizes = array<i64: 0>}
