//===- Graph.h - the training computation as the cost model sees it -*- C++ -*-===//
//
// A graph of ops over tensors, with the facts costs need and nothing else:
// each op's einsum-like factor rule (the same vocabulary as the train
// dialect's ShardingRuleOpInterface: which factors index each operand and
// result dimension, and whether a factor is parallel, a reduction, or must
// stay whole), its forward and backward FLOPs, and the tensors it keeps for
// the backward pass. Shapes are implied: a dimension's size is the product
// of its factors' sizes.
//
// `passes/plan` builds this from the IR; `TransformerBuilder.h` builds it
// directly for GPT, BERT and LLaMA shapes (tests, benchmarks, planning
// models too large to export).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_GRAPH_H
#define COLOSSAL_COST_GRAPH_H

#include "colossal/cost/Cluster.h"

#include <cstdint>
#include <string>
#include <vector>

namespace colossal::cost {

enum class FactorKind { Parallel, Reduction, Whole };

struct Factor {
  std::string name; // "batch", "seq", "heads", "ffn", ...
  int64_t size;
  FactorKind kind;
};

/// A tensor as an op sees it: the factors indexing each dimension, major
/// first; an empty list is a size-1 dimension.
struct TensorUse {
  int value = -1;
  std::vector<std::vector<int>> dims;
};

/// What an op keeps for its backward pass (an input, an output, or a mask).
struct SavedTensor {
  std::vector<std::vector<int>> dims;
  DType dtype;
  /// Made again in the backward pass under selective recomputation instead
  /// of kept: on transformer shapes the attention core's tensors (softmax
  /// output, its dropout mask); on an imported model the results of a
  /// layer's cheap ops (everything but its contractions).
  bool recomputedWhenSelective = false;
  /// The op's input this is (-1: an output or a mask). A plan may keep an
  /// input in the sharded layout it arrived in and gather it again for the
  /// backward pass (Megatron sequence parallelism does).
  int input = -1;
  /// The op's output this is (-1: an input or a mask). A value several ops
  /// keep (an input, an output) is held once.
  int output = -1;
};

enum class OpKind {
  MatMul,      // contractions: linear layers, attention scores and context
  Elementwise, // activations, residual adds, dropout, casts
  Norm,        // layer_norm, rms_norm
  Softmax,
  Embedding,
  Loss,
};

struct Op {
  std::string name;
  OpKind kind = OpKind::Elementwise;
  std::vector<Factor> factors;
  std::vector<TensorUse> inputs, outputs;
  std::vector<SavedTensor> saved;
  double forwardFlops = 0;
  double backwardFlops = 0;
  /// Part of the attention core (scores, softmax, dropout, context): the
  /// ops sequence parallelism's attention algorithms replace.
  bool attentionCore = false;
  /// Its forward runs again in the backward pass under selective
  /// recomputation (the attention core on transformer shapes; a layer's
  /// non-contraction ops on an imported model).
  bool recomputedWhenSelective = false;
  /// Its result is its input under another shape (a reshape): a program
  /// moves the bytes, so its backward pass holds one gradient, not two.
  bool relabels = false;
  /// Its result is a weight's transposed view: the reader makes the
  /// weight's gradient in the weight's own layout (a product reading its
  /// operand transposed), so this op's backward pass makes nothing.
  bool weightView = false;
  /// An elementwise product: its backward pass makes the first factor's
  /// gradient from the second, then the second's from the first, so a
  /// second factor nothing else reads is freed in between.
  bool gradientsInTurn = false;
  /// The operands its backward pass copies transposed to make the other
  /// operand's gradient (the train dialect's contraction rule: dw =
  /// transpose(x) dy), one at a time; it holds the largest such copy too.
  /// Kernels with transposed operands need none.
  std::vector<int> transposedForGradient;
  /// An elementwise op evaluating a transcendental function per element
  /// (gelu, silu, exp, erf, ...): measured kernels price it apart.
  bool transcendental = false;
  /// An attention kernel under a causal mask (it skips the hidden blocks;
  /// FLOPs still count the whole score matrix, as model FLOPs do).
  bool causal = false;
  /// A resharding of one rank's graph (a gather, slice or completed sum of
  /// a tensor grid's blocks, a weight block gathered): recomputation
  /// re-runs the ops around it and keeps its result rather than run the
  /// collective again.
  bool exchange = false;
  /// The transformer layer the op belongs to, -1 outside the layers.
  int layer = -1;
};

struct Value {
  std::string name;
  DType dtype = DType::BF16;
  bool isParameter = false;
  /// A parameter without a gradient (a frozen weight or buffer): stored and
  /// read, never reduced or updated.
  bool frozen = false;
  /// A parameter the backward pass reads (a weight whose input gradient
  /// needs it; not a bias): ZeRO-3 gathers it a second time.
  bool readByBackward = true;
  /// The op that produces it (-1 for inputs, parameters and constants).
  int producer = -1;
  /// Made by a collective from another op's result (a partitioned graph's
  /// resharding): that op, which layer detection takes for its producer.
  int reshardedFrom = -1;
  /// A constant of the program (neither an input nor a parameter).
  bool constant = false;
};

struct Graph {
  std::vector<Value> values;
  std::vector<Op> ops;
  /// Layers in `ops` (op.layer < numLayers).
  int numLayers = 0;
  /// A condensed graph stands for a deeper model: layer l of `ops` stands
  /// for layerRepeat[l] identical consecutive layers (their costs, weights
  /// and activations multiply; the estimate is the same as the full
  /// graph's). Empty: every layer stands for itself. Identical layers cost
  /// the same, so a 1000-layer model is evaluated as a few layers per
  /// pipeline stage (the search's time does not grow with depth).
  std::vector<int64_t> layerRepeat;
  /// Samples per microbatch the graph was built for.
  int64_t microbatch = 1;
  /// Tokens (or samples) per microbatch, for throughput.
  int64_t tokensPerMicrobatch = 1;

  int addValue(std::string name, DType dtype, bool isParameter = false);
  /// How many real layers layer `layer` stands for (1 outside layers).
  int64_t repeatOf(int layer) const {
    return layer >= 0 && size_t(layer) < layerRepeat.size() ? layerRepeat[size_t(layer)] : 1;
  }
  /// Layers of the model the graph stands for.
  int64_t realLayers() const;
  /// The first real layer that layer `layer` stands for.
  int64_t firstRealLayer(int layer) const;
  /// Size of dimension `dims` under the op's factors.
  static int64_t dimSize(const Op &op, const std::vector<int> &factors);
  int64_t elements(const Op &op, const TensorUse &use) const;

  /// Parameter elements in the whole model (each parameter counted once,
  /// times the layers it stands for).
  int64_t parameterCount() const;
  /// FLOPs of contractions (forward + backward), the "model FLOPs" of MFU,
  /// per microbatch, over the whole model.
  double modelFlops() const;
  /// Elements of every parameter, by value index.
  std::vector<int64_t> parameterElements() const;
  /// The trainable parameter elements of each layer (each parameter
  /// belongs to the layer of the first op reading it).
  std::vector<int64_t> layerTrainableElements() const;
  /// The trainable parameter elements of the largest layer (each parameter
  /// belongs to the layer of the first op reading it), or of the largest
  /// trainable tensor when that is larger: what ZeRO-3 gathers ahead of the
  /// step at a time.
  int64_t largestLayerTrainableElements() const;
};

} // namespace colossal::cost

#endif // COLOSSAL_COST_GRAPH_H
