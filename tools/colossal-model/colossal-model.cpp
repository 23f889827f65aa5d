//===- colossal-model.cpp - shape-only GPT, BERT and LLaMA models as ONNX --===//
//
//   colossal-model gpt --layers 96 --hidden 12288 --heads 96 --seq 2048
//                  --vocab 51200 -o gpt-175b.onnx
//
// Writes a training graph (opset 17: embeddings, the layers, the head and a
// cross-entropy loss over `labels`) whose parameters are declared without
// data: graph inputs with their shapes, listed in the model's metadata under
// `colossal.shape_only_parameters` so that colossal-compile treats them as
// trainable parameters. A 175B or 1T model is a file of kilobytes, planned
// without exporting anything (`colossal-compile FILE --gpus N --batch B
// --emit=plan`). The batch dimension is left dynamic ("batch").
//
// The layers are the ops a PyTorch export of each family produces, so they
// raise to the same named ops (layer_norm / rms_norm, attention, gelu,
// silu, linear, cross_entropy):
// - gpt: pre-LN, learned positions, causal attention, GELU MLP, head tied to
//   the token embedding;
// - bert: post-LN, learned positions, bidirectional attention, GELU MLP,
//   tied masked-LM head with its own bias;
// - llama: pre-RMSNorm, causal attention, SwiGLU MLP, no biases, untied
//   head. Rotary position embedding is left out: it has no parameters and
//   its elementwise cost is small next to the layer's contractions. With
//   `--kv-heads N` (fewer than the heads), grouped-query attention as LLaMA 3
//   exports it: separate query, key and value projections, each key/value
//   head repeated for its group's query heads (Unsqueeze, Expand, Reshape).
//
//===----------------------------------------------------------------------===//

#include "onnx/onnx_pb.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

const char *kUsage =
    "usage: colossal-model gpt|bert|llama --layers N --hidden N --heads N [--seq N] [--vocab N]\n"
    "                      [--ffn N] [--kv-heads N] -o FILE.onnx\n"
    "  --seq       positions per sample (default 2048)\n"
    "  --vocab     vocabulary size (default 51200)\n"
    "  --ffn       MLP width (default 4 x hidden; for llama 8/3 x hidden rounded up to 256)\n"
    "  --kv-heads  key/value heads of grouped-query attention, dividing --heads (default: as many as heads)\n";

int fail(const std::string &message) {
  std::cerr << "colossal-model: error: " << message << "\n";
  return 1;
}

/// Builds the graph node by node with fresh value names.
class GraphWriter {
public:
  explicit GraphWriter(onnx::GraphProto &graph) : graph(graph) {}

  std::string node(const std::string &op, const std::vector<std::string> &inputs,
                   const std::map<std::string, int64_t> &ints = {},
                   const std::map<std::string, std::vector<int64_t>> &lists = {},
                   const std::map<std::string, float> &floats = {}, int outputs = 1,
                   std::vector<std::string> *extra = nullptr) {
    onnx::NodeProto *n = graph.add_node();
    n->set_op_type(op);
    n->set_name(prefix + op + "_" + std::to_string(counter));
    for (const std::string &in : inputs)
      n->add_input(in);
    std::string first;
    for (int i = 0; i < outputs; ++i) {
      std::string out = prefix + op + "_" + std::to_string(counter) + "_out" + std::to_string(i);
      n->add_output(out);
      if (i == 0)
        first = out;
      else if (extra)
        extra->push_back(out);
    }
    ++counter;
    for (const auto &[name, value] : ints) {
      onnx::AttributeProto *a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(value);
    }
    for (const auto &[name, values] : lists) {
      onnx::AttributeProto *a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : values)
        a->add_ints(v);
    }
    for (const auto &[name, value] : floats) {
      onnx::AttributeProto *a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(value);
    }
    return first;
  }

  /// Constants are Constant nodes, as exporters write them (an initializer
  /// that reaches the loss would be read as a trainable parameter).
  std::string floatConstant(float value) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data(value);
    return constant(t);
  }
  std::string intScalar(int64_t value) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_int64_data(value);
    return constant(t);
  }
  std::string intsConstant(const std::vector<int64_t> &values) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(int64_t(values.size()));
    for (int64_t v : values)
      t.add_int64_data(v);
    return constant(t);
  }

  /// A parameter declared without data.
  std::string parameter(const std::string &name, const std::vector<int64_t> &shape) {
    onnx::ValueInfoProto *input = graph.add_input();
    input->set_name(name);
    auto *type = input->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
      type->mutable_shape()->add_dim()->set_dim_value(d);
    parameters.push_back(name);
    return name;
  }

  std::string linear(const std::string &x, const std::string &name, int64_t in, int64_t out, bool bias) {
    std::string y = node("MatMul", {x, parameter(name + ".weight", {in, out})});
    return bias ? node("Add", {y, parameter(name + ".bias", {out})}) : y;
  }

  std::vector<std::string> parameters;
  std::string prefix;

