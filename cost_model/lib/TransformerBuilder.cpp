//===- TransformerBuilder.cpp - GPT, BERT and LLaMA graphs from shapes ---===//

#include "colossal/cost/TransformerBuilder.h"

#include <map>

namespace colossal::cost {
namespace {

/// Builds one op: factors by name, tensors as lists of factor names per
/// dimension (a dimension "heads*head_dim" merges two factors).
class OpBuilder {
public:
  OpBuilder(Graph &graph, std::string name, OpKind kind, int layer) : graph(graph) {
    op.name = std::move(name);
    op.kind = kind;
    op.layer = layer;
  }

  OpBuilder &factor(const std::string &name, int64_t size,
                    FactorKind kind = FactorKind::Parallel) {
    index[name] = int(op.factors.size());
    op.factors.push_back({name, size, kind});
    return *this;
  }
  OpBuilder &input(int value, const std::vector<std::string> &dims) {
    op.inputs.push_back({value, resolve(dims)});
    return *this;
  }
  /// Creates the output value.
  OpBuilder &output(const std::string &name, const std::vector<std::string> &dims,
                    DType dtype, int *value) {
    *value = graph.addValue(name, dtype);
    graph.values[*value].producer = int(graph.ops.size());
    op.outputs.push_back({*value, resolve(dims)});
    return *this;
  }
  OpBuilder &save(const std::vector<std::string> &dims, DType dtype, bool core = false) {
    op.saved.push_back({resolve(dims), dtype, core});
    return *this;
  }
  /// Saves input `i` as the op reads it.
  OpBuilder &saveInput(size_t i, bool core = false) {
    op.saved.push_back({op.inputs[i].dims, graph.values[op.inputs[i].value].dtype, core, int(i)});
    return *this;
  }
  OpBuilder &flops(double forward, double backward) {
    op.forwardFlops = forward;
    op.backwardFlops = backward;
    return *this;
  }
  OpBuilder &core() {
    op.attentionCore = true;
    op.recomputedWhenSelective = true;
    return *this;
  }
  /// The attention of a decoder (GPT, LLaMA) is masked causally; its FLOPs
  /// stay the whole score matrix's, as frameworks count them.
  OpBuilder &causal(bool decoder) {
    op.causal = decoder;
    return *this;
  }
  /// Product of all factor sizes: the iteration space.
  double space() const {
    double n = 1;
    for (const Factor &f : op.factors)
      n *= double(f.size);
    return n;
  }
  void add() { graph.ops.push_back(std::move(op)); }

private:
  std::vector<std::vector<int>> resolve(const std::vector<std::string> &dims) {
    std::vector<std::vector<int>> out;
    for (const std::string &dim : dims) {
      std::vector<int> factors;
      size_t start = 0;
      while (start <= dim.size()) {
        size_t end = dim.find('*', start);
        std::string name = dim.substr(start, end == std::string::npos ? end : end - start);
        if (name != "1")
          factors.push_back(index.at(name));
        if (end == std::string::npos)
          break;
        start = end + 1;
      }
      out.push_back(factors);
    }
    return out;
  }

  Graph &graph;
  Op op;
  std::map<std::string, int> index;
};

struct Builder {
  const TransformerShape &s;
  Graph g;
  int64_t b, seq, h, a, kv, d, f, v;
  /// Grouped-query attention: fewer key and value heads than query heads.
  bool grouped = false;
  DType dt;

  explicit Builder(const TransformerShape &shape)
      : s(shape), b(shape.microbatch), seq(shape.seq), h(shape.hidden), a(shape.heads),
        kv(shape.kvHeads > 0 ? shape.kvHeads : shape.heads), d(shape.hidden / shape.heads), v(shape.vocab),
        dt(shape.dtype) {
    grouped = kv != a;
    f = shape.ffn;
    if (f == 0)
      f = shape.family == TransformerFamily::LLaMA ? ((8 * h / 3 + 255) / 256) * 256 : 4 * h;
  }

  int param(const std::string &name) { return g.addValue(name, dt, /*isParameter=*/true); }

  bool decoder() const { return s.family != TransformerFamily::BERT; }

