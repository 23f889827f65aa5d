// RUN: colossal-opt %s -train-raise-attention -canonicalize | FileCheck %s --enable-var-scope

// GPT-2: masked_fill with a causal boolean constant, division by sqrt(d).
// CHECK-LABEL: func.func @causal_where_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x8xf32>, %[[K:.*]]: tensor<2x2x4x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>)
func.func @causal_where_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  // CHECK: %[[O:.*]] = train.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 0.353553385 : f32}
  // CHECK-NEXT: return %[[O]]
  %kt = train.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = train.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %c = train.constant dense<2.82842708> : tensor<f32>
  %ss = train.div %s, %c : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %hide = train.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %neg = train.constant dense<0xFF800000> : tensor<f32>
  %m = train.where %hide, %neg, %ss : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = train.softmax %m {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// A long sequence's mask stays an op (too large to fold at import): key
// positions compared with query positions is causal; shifted by one it is
// not, and stays the attention's mask.
// CHECK-LABEL: func.func @computed_causal_mask
// CHECK: train.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 0.353553385 : f32}
// CHECK-NOT: train.greater
// CHECK: %[[SHIFTED:.*]] = train.greater
// CHECK: %[[KEEP:.*]] = train.equal %[[SHIFTED]]
// CHECK: train.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]] {scale = 0.353553385 : f32}
func.func @computed_causal_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) {
  %kt = train.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = train.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %c = train.constant dense<2.82842708> : tensor<f32>
  %ss = train.div %s, %c : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %columns = train.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %rows = train.constant dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>
  %hide = train.greater %columns, %rows : (tensor<1x4xi64>, tensor<4x1xi64>) -> tensor<4x4xi1>
  %neg = train.constant dense<0xFF800000> : tensor<f32>
  %m = train.where %hide, %neg, %ss : (tensor<4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = train.softmax %m {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %s2 = train.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %ss2 = train.div %s2, %c : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %shifted = train.constant dense<[[1], [2], [3], [4]]> : tensor<4x1xi64>
  %hide2 = train.greater %columns, %shifted : (tensor<1x4xi64>, tensor<4x1xi64>) -> tensor<4x4xi1>
  %m2 = train.where %hide2, %neg, %ss2 : (tensor<4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p2 = train.softmax %m2 {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o2 = train.matmul %p2, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o, %o2 : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
}

// Hugging Face's GPT-2: the future hidden by a where against the dtype's
// minimum, then the padding mask's scores added: causal with the padding
// mask as the operand. Two masks neither of which is causal stay unraised
// (the op takes one mask besides its causal flag).
// CHECK-LABEL: func.func @causal_where_then_padding
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x8xf32>, %[[K:.*]]: tensor<2x2x4x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>, %[[PAD:.*]]: tensor<2x1x1x4xf32>, %{{.*}}: tensor<2x1x1x4xi1>)
func.func @causal_where_then_padding(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %pad: tensor<2x1x1x4xf32>, %keep: tensor<2x1x1x4xi1>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) {
  // CHECK: train.attention %[[Q]], %[[K]], %[[V]], %[[PAD]] {causal = true, scale = 0.353553385 : f32}
  // CHECK: train.softmax
  %kt = train.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = train.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %c = train.constant dense<2.82842708> : tensor<f32>
  %ss = train.div %s, %c : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %keepCausal = train.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %min = train.constant dense<-3.40282347E+38> : tensor<f32>
  %m = train.where %keepCausal, %ss, %min : (tensor<1x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = train.add %m, %pad : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  %p = train.softmax %a {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %s2 = train.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %m2 = train.where %keep, %s2, %min : (tensor<2x1x1x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a2 = train.add %m2, %pad : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  %p2 = train.softmax %a2 {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o2 = train.matmul %p2, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o, %o2 : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
}

// LLaMA: an additive -inf upper triangle; BERT: an additive padding mask that
// stays an operand. Dropout on the weights joins the op with its probability
// and site (the op draws the dropout's masks).
// CHECK-LABEL: func.func @additive_masks
func.func @additive_masks(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>, %pad: tensor<2x1x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: train.attention {{.*}} {causal = true, scale = 5.000000e-01 : f32}
  %s = train.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %half = train.constant dense<0.5> : tensor<f32>
  %ss = train.mul %s, %half : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %causal = train.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %m = train.add %ss, %causal : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %p = train.softmax %m {axis = 2 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>

  // CHECK: train.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {dropout = 1.000000e-01 : f32, dropout_site = 3 : i64, scale = 5.000000e-01 : f32}
  // CHECK-NOT: train.softmax
  // CHECK-NOT: train.dropout
  %s2 = train.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %ss2 = train.mul %s2, %half : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %m2 = train.add %ss2, %pad : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
  %p2 = train.softmax %m2 {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %d2, %mask2 = train.dropout %p2 {ratio = 0.1 : f32, site = 3} : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xi1>)
  %o2 = train.matmul %d2, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o, %o2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// A dropout of probability zero (exported with dropout off) is the identity:
// the chain is raised.
// CHECK-LABEL: func.func @zero_dropout
func.func @zero_dropout(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: train.attention {{.*}} {scale = 1.000000e+00 : f32}
  // CHECK-NOT: train.dropout
  %s = train.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = train.softmax %s {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %d, %mask = train.dropout %p {ratio = 0.0 : f32, site = 4} : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xi1>)
  %o = train.matmul %d, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// Softmax over the query axis is not attention.
// CHECK-LABEL: func.func @softmax_over_queries_stays
func.func @softmax_over_queries_stays(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>, %v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NOT: train.attention
  %s = train.matmul %q, %kt : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %p = train.softmax %s {axis = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %o = train.matmul %p, %v : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}

// Grouped-query attention as LLaMA 3 exports it: each of 2 key/value heads
// repeated for the 2 query heads of its group (Unsqueeze, Expand, Reshape).
// The attention reads the unrepeated heads; the repeats are gone.
// CHECK-LABEL: func.func @grouped_query_heads
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NOT: train.broadcast
// CHECK: %[[O:.*]] = train.attention %[[Q]], %[[K]], %[[V]] {scale = 0.353553385 : f32} : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @grouped_query_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %k1 = train.reshape %k : (tensor<1x2x4x8xf32>) -> tensor<1x2x1x4x8xf32>
  %kg = train.broadcast %k1 : (tensor<1x2x1x4x8xf32>) -> tensor<1x2x2x4x8xf32>
  %kr = train.reshape %kg : (tensor<1x2x2x4x8xf32>) -> tensor<1x4x4x8xf32>
  %v1 = train.reshape %v : (tensor<1x2x4x8xf32>) -> tensor<1x2x1x4x8xf32>
  %vg = train.broadcast %v1 : (tensor<1x2x1x4x8xf32>) -> tensor<1x2x2x4x8xf32>
  %vr = train.reshape %vg : (tensor<1x2x2x4x8xf32>) -> tensor<1x4x4x8xf32>
  %kt = train.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x8xf32>) -> tensor<1x4x8x4xf32>
  %s = train.matmul %q, %kt : (tensor<1x4x4x8xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x4x4xf32>
  %c = train.constant dense<2.82842708> : tensor<f32>
  %ss = train.div %s, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = train.softmax %ss {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = train.matmul %p, %vr : (tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// Heads repeated as whole blocks ([k0, k1, k0, k1]: the broadcast in front
// of the heads, not behind them) pair query head 1 with key head 1, not 0:
// not grouped-query attention's layout, so the repeats stay.
// CHECK-LABEL: func.func @heads_tiled_stay_repeated
// CHECK: train.broadcast
// CHECK: train.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 0.353553385 : f32} : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>)
func.func @heads_tiled_stay_repeated(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %k1 = train.reshape %k : (tensor<1x2x4x8xf32>) -> tensor<1x1x2x4x8xf32>
  %kg = train.broadcast %k1 : (tensor<1x1x2x4x8xf32>) -> tensor<1x2x2x4x8xf32>
  %kr = train.reshape %kg : (tensor<1x2x2x4x8xf32>) -> tensor<1x4x4x8xf32>
  %kt = train.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x8xf32>) -> tensor<1x4x8x4xf32>
  %s = train.matmul %q, %kt : (tensor<1x4x4x8xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x4x4xf32>
  %c = train.constant dense<2.82842708> : tensor<f32>
  %ss = train.div %s, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = train.softmax %ss {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = train.matmul %p, %v : (tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}