private:
  std::string constant(const onnx::TensorProto &value) {
    std::string out = node("Constant", {});
    onnx::AttributeProto *a = graph.mutable_node(graph.node_size() - 1)->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = value;
    return out;
  }

  onnx::GraphProto &graph;
  int64_t counter = 0;
};

struct Shape {
  std::string family;
  int64_t layers = 0, hidden = 0, heads = 0, seq = 2048, vocab = 51200, ffn = 0, kvHeads = 0;
};

/// [batch, kv, seq, d] with each key/value head repeated for the `groups`
/// query heads that share it: [batch, kv * groups, seq, d].
std::string repeatHeads(GraphWriter &g, const Shape &s, const std::string &x, int64_t groups) {
  int64_t d = s.hidden / s.heads;
  std::string single = g.node("Unsqueeze", {x, g.intsConstant({2})});
  std::string wide = g.node("Expand", {single, g.intsConstant({1, 1, groups, 1, 1})});
  return g.node("Reshape", {wide, g.intsConstant({-1, s.heads, s.seq, d})});
}

/// Scaled dot-product attention over [batch, seq, hidden], the form PyTorch
/// exports: heads split by reshape and transpose, scores scaled, the causal
/// mask applied with Where, softmax, context merged back.
std::string attention(GraphWriter &g, const Shape &s, const std::string &x, const std::string &name,
                      bool bias, const std::string &causalMask) {
  int64_t d = s.hidden / s.heads;
  std::string heads = g.intsConstant({-1, s.seq, s.heads, d});
  std::string q, k, v;
  if (s.kvHeads > 0 && s.kvHeads < s.heads) {
    q = g.linear(x, name + ".q", s.hidden, s.hidden, bias);
    std::string keyHeads = g.intsConstant({-1, s.seq, s.kvHeads, d});
    auto kvHeads = [&](const std::string &suffix) {
      std::string projected = g.linear(x, name + suffix, s.hidden, s.kvHeads * d, bias);
      std::string split = g.node("Transpose", {g.node("Reshape", {projected, keyHeads})}, {}, {{"perm", {0, 2, 1, 3}}});
      return repeatHeads(g, s, split, s.heads / s.kvHeads);
    };
    k = g.node("Transpose", {kvHeads(".k")}, {}, {{"perm", {0, 1, 3, 2}}});
    v = kvHeads(".v");
  } else {
    std::string qkv = g.linear(x, name + ".qkv", s.hidden, 3 * s.hidden, bias);
    std::vector<std::string> rest;
    q = g.node("Split", {qkv, g.intsConstant({s.hidden, s.hidden, s.hidden})}, {{"axis", 2}}, {}, {}, 3, &rest);
    k = g.node("Transpose", {g.node("Reshape", {rest[0], heads})}, {}, {{"perm", {0, 2, 3, 1}}});
    v = g.node("Transpose", {g.node("Reshape", {rest[1], heads})}, {}, {{"perm", {0, 2, 1, 3}}});
  }
  q = g.node("Transpose", {g.node("Reshape", {q, heads})}, {}, {{"perm", {0, 2, 1, 3}}});
  std::string scores = g.node("Div", {g.node("MatMul", {q, k}), g.floatConstant(std::sqrt(float(d)))});
  if (!causalMask.empty())
    scores = g.node("Where", {causalMask, g.floatConstant(std::numeric_limits<float>::lowest()), scores});
  std::string probs = g.node("Softmax", {scores}, {{"axis", -1}});
  std::string context = g.node("Transpose", {g.node("MatMul", {probs, v})}, {}, {{"perm", {0, 2, 1, 3}}});
  context = g.node("Reshape", {context, g.intsConstant({-1, s.seq, s.hidden})});
  return g.linear(context, name + ".proj", s.hidden, s.hidden, bias);
}