  /// [b, s, h] -> [b, s, h], normalising over h.
  int norm(const std::string &name, int x, int layer, bool rms) {
    int out, gamma = param(name + ".weight");
    OpBuilder op(g, name, OpKind::Norm, layer);
    op.factor("batch", b).factor("seq", seq).factor("hidden", h, FactorKind::Whole);
    op.input(x, {"batch", "seq", "hidden"}).input(gamma, {"hidden"});
    if (!rms)
      op.input(param(name + ".bias"), {"hidden"});
    op.output(name, {"batch", "seq", "hidden"}, dt, &out).saveInput(0);
    op.flops((rms ? 4 : 7) * op.space(), (rms ? 6 : 10) * op.space()).add();
    return out;
  }

  /// [b, s, k] x [k, n] (+ bias): forward 2 b s k n, backward twice that.
  int linear(const std::string &name, int x, const std::string &kName, int64_t k,
             const std::string &nName, int64_t n, int layer, bool bias, int weight = -1) {
    int out;
    if (weight < 0)
      weight = param(name + ".weight");
    OpBuilder op(g, name, OpKind::MatMul, layer);
    op.factor("batch", b).factor("seq", seq).factor(kName, k, FactorKind::Reduction).factor(nName, n);
    op.input(x, {"batch", "seq", kName}).input(weight, {kName, nName});
    if (bias)
      op.input(param(name + ".bias"), {nName});
    op.output(name, {"batch", "seq", nName}, dt, &out).saveInput(0);
    op.flops(2 * op.space(), 4 * op.space()).add();
    return out;
  }

  /// Elementwise op over [b, s, dims...] saving `savedInputs` and, with
  /// `mask`, a one-byte dropout mask.
  int elementwise(const std::string &name, const std::vector<int> &inputs,
                  const std::vector<std::pair<std::string, int64_t>> &inner, int layer,
                  double flopsPerElement, bool saveInputs, bool mask) {
    int out;
    OpBuilder op(g, name, OpKind::Elementwise, layer);
    op.factor("batch", b).factor("seq", seq);
    std::vector<std::string> dims{"batch", "seq"};
    for (const auto &[n, size] : inner) {
      op.factor(n, size);
      dims.push_back(n);
    }
    for (int x : inputs)
      op.input(x, dims);
    op.output(name, dims, dt, &out);
    if (saveInputs)
      for (size_t i = 0; i < inputs.size(); ++i)
        op.saveInput(i);
    if (mask)
      op.save(dims, DType::I8);
    op.flops(flopsPerElement * op.space(), 2 * flopsPerElement * op.space()).add();
    return out;
  }

  /// Rotary embeddings on the queries, or on the keys (`keys`: their own,
  /// fewer heads under grouped-query attention).
  int rotary(const std::string &name, int x, int layer, bool keys) {
    int out;
    OpBuilder op(g, name, OpKind::Elementwise, layer);
    op.factor("batch", b).factor("seq", seq);
    if (keys)
      keyHeads(op);
    else
      queryHeads(op);
    op.factor("head_dim", d);
    const std::string dims = (keys ? keyHeadDims() : queryHeadDims()) + "*head_dim";
    op.input(x, {"batch", "seq", dims});
    op.output(name, {"batch", "seq", dims}, dt, &out);
    op.flops(3 * op.space(), 3 * op.space()).add();
    return out;
  }

  int dropout(const std::string &name, int x, int layer) {
    if (!s.dropout)
      return x;
    return elementwise(name, {x}, {{"hidden", h}}, layer, 2, false, true);
  }

