// RUN: colossal-opt %s -train-test-sharding-rules -verify-diagnostics -o /dev/null
// Factor rules: i, j, k, ... name factors in creation order; "1" marks a
// broadcast dimension that no factor indexes.

func.func @matmul_batch_m_n_parallel_k_reduction(%a: tensor<4x8x16xf32>, %b: tensor<16x32xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, k, j], [j, l]) -> ([i, k, l]) {i=4, j=16 reduction, k=8, l=32}}}
  %0 = train.matmul %a, %b : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  return
}

func.func @matmul_broadcast_batch(%a: tensor<2x1x8x16xf32>, %b: tensor<2x4x16x8xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, 1, l, k], [i, j, k, m]) -> ([i, j, l, m]) {i=2, j=4, k=16 reduction, l=8, m=8}}}
  %0 = train.matmul %a, %b : (tensor<2x1x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

func.func @linear_column_or_row(%x: tensor<2x8x16xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j, k], [k, l], [l]) -> ([i, j, l]) {i=2, j=8, k=16 reduction, l=64}}}
  %0 = train.linear %x, %w, %b : (tensor<2x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

func.func @linear_transposed_weight(%x: tensor<2x8x16xf32>, %w: tensor<64x16xf32>, %b: tensor<64xf32>) {
  // The weight in nn.Linear's layout, [out, in]: the same factors, its dimensions swapped.
  // expected-remark@+1 {{sharding rule: ([i, j, k], [l, k], [l]) -> ([i, j, l]) {i=2, j=8, k=16 reduction, l=64}}}
  %0 = train.linear %x, %w, %b {transpose_weight = true} : (tensor<2x8x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

func.func @gemm_transposed_b(%a: tensor<4x16xf32>, %b: tensor<10x16xf32>, %c: tensor<10xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, k], [j, k], [j]) -> ([i, j]) {i=4, j=10, k=16 reduction}}}
  %0 = train.gemm %a, %b, %c {trans_b = true} : (tensor<4x16xf32>, tensor<10x16xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  return
}

func.func @elementwise_broadcast(%a: tensor<2x8x16xf32>, %b: tensor<16xf32>, %c: tensor<2x1x16xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j, k], [k]) -> ([i, j, k]) {i=2, j=8, k=16}}}
  %0 = train.add %a, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // expected-remark@+1 {{sharding rule: ([i, j, k], [i, 1, k]) -> ([i, j, k]) {i=2, j=8, k=16}}}
  %1 = train.mul %a, %c : (tensor<2x8x16xf32>, tensor<2x1x16xf32>) -> tensor<2x8x16xf32>
  return
}

func.func @softmax_axis_whole(%a: tensor<2x8x16xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=8, k=16 whole}}}
  %0 = train.softmax %a {axis = -1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

func.func @layer_norm_trailing_whole(%a: tensor<2x8x16xf32>, %g: tensor<16xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j, k], [k], [k]) -> ([i, j, k]) {i=2, j=8, k=16 whole}}}
  %0 = train.layer_norm %a, %g, %g : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

func.func @attention_keys_whole(%q: tensor<2x4x8x16xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j, k, m], [i, j, l, m], [i, j, l, n]) -> ([i, j, k, n]) {i=2, j=4, k=8, l=8 whole, m=16 whole, n=16}}}
  %0 = train.attention %q, %q, %q {causal = true, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// Grouped-query attention: the query heads are the key/value heads (j)
// times the heads of a group (k), which the keys and values lack, so a split
// of j splits both and a split of k leaves the keys whole.
func.func @attention_grouped_query_heads(%q: tensor<2x4x8x16xf32>, %kv: tensor<2x2x8x16xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, jk, l, n], [i, j, m, n], [i, j, m, o]) -> ([i, jk, l, o]) {i=2, j=2, k=2, l=8, m=8 whole, n=16 whole, o=16}}}
  %0 = train.attention %q, %kv, %kv {causal = true, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

func.func @reduce_mean_reduction(%a: tensor<2x8x16xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j, k]) -> ([i, j, 1]) {i=2, j=8, k=16 reduction}}}
  %0 = train.reduce_mean %a {axes = array<i64: -1>} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  return
}

func.func @cross_entropy_vocab_whole(%s: tensor<16x64xf32>, %l: tensor<16xi64>) {
  // expected-remark@+1 {{sharding rule: ([j, i], [j]) -> ([]) {i=64 whole, j=16 reduction}}}
  %0 = train.cross_entropy %s, %l : (tensor<16x64xf32>, tensor<16xi64>) -> tensor<f32>
  return
}

func.func @embedding_gather(%t: tensor<64x16xf32>, %ids: tensor<2x8xi64>) {
  // expected-remark@+1 {{sharding rule: ([i, l], [j, k]) -> ([j, k, l]) {i=64 whole, j=2, k=8, l=16}}}
  %0 = train.gather %t, %ids {axis = 0 : i64} : (tensor<64x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  return
}

func.func @reshape_split_and_merge(%a: tensor<16x32xf32>, %b: tensor<2x8x2x16xf32>, %c: tensor<6x4xf32>) {
  // [B*S, H] -> [B, S, H]: operand dimension 0 holds factors i (2) and j (8).
  // expected-remark@+1 {{sharding rule: ([ij, k]) -> ([i, j, k]) {i=2, j=8, k=32}}}
  %0 = train.reshape %a : (tensor<16x32xf32>) -> tensor<2x8x32xf32>
  // Heads merge: [B, S, heads, d] -> [B, S, heads*d].
  // expected-remark@+1 {{sharding rule: ([i, j, k, l]) -> ([i, j, kl]) {i=2, j=8, k=2, l=16}}}
  %1 = train.reshape %b : (tensor<2x8x2x16xf32>) -> tensor<2x8x32xf32>
  // [6, 4] -> [4, 6] shares no boundary: one whole factor.
  // expected-remark@+1 {{sharding rule: ([i, i]) -> ([i, i]) {i=24 whole}}}
  %2 = train.reshape %c : (tensor<6x4xf32>) -> tensor<4x6xf32>
  return
}

func.func @transpose_permutes_factors(%a: tensor<2x8x4xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j, k]) -> ([i, k, j]) {i=2, j=8, k=4}}}
  %0 = train.transpose %a {perm = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return
}

func.func @split_axis_whole(%a: tensor<2x48xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, j]) -> ([i, k], [i, l]) {i=2, j=48 whole, k=16 whole, l=32 whole}}}
  %0:2 = train.split %a {axis = 1 : i64, sizes = array<i64: 16, 32>} : (tensor<2x48xf32>) -> (tensor<2x16xf32>, tensor<2x32xf32>)
  return
}

func.func @einsum_outer_product(%t: tensor<8xf32>, %f: tensor<4xf32>) {
  // expected-remark@+1 {{sharding rule: ([i], [j]) -> ([i, j]) {i=8, j=4}}}
  %0 = train.einsum %t, %f {equation = "i,j->ij"} : (tensor<8xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  return
}

func.func @conv_spatial_whole(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-remark@+1 {{sharding rule: ([i, k, l, o], [j, k, m, p]) -> ([i, j, n, q]) {i=2, j=4, k=3 reduction, l=8 whole, m=3 whole, n=6 whole, o=8 whole, p=3 whole, q=6 whole}}}
  %0 = train.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}