std::string gelu(GraphWriter &g, const std::string &x) {
  std::string erf = g.node("Erf", {g.node("Div", {x, g.floatConstant(std::sqrt(2.0f))})});
  std::string half = g.node("Mul", {x, g.floatConstant(0.5f)});
  return g.node("Mul", {half, g.node("Add", {erf, g.floatConstant(1.0f)})});
}

std::string layerNorm(GraphWriter &g, const std::string &x, const std::string &name, int64_t hidden) {
  return g.node("LayerNormalization", {x, g.parameter(name + ".weight", {hidden}), g.parameter(name + ".bias", {hidden})},
                {{"axis", -1}}, {}, {{"epsilon", 1e-5f}});
}

std::string rmsNorm(GraphWriter &g, const std::string &x, const std::string &name, int64_t hidden) {
  std::string square = g.node("Pow", {x, g.floatConstant(2.0f)});
  std::string mean = g.node("ReduceMean", {square}, {{"keepdims", 1}}, {{"axes", {-1}}});
  std::string rms = g.node("Sqrt", {g.node("Add", {mean, g.floatConstant(1e-6f)})});
  return g.node("Mul", {g.node("Div", {x, rms}), g.parameter(name + ".weight", {hidden})});
}

void buildModel(onnx::ModelProto &model, const Shape &s) {
  model.set_ir_version(8);
  model.set_producer_name("colossal-model");
  onnx::OperatorSetIdProto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto &graph = *model.mutable_graph();
  graph.set_name(s.family + "-shape-only");
  for (const char *name : {"input_ids", "labels"}) {
    onnx::ValueInfoProto *input = graph.add_input();
    input->set_name(name);
    auto *type = input->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::INT64);
    type->mutable_shape()->add_dim()->set_dim_param("batch");
    type->mutable_shape()->add_dim()->set_dim_value(s.seq);
  }
  GraphWriter g(graph);
  bool llama = s.family == "llama", bert = s.family == "bert";
  int64_t ffn = s.ffn;
  if (ffn == 0)
    ffn = llama ? (8 * s.hidden / 3 + 255) / 256 * 256 : 4 * s.hidden;

  std::string wte = g.parameter("embed.weight", {s.vocab, s.hidden});
  std::string x = g.node("Gather", {wte, "input_ids"});
  if (!llama) {
    std::string positions = g.node("Range", {g.intScalar(0), g.intScalar(s.seq), g.intScalar(1)});
    x = g.node("Add", {x, g.node("Gather", {g.parameter("position.weight", {s.seq, s.hidden}), positions})});
    if (bert)
      x = layerNorm(g, x, "embed.norm", s.hidden);
  }
  // Positions after the query's are hidden: column > row.
  std::string mask;
  if (!bert) {
    std::string index = g.node("Range", {g.intScalar(0), g.intScalar(s.seq), g.intScalar(1)});
    std::string rows = g.node("Unsqueeze", {index, g.intsConstant({1})});
    std::string columns = g.node("Unsqueeze", {index, g.intsConstant({0})});
    mask = g.node("Greater", {columns, rows});
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string p = "layers." + std::to_string(l);
    g.prefix = p + "/";
    if (bert) {
      x = layerNorm(g, g.node("Add", {x, attention(g, s, x, p + ".attn", true, "")}), p + ".norm1", s.hidden);
      std::string h = g.linear(gelu(g, g.linear(x, p + ".fc1", s.hidden, ffn, true)), p + ".fc2", ffn, s.hidden, true);
      x = layerNorm(g, g.node("Add", {x, h}), p + ".norm2", s.hidden);
    } else if (llama) {
      x = g.node("Add", {x, attention(g, s, rmsNorm(g, x, p + ".norm1", s.hidden), p + ".attn", false, mask)});
      std::string h = rmsNorm(g, x, p + ".norm2", s.hidden);
      std::string gate = g.linear(h, p + ".gate", s.hidden, ffn, false);
      std::string silu = g.node("Mul", {gate, g.node("Sigmoid", {gate})});
      std::string up = g.linear(h, p + ".up", s.hidden, ffn, false);
      x = g.node("Add", {x, g.linear(g.node("Mul", {silu, up}), p + ".down", ffn, s.hidden, false)});
    } else {
      x = g.node("Add", {x, attention(g, s, layerNorm(g, x, p + ".norm1", s.hidden), p + ".attn", true, mask)});
      std::string h = layerNorm(g, x, p + ".norm2", s.hidden);
      h = g.linear(gelu(g, g.linear(h, p + ".fc1", s.hidden, ffn, true)), p + ".fc2", ffn, s.hidden, true);
      x = g.node("Add", {x, h});
    }
  }
  g.prefix = "head/";
  std::string logits;
  if (llama) {
    logits = g.linear(rmsNorm(g, x, "final_norm", s.hidden), "lm_head", s.hidden, s.vocab, false);
  } else {
    std::string h = bert ? x : layerNorm(g, x, "final_norm", s.hidden);
    logits = g.node("MatMul", {h, g.node("Transpose", {wte}, {}, {{"perm", {1, 0}}})});
    if (bert)
      logits = g.node("Add", {logits, g.parameter("lm_head.bias", {s.vocab})});
  }
  std::string flat = g.node("Reshape", {logits, g.intsConstant({-1, s.vocab})});
  std::string labels = g.node("Reshape", {"labels", g.intsConstant({-1})});
  onnx::NodeProto *loss = graph.add_node();
  loss->set_op_type("SoftmaxCrossEntropyLoss");
  loss->set_name("loss");
  loss->add_input(flat);
  loss->add_input(labels);
  loss->add_output("loss");
  onnx::AttributeProto *reduction = loss->add_attribute();
  reduction->set_name("reduction");
  reduction->set_type(onnx::AttributeProto::STRING);
  reduction->set_s("mean");
  onnx::ValueInfoProto *output = graph.add_output();
  output->set_name("loss");
  output->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  output->mutable_type()->mutable_tensor_type()->mutable_shape();

  std::string names;
  for (const std::string &p : g.parameters)
    names += (names.empty() ? "" : "\n") + p;
  onnx::StringStringEntryProto *entry = model.add_metadata_props();
  entry->set_key("colossal.shape_only_parameters");
  entry->set_value(names);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  Shape s;
  s.family = argv[1];
  if (s.family != "gpt" && s.family != "bert" && s.family != "llama")
    return fail("the family must be gpt, bert or llama, not '" + s.family + "'\n" + kUsage);
  std::string output;
  std::map<std::string, int64_t *> sizes = {{"--layers", &s.layers},   {"--hidden", &s.hidden}, {"--heads", &s.heads},
                                            {"--seq", &s.seq},         {"--vocab", &s.vocab},   {"--ffn", &s.ffn},
                                            {"--kv-heads", &s.kvHeads}};
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc)
      return fail("'" + arg + "' needs a value\n" + kUsage);
    if (arg == "-o") {
      output = argv[++i];
      continue;
    }
    auto it = sizes.find(arg);
    if (it == sizes.end())
      return fail("unknown argument '" + arg + "'\n" + kUsage);
    char *end = nullptr;
    *it->second = std::strtoll(argv[++i], &end, 10);
    if (!end || *end || *it->second < 0)
      return fail(arg + " must be a non-negative integer, not '" + argv[i] + "'");
  }
  if (output.empty())
    return fail("-o FILE.onnx is required\n" + std::string(kUsage));
  if (s.layers < 1 || s.hidden < 1 || s.heads < 1 || s.seq < 1 || s.vocab < 1)
    return fail("--layers, --hidden, --heads, --seq and --vocab must be positive");
  if (s.hidden % s.heads != 0)
    return fail("--hidden " + std::to_string(s.hidden) + " does not divide into " + std::to_string(s.heads) + " heads");
  if (s.kvHeads > 0 && (s.kvHeads > s.heads || s.heads % s.kvHeads != 0))
    return fail("--kv-heads " + std::to_string(s.kvHeads) + " must divide --heads " + std::to_string(s.heads));

  onnx::ModelProto model;
  buildModel(model, s);
  std::ofstream out(output, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out))
    return fail("cannot write " + output);
  out.close();
  if (!out)
    return fail("cannot write " + output);
  int64_t parameters = 0;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (input.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT)
      continue;
    int64_t n = 1;
    for (const auto &dim : input.type().tensor_type().shape().dim())
      n *= dim.dim_value();
    parameters += n;
  }
  std::cerr << "colossal-model: wrote " << output << " (" << s.family << ", " << s.layers << " layers, "
            << double(parameters) / 1e9 << "B parameters, shape only)\n";
  return 0;
}