  /// Scores, softmax (scale and mask fused), dropout and context. Under
  /// grouped-query attention each key head serves `group` query heads.
  int attentionCore(const std::string &name, int q, int k, int vv, int layer) {
    int scores, probs, context;
    const std::string qh = queryHeadDims(), qDims = qh + "*head_dim", kDims = keyHeadDims() + "*head_dim";
    {
      OpBuilder op(g, name + ".scores", OpKind::MatMul, layer);
      op.factor("batch", b);
      queryHeads(op);
      op.factor("seq", seq).factor("kv_seq", seq).factor("head_dim", d, FactorKind::Reduction);
      op.input(q, {"batch", "seq", qDims}).input(k, {"batch", "kv_seq", kDims});
      op.output(name + ".scores", {"batch", qh, "seq", "kv_seq"}, dt, &scores);
      op.saveInput(0).saveInput(1).core().causal(decoder()).flops(2 * op.space(), 4 * op.space()).add();
    }
    {
      OpBuilder op(g, name + ".softmax", OpKind::Softmax, layer);
      op.factor("batch", b);
      queryHeads(op);
      op.factor("seq", seq).factor("kv_seq", seq, FactorKind::Whole);
      op.input(scores, {"batch", qh, "seq", "kv_seq"});
      op.output(name + ".probs", {"batch", qh, "seq", "kv_seq"}, dt, &probs);
      op.save({"batch", qh, "seq", "kv_seq"}, dt, /*core=*/true);
      op.core().flops(5 * op.space(), 4 * op.space()).add();
    }
    if (s.dropout) {
      int dropped;
      OpBuilder op(g, name + ".dropout", OpKind::Elementwise, layer);
      op.factor("batch", b);
      queryHeads(op);
      op.factor("seq", seq).factor("kv_seq", seq);
      op.input(probs, {"batch", qh, "seq", "kv_seq"});
      op.output(name + ".dropout", {"batch", qh, "seq", "kv_seq"}, dt, &dropped);
      op.save({"batch", qh, "seq", "kv_seq"}, DType::I8, /*core=*/true);
      op.core().flops(2 * op.space(), 2 * op.space()).add();
      probs = dropped;
    }
    {
      OpBuilder op(g, name + ".context", OpKind::MatMul, layer);
      op.factor("batch", b);
      queryHeads(op);
      op.factor("seq", seq).factor("kv_seq", seq, FactorKind::Reduction).factor("head_dim", d);
      op.input(probs, {"batch", qh, "seq", "kv_seq"}).input(vv, {"batch", "kv_seq", kDims});
      op.output(name + ".context", {"batch", "seq", qDims}, dt, &context);
      op.saveInput(0, /*core=*/true).saveInput(1).core().causal(decoder());
      op.flops(2 * op.space(), 4 * op.space()).add();
    }
    return context;
  }

  /// QKV projection as one op with three outputs, so its input is kept once.
  /// Grouped-query attention projects the queries and the fewer key and
  /// value heads in two ops (their shared input is still kept once).
  void qkv(const std::string &name, int x, int layer, bool bias, int &q, int &k, int &vv) {
    if (grouped) {
      groupedQkv(name, x, layer, bias, q, k, vv);
      return;
    }
    OpBuilder op(g, name, OpKind::MatMul, layer);
    op.factor("batch", b).factor("seq", seq).factor("hidden", h, FactorKind::Reduction)
        .factor("qkv", 3).factor("heads", a).factor("head_dim", d);
    op.input(x, {"batch", "seq", "hidden"}).input(param(name + ".weight"), {"hidden", "qkv*heads*head_dim"});
    if (bias)
      op.input(param(name + ".bias"), {"qkv*heads*head_dim"});
    op.output(name + ".q", {"batch", "seq", "heads*head_dim"}, dt, &q);
    op.output(name + ".k", {"batch", "seq", "heads*head_dim"}, dt, &k);
    op.output(name + ".v", {"batch", "seq", "heads*head_dim"}, dt, &vv);
    op.saveInput(0).flops(2 * op.space(), 4 * op.space()).add();
  }

  void groupedQkv(const std::string &name, int x, int layer, bool bias, int &q, int &k, int &vv) {
    {
      OpBuilder op(g, name + ".q", OpKind::MatMul, layer);
      op.factor("batch", b).factor("seq", seq).factor("hidden", h, FactorKind::Reduction);
      queryHeads(op);
      op.factor("head_dim", d);
      op.input(x, {"batch", "seq", "hidden"}).input(param(name + ".q.weight"), {"hidden", "kv_heads*group*head_dim"});
      if (bias)
        op.input(param(name + ".q.bias"), {"kv_heads*group*head_dim"});
      op.output(name + ".q", {"batch", "seq", "kv_heads*group*head_dim"}, dt, &q);
      op.saveInput(0).flops(2 * op.space(), 4 * op.space()).add();
    }
    OpBuilder op(g, name + ".kv", OpKind::MatMul, layer);
    op.factor("batch", b)
        .factor("seq", seq)
        .factor("hidden", h, FactorKind::Reduction)
        .factor("kv", 2)
        .factor("kv_heads", kv)
        .factor("head_dim", d);
    op.input(x, {"batch", "seq", "hidden"}).input(param(name + ".kv.weight"), {"hidden", "kv*kv_heads*head_dim"});
    if (bias)
      op.input(param(name + ".kv.bias"), {"kv*kv_heads*head_dim"});
    op.output(name + ".k", {"batch", "seq", "kv_heads*head_dim"}, dt, &k);
    op.output(name + ".v", {"batch", "seq", "kv_heads*head_dim"}, dt, &vv);
    op.saveInput(0).flops(2 * op.space(), 4 * op.space()).add();
  }

