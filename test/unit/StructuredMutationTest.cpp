//===- StructuredMutationTest.cpp - edge values in every kind of node -----===//
//
// Random byte flips rarely produce a well-formed file whose numbers are
// hostile; the importer's arithmetic bugs hide there (split sizes summing
// past int64, an op given fewer inputs than its schema). This test edits
// the parsed fixtures instead: for the first node of each kind (op type,
// attribute names, input count; a constant by the op and operand it feeds),
// every attribute and small constant element is set to each edge value, its
// element type and shape are changed, its op type is swapped for every
// supported op, and its inputs are dropped, repeated or renamed. Each
// variant must import or fail with an error naming where; the sanitizer
// build runs this too, where an overflow or a bad read is a failure.
//
//===----------------------------------------------------------------------===//

#include "ImportChecked.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace {

using colossal::test::boundDimensions;
using colossal::test::importChecked;
using colossal::test::readFixtureBytes;

constexpr int64_t kIntEdges[] = {0,
                                 -1,
                                 1,
                                 2,
                                 -2,
                                 3,
                                 8,
                                 (int64_t(1) << 31) - 1,
                                 int64_t(1) << 31,
                                 -(int64_t(1) << 31),
                                 int64_t(1) << 40,
                                 int64_t(1) << 62,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
constexpr float kFloatEdges[] = {0.0f,
                                 -1.0f,
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 3.0e38f,
                                 1.0e-45f};
constexpr int32_t kElementTypes[] = {onnx::TensorProto::FLOAT, onnx::TensorProto::INT32,
                                     onnx::TensorProto::INT64, onnx::TensorProto::BOOL,
                                     onnx::TensorProto::FLOAT16, onnx::TensorProto::DOUBLE};
// Constants larger than this are weights, not shapes or indices.
constexpr int kMaxEditedElements = 16;

/// Sets element `index` of a small tensor to `value` (an integer tensor
/// takes the integer edge, a float tensor the float edge); false when the
/// tensor's layout is not one this test edits.
bool setElement(onnx::TensorProto &tensor, int index, int64_t integer, float real) {
  bool isFloat = tensor.data_type() == onnx::TensorProto::FLOAT;
  bool isInt64 = tensor.data_type() == onnx::TensorProto::INT64;
  bool isInt32 = tensor.data_type() == onnx::TensorProto::INT32;
  if (!tensor.raw_data().empty()) {
    std::string &raw = *tensor.mutable_raw_data();
    size_t width = isInt64 ? 8 : (isFloat || isInt32) ? 4 : 0;
    if (width == 0 || (index + 1) * width > raw.size())
      return false;
    int32_t narrow = int32_t(integer);
    const void *source = isInt64 ? (const void *)&integer : isInt32 ? (const void *)&narrow
                                                                     : (const void *)&real;
    std::memcpy(&raw[index * width], source, width);
    return true;
  }
  if (isInt64 && index < tensor.int64_data_size())
    tensor.set_int64_data(index, integer);
  else if (isInt32 && index < tensor.int32_data_size())
    tensor.set_int32_data(index, int32_t(integer));
  else if (isFloat && index < tensor.float_data_size())
    tensor.set_float_data(index, real);
  else
    return false;
  return true;
}

int64_t elementCount(const onnx::TensorProto &tensor) {
  int64_t count = 1;
  for (int64_t dim : tensor.dims())
    count *= dim;
  return count;
}

/// Every edit of one tensor: each element to each edge value, each element
/// type, a few shapes.
void forEachTensorEdit(const onnx::TensorProto &original,
                       const std::function<void(const onnx::TensorProto &)> &visit) {
  int64_t count = elementCount(original);
  if (count <= kMaxEditedElements) {
    for (int index = 0; index < count; ++index) {
      for (int64_t edge : kIntEdges) {
        onnx::TensorProto tensor = original;
        if (tensor.data_type() != onnx::TensorProto::FLOAT && setElement(tensor, index, edge, 0))
          visit(tensor);
      }
      for (float edge : kFloatEdges) {
        onnx::TensorProto tensor = original;
        if (tensor.data_type() == onnx::TensorProto::FLOAT && setElement(tensor, index, 0, edge))
          visit(tensor);
      }
    }
  }
  for (int32_t type : kElementTypes) {
    onnx::TensorProto tensor = original;
    tensor.set_data_type(type);
    visit(tensor);
  }
  for (std::vector<int64_t> dims : {std::vector<int64_t>{}, {0}, {1}, {2, 2}, {int64_t(1) << 40}}) {
    onnx::TensorProto tensor = original;
    tensor.clear_dims();
    for (int64_t dim : dims)
      tensor.add_dims(dim);
    visit(tensor);
  }
}

/// Every edit of one attribute.
void forEachAttributeEdit(const onnx::AttributeProto &original,
                          const std::function<void(const onnx::AttributeProto &)> &visit) {
  onnx::AttributeProto attribute = original;
  switch (original.type()) {
  case onnx::AttributeProto::INT:
    for (int64_t edge : kIntEdges) {
      attribute.set_i(edge);
      visit(attribute);
    }
    // Small values: element types, axes, flags.
    for (int64_t value = 4; value <= 16; ++value) {
      attribute.set_i(value);
      visit(attribute);
    }
    break;
  case onnx::AttributeProto::INTS:
    for (int index = 0; index < original.ints_size(); ++index)
      for (int64_t edge : kIntEdges) {
        attribute = original;
        attribute.set_ints(index, edge);
        visit(attribute);
      }
    attribute = original;
    attribute.clear_ints();
    visit(attribute);
    break;
  case onnx::AttributeProto::FLOAT:
    for (float edge : kFloatEdges) {
      attribute.set_f(edge);
      visit(attribute);
    }
    break;
  case onnx::AttributeProto::TENSOR:
    forEachTensorEdit(original.t(), [&](const onnx::TensorProto &tensor) {
      attribute = original;
      *attribute.mutable_t() = tensor;
      visit(attribute);
    });
    break;
  default:
    break;
  }
}

/// What makes two nodes the same kind for this test.
std::string nodeKind(const onnx::NodeProto &node,
                     const std::map<std::string, std::string> &firstConsumer) {
  std::string kind = node.op_type() + "/" + std::to_string(node.input_size());
  std::set<std::string> attributes;
  for (const auto &attribute : node.attribute())
    attributes.insert(attribute.name());
  for (const std::string &name : attributes)
    kind += "/" + name;
  if (node.op_type() == "Constant" && node.output_size() > 0) {
    auto consumer = firstConsumer.find(node.output(0));
    kind += consumer == firstConsumer.end() ? "->none" : "->" + consumer->second;
  }
  return kind;
}

struct Counts {
  int variants = 0;
  int imported = 0;
};

/// Mutates the first node of each kind not yet seen in `seen`.
Counts mutateFixture(const std::string &relative, std::set<std::string> &seen) {
  Counts counts;
  std::string bytes = readFixtureBytes(relative);
  onnx::ModelProto original;
  if (!original.ParseFromString(bytes)) {
    ADD_FAILURE() << relative << " does not parse";
    return counts;
  }
  // The fixtures that fix their batch import as they are; the others bind
  // their dynamic batch and sequence dimensions.
  colossal::ImportOptions options = boundDimensions();
  if (!importChecked(bytes, options))
    options = {};
  EXPECT_TRUE(importChecked(bytes, options)) << relative << " imports unchanged";

  const onnx::GraphProto &graph = original.graph();
  std::map<std::string, std::string> firstConsumer;
  for (const auto &node : graph.node())
    for (int i = 0; i < node.input_size(); ++i)
      firstConsumer.emplace(node.input(i), node.op_type() + "#" + std::to_string(i));
  std::string someGraphInput = graph.input_size() > 0 ? graph.input(0).name() : "";

  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    if (!seen.insert(nodeKind(node, firstConsumer)).second)
      continue;
    auto tryNode = [&](const onnx::NodeProto &edited, const std::string &what) {
      onnx::ModelProto model = original;
      *model.mutable_graph()->mutable_node(n) = edited;
      ++counts.variants;
      SCOPED_TRACE(relative + ": node '" + node.name() + "' (" + node.op_type() + "): " + what);
      counts.imported += importChecked(model.SerializeAsString(), options);
    };

    for (int a = 0; a < node.attribute_size(); ++a)
      forEachAttributeEdit(node.attribute(a), [&](const onnx::AttributeProto &attribute) {
        onnx::NodeProto edited = node;
        *edited.mutable_attribute(a) = attribute;
        tryNode(edited, "attribute " + attribute.name() + " edited");
      });
    for (const std::string &op : colossal::supportedOnnxOps()) {
      if (op == node.op_type())
        continue;
      onnx::NodeProto edited = node;
      edited.set_op_type(op);
      tryNode(edited, "op type " + op);
    }
    onnx::NodeProto edited = node;
    edited.clear_attribute();
    tryNode(edited, "no attributes");
    if (node.input_size() > 0) {
      edited = node;
      edited.mutable_input()->RemoveLast();
      tryNode(edited, "last input dropped");
      edited = node;
      edited.add_input(node.input(0));
      tryNode(edited, "first input repeated");
      for (int i = 0; i < node.input_size(); ++i) {
        edited = node;
        edited.set_input(i, "");
        tryNode(edited, "input " + std::to_string(i) + " unnamed");
        edited.set_input(i, someGraphInput);
        tryNode(edited, "input " + std::to_string(i) + " is the graph input");
      }
    }
  }
  return counts;
}

TEST(StructuredMutation, EdgeValuesInEveryKindOfNode) {
  // Smallest first, so that a kind is edited in the cheapest file holding it.
  std::set<std::string> seen;
  Counts total;
  for (const char *fixture : {"mlp/mlp_opset17.onnx", "special/dropout_attention.onnx",
                              "special/padded_vocab_lm.onnx", "special/dropout_lm.onnx",
                              "cnn/cnn_opset17.onnx", "vit/vit_opset17.onnx",
                              "gpt2/gpt2_opset14.onnx", "gpt2/gpt2_opset17.onnx",
                              "bert/bert_opset17.onnx", "llama/llama_opset17.onnx"}) {
    Counts counts = mutateFixture(fixture, seen);
    total.variants += counts.variants;
    total.imported += counts.imported;
  }
  // The mutations must reach the importer's checks: most variants are
  // refused, some (a harmless value, an op with the same signature) import.
  EXPECT_GT(seen.size(), 60u);
  EXPECT_GT(total.variants, 5000);
  EXPECT_GT(total.imported, 0);
  EXPECT_LT(total.imported, total.variants);
  std::printf("%zu node kinds, %d variants, %d imported\n", seen.size(), total.variants,
              total.imported);
}

} // namespace
