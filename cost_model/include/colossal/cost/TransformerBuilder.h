//===- TransformerBuilder.h - GPT, BERT and LLaMA graphs from shapes -*- C++ -*-===//
//
// Builds the cost-model graph of a transformer from its hyper-parameters,
// op by op, with the tensors each op keeps for backward as a framework keeps
// them. The per-layer activation memory is then a sum over ops, which the
// tests compare with Korthikanti et al.'s closed forms (34 s b h + 5 a s^2 b
// bytes in 16-bit, REFERENCE.md) rather than assume.
//
// Factor names are the vocabulary plans use to say what is split: "batch",
// "seq", "kv_seq" (attended positions), "hidden", "heads", "head_dim",
// "ffn", "vocab", "qkv"; under grouped-query attention "kv_heads", "group"
// (query heads per key head) and "kv" (keys and values).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_TRANSFORMERBUILDER_H
#define COLOSSAL_COST_TRANSFORMERBUILDER_H

#include "colossal/cost/Graph.h"

namespace colossal::cost {

enum class TransformerFamily {
  GPT,   // pre-LN, learned positions, GELU MLP, tied head
  BERT,  // post-LN, GELU MLP, tied masked-LM head
  LLaMA, // pre-RMSNorm, rotary positions, SwiGLU MLP, no biases, untied head
};

struct TransformerShape {
  TransformerFamily family = TransformerFamily::GPT;
  int64_t layers = 1;
  int64_t hidden = 1024;
  int64_t heads = 16;
  /// Key and value heads; 0 means `heads` (multi-head attention). Fewer
  /// (grouped-query attention, LLaMA 2 70B and LLaMA 3) must divide `heads`;
  /// the graph then names the query heads "kv_heads" x "group".
  int64_t kvHeads = 0;
  int64_t seq = 1024;
  int64_t vocab = 51200;
  /// MLP width; 0 means 4 x hidden (8/3 x hidden rounded to 256 for LLaMA).
  int64_t ffn = 0;
  /// Samples per microbatch.
  int64_t microbatch = 1;
  /// Activation and weight type (mixed precision keeps fp32 master weights
  /// in the optimizer state, not here).
  DType dtype = DType::BF16;
  /// Dropout after attention and MLP (GPT and BERT pre-training use it).
  bool dropout = true;
};

Graph buildTransformer(const TransformerShape &shape);

/// The same model condensed for a pipeline whose stages hold `stageLayers`
/// layers (summing to shape.layers): per stage, its first layer and one
/// layer standing for the rest (Graph::layerRepeat). Its estimate equals the
/// full graph's under the same stage split, at a cost that does not grow
/// with depth.
Graph buildCondensedTransformer(const TransformerShape &shape, const std::vector<int64_t> &stageLayers);

/// "gpt", "bert" or "llama".
std::optional<TransformerFamily> parseFamily(const std::string &name);

} // namespace colossal::cost

#endif // COLOSSAL_COST_TRANSFORMERBUILDER_H