  /// The query heads' factors: "heads", or under grouped-query attention
  /// "kv_heads" x "group" (the query heads sharing one key head), so that a
  /// split of the key heads splits the queries with them.
  void queryHeads(OpBuilder &op, FactorKind kind = FactorKind::Parallel) {
    if (grouped)
      op.factor("kv_heads", kv, kind).factor("group", a / kv, kind);
    else
      op.factor("heads", a, kind);
  }
  void keyHeads(OpBuilder &op) { op.factor(grouped ? "kv_heads" : "heads", kv); }
  std::string queryHeadDims() const { return grouped ? "kv_heads*group" : "heads"; }
  std::string keyHeadDims() const { return grouped ? "kv_heads" : "heads"; }

  /// Output projection: [b, s, heads*head_dim] x [heads*head_dim, h].
  int attentionOutput(const std::string &name, int context, int layer, bool bias) {
    int out;
    const std::string dims = queryHeadDims() + "*head_dim";
    OpBuilder op(g, name, OpKind::MatMul, layer);
    op.factor("batch", b).factor("seq", seq);
    queryHeads(op, FactorKind::Reduction);
    op.factor("head_dim", d, FactorKind::Reduction).factor("hidden", h);
    op.input(context, {"batch", "seq", dims}).input(param(name + ".weight"), {dims, "hidden"});
    if (bias)
      op.input(param(name + ".bias"), {"hidden"});
    op.output(name, {"batch", "seq", "hidden"}, dt, &out).saveInput(0);
    op.flops(2 * op.space(), 4 * op.space()).add();
    return out;
  }

  int add(const std::string &name, int x, int y, int layer) {
    return elementwise(name, {x, y}, {{"hidden", h}}, layer, 1, false, false);
  }

  int layer(int x, int i) {
    std::string p = "layers." + std::to_string(i) + ".";
    bool llama = s.family == TransformerFamily::LLaMA, bias = !llama;
    bool postLN = s.family == TransformerFamily::BERT;
    int q, k, vv;
    int attnIn = postLN ? x : norm(p + "ln_1", x, i, llama);
    qkv(p + "attn.qkv", attnIn, i, bias, q, k, vv);
    if (llama) {
      // Rotary embeddings on q and k: elementwise over heads, recomputable
      // from q and k (which the scores keep), so nothing extra is saved.
      q = rotary(p + "attn.rotary_q", q, i, false);
      k = rotary(p + "attn.rotary_k", k, i, true);
    }
    int context = attentionCore(p + "attn", q, k, vv, i);
    int attnOut = dropout(p + "attn.dropout", attentionOutput(p + "attn.proj", context, i, bias), i);
    x = add(p + "attn.residual", x, attnOut, i);
    if (postLN)
      x = norm(p + "ln_1", x, i, false);
    int mlpIn = postLN ? x : norm(p + "ln_2", x, i, llama);
    int hidden;
    if (llama) {
      int gate = linear(p + "mlp.gate", mlpIn, "hidden", h, "ffn", f, i, false);
      int up = linear(p + "mlp.up", mlpIn, "hidden", h, "ffn", f, i, false);
      int act = elementwise(p + "mlp.silu", {gate}, {{"ffn", f}}, i, 4, true, false);
      g.ops[size_t(g.values[size_t(act)].producer)].transcendental = true;
      hidden = elementwise(p + "mlp.gated", {act, up}, {{"ffn", f}}, i, 1, true, false);
      // The second linear's input is the gated product; the mul above keeps
      // both of its inputs.
    } else {
      int up = linear(p + "mlp.fc1", mlpIn, "hidden", h, "ffn", f, i, bias);
      hidden = elementwise(p + "mlp.gelu", {up}, {{"ffn", f}}, i, 8, true, false);
      g.ops[size_t(g.values[size_t(hidden)].producer)].transcendental = true;
    }
    int down = linear(p + "mlp.fc2", hidden, "ffn", f, "hidden", h, i, bias);
    x = add(p + "mlp.residual", x, dropout(p + "mlp.dropout", down, i), i);
    if (postLN)
      x = norm(p + "ln_2", x, i, false);
    return x;
  }

