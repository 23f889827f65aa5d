// RUN: colossal-opt %s -split-input-file -train-lower-resharding -verify-diagnostics | FileCheck %s --enable-var-scope

// train.reshard lowered to the single-axis collectives of the cost model's
// cheapest plan (cost/Resharding.h), on a mesh of two axes.

// A pending sum over tp, wanted split by rows over tp: one reduce-scatter.
// CHECK-LABEL: func.func @scatter
// CHECK-NEXT: %[[R:.*]] = train.reduce_scatter %arg0 {axis = "tp", dim = 0 : i64} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @scatter(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %y = train.reshard %x {from = "[-, -] sum(tp)", to = "[tp, -]", mesh = {tp = 2 : i64}} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// A split moving from the rows to the columns: one all-to-all.
// CHECK-LABEL: func.func @move
// CHECK-NEXT: %[[M:.*]] = train.all_to_all %arg0 {axis = "tp", concat_dim = 0 : i64, split_dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: return %[[M]]
func.func @move(%x: tensor<4x4xf32>) -> tensor<8x2xf32> {
  %y = train.reshard %x {from = "[tp, -]", to = "[-, tp]", mesh = {tp = 2 : i64}} : (tensor<4x4xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// A pending sum over dp, wanted whole over dp and split by rows over tp:
// the rank's rows are cut first, so the all-reduce moves half the bytes.
// CHECK-LABEL: func.func @slice_first
// CHECK-NEXT: %[[S:.*]] = train.rank_slice %arg0 {axis = "tp", dim = 0 : i64} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = train.all_reduce %[[S]] {axis = "dp"} : tensor<4x4xf32>
// CHECK-NEXT: return %[[A]]
func.func @slice_first(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %y = train.reshard %x {from = "[-, -] sum(dp)", to = "[tp, -]", mesh = {dp = 2 : i64, tp = 2 : i64}} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// Rows split by sp then tp, wanted whole: the minor split is gathered first.
// CHECK-LABEL: func.func @gather_two
// CHECK-NEXT: %[[T:.*]] = train.all_gather %arg0 {axis = "tp", dim = 0 : i64} : (tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[G:.*]] = train.all_gather %[[T]] {axis = "sp", dim = 0 : i64} : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @gather_two(%x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  %y = train.reshard %x {from = "[sp*tp, -]", to = "[-, -]", mesh = {sp = 2 : i64, tp = 2 : i64}} : (tensor<2x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// Copies move nothing: the resharding goes away.
// CHECK-LABEL: func.func @copies
// CHECK-NEXT: return %arg0
func.func @copies(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %y = train.reshard %x {from = "[-, -]", to = "[-, -] copies(tp)", mesh = {tp = 4 : i64}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// The verifier: layouts that do not fit the value or the mesh.
func.func @rank(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{from = "[-]": the layout has 1 dimension(s), the value 2}}
  %y = train.reshard %x {from = "[-]", to = "[-, -]", mesh = {tp = 2 : i64}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @unknown_axis(%x: tensor<4x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{mesh axis 'sp' has no size}}
  %y = train.reshard %x {from = "[-, -]", to = "[sp, -]", mesh = {tp = 2 : i64}} : (tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @invented_sum(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{makes the value a partial sum over 'tp', which it is not in the input}}
  %y = train.reshard %x {from = "[-, -]", to = "[-, -] sum(tp)", mesh = {tp = 2 : i64}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @copies_dropped(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{the input is read as copies over 'tp' and the result is not}}
  %y = train.reshard %x {from = "[-, -] copies(tp)", to = "[-, -]", mesh = {tp = 2 : i64}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @shape(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{dimension 0 is 8 whole (4 per rank under the input's layout), so 4 part(s) of it under '[tp*dp, -]' are 2, not 4}}
  %y = train.reshard %x {from = "[tp, -]", to = "[tp*dp, -]", mesh = {dp = 2 : i64, tp = 2 : i64}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @syntax(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{after the dimensions a layout has only 'sum(axes)' and 'copies(axes)'}}
  %y = train.reshard %x {from = "[-, -] partial(tp)", to = "[-, -]", mesh = {tp = 2 : i64}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