  /// `repeats`: how many real layers each built layer stands for (empty:
  /// s.layers layers, each itself).
  Graph build(const std::vector<int64_t> &repeats = {}) {
    int built = repeats.empty() ? int(s.layers) : int(repeats.size());
    g.numLayers = built;
    g.layerRepeat = repeats;
    g.microbatch = b;
    g.tokensPerMicrobatch = b * seq;
    int ids = g.addValue("input_ids", DType::I64);
    int labels = g.addValue("labels", DType::I64);
    int table = param("embed.weight");
    int x;
    {
      // Vocabulary-parallel embedding: a lookup split over the vocabulary is
      // a masked lookup whose partial results sum, hence a reduction factor.
      OpBuilder op(g, "embed", OpKind::Embedding, -1);
      op.factor("batch", b).factor("seq", seq).factor("vocab", v, FactorKind::Reduction)
          .factor("hidden", h);
      op.input(table, {"vocab", "hidden"}).input(ids, {"batch", "seq"});
      op.output("embed", {"batch", "seq", "hidden"}, dt, &x);
      op.flops(double(b * seq * h), double(b * seq * h)).add();
    }
    if (s.family != TransformerFamily::LLaMA) {
      int pos = param("position.weight"), out;
      OpBuilder op(g, "embed.position", OpKind::Elementwise, -1);
      op.factor("batch", b).factor("seq", seq).factor("hidden", h);
      op.input(x, {"batch", "seq", "hidden"}).input(pos, {"seq", "hidden"});
      op.output("embed.position", {"batch", "seq", "hidden"}, dt, &out);
      op.flops(op.space(), op.space()).add();
      x = dropout("embed.dropout", out, -1);
    }
    for (int i = 0; i < built; ++i)
      x = layer(x, i);
    if (s.family != TransformerFamily::BERT)
      x = norm("final_norm", x, -1, s.family == TransformerFamily::LLaMA);
    int head = s.family == TransformerFamily::LLaMA ? -1 : table; // GPT, BERT: tied
    int logits = linear("lm_head", x, "hidden", h, "vocab", v, -1, false, head);
    {
      int loss;
      OpBuilder op(g, "loss", OpKind::Loss, -1);
      op.factor("batch", b, FactorKind::Reduction).factor("seq", seq, FactorKind::Reduction)
          .factor("vocab", v, FactorKind::Whole);
      op.input(logits, {"batch", "seq", "vocab"}).input(labels, {"batch", "seq"});
      op.output("loss", {}, DType::F32, &loss);
      // Softmax statistics in fp32 over the logits.
      op.save({"batch", "seq", "vocab"}, DType::F32);
      op.flops(5 * op.space(), 3 * op.space()).add();
    }
    return std::move(g);
  }
};

} // namespace

Graph buildTransformer(const TransformerShape &shape) { return Builder(shape).build(); }

Graph buildCondensedTransformer(const TransformerShape &shape, const std::vector<int64_t> &stageLayers) {
  std::vector<int64_t> repeats;
  for (int64_t n : stageLayers) {
    if (n < 1)
      continue;
    repeats.push_back(1);
    if (n > 1)
      repeats.push_back(n - 1);
  }
  return Builder(shape).build(repeats);
}

std::optional<TransformerFamily> parseFamily(const std::string &name) {
  if (name == "gpt")
    return TransformerFamily::GPT;
  if (name == "bert")
    return TransformerFamily::BERT;
  if (name == "llama")
    return TransformerFamily::LLaMA;
  return std::nullopt;
}

} // namespace colossal::cost
