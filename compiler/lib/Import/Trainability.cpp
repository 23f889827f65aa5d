//===- Trainability.cpp - which initializers reach the loss ------*- C++ -*-===//
//
// By default an initializer is trainable when a differentiable path connects
// it to the loss. A causal-mask buffer reaches the loss only through a
// comparison and Where's condition, rotary frequencies only through integer
// or constant arithmetic: both are constants, not parameters. Decided on the
// ONNX graph before import, so that buffers can be folded as constants.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include <unordered_map>
#include <unordered_set>

namespace colossal::import {

/// Inputs (by position) through which no gradient flows.
static bool isNonDifferentiableInput(const onnx::NodeProto &node, int index) {
  const std::string &op = node.op_type();
  static const std::unordered_map<std::string, int> firstShapeInput = {
      {"Gather", 1}, {"Slice", 1}, {"Reshape", 1}, {"Expand", 1}, {"Unsqueeze", 1},
      {"Squeeze", 1}, {"Split", 1}, {"ReduceSum", 1}, {"ReduceMean", 1}, {"ReduceMax", 1},
      {"Dropout", 1}, {"SoftmaxCrossEntropyLoss", 1}, {"NegativeLogLikelihoodLoss", 1},
      {"Trilu", 1}, {"Tile", 1}, {"Pad", 1}};
  if (auto it = firstShapeInput.find(op); it != firstShapeInput.end())
    return index >= it->second;
  if (op == "Where")
    return index == 0;
  return false;
}

/// Ops whose outputs carry no gradient at all.
static bool hasNonDifferentiableOutputs(const onnx::NodeProto &node) {
  static const std::unordered_set<std::string> ops = {
      "Shape", "Size", "Range", "ConstantOfShape", "Equal", "Less", "Greater", "LessOrEqual",
      "GreaterOrEqual", "Not", "And", "Or", "Xor", "ArgMax", "ArgMin", "Constant"};
  if (ops.count(node.op_type()))
    return true;
  if (node.op_type() == "Cast")
    for (const auto &attr : node.attribute())
      if (attr.name() == "to")
        return !isFloatKind(ElementKind(attr.i()));
  return false;
}

std::set<std::string> initializersReachingLoss(const onnx::GraphProto &graph) {
  std::set<std::string> result;
  if (graph.output_size() == 0)
    return result;
  std::unordered_set<std::string> reaches = {graph.output(0).name()};
  for (int n = graph.node_size() - 1; n >= 0; --n) {
    const onnx::NodeProto &node = graph.node(n);
    bool feedsLoss = false;
    for (const std::string &output : node.output())
      feedsLoss |= reaches.count(output) > 0;
    if (!feedsLoss || hasNonDifferentiableOutputs(node))
      continue;
    for (int i = 0; i < node.input_size(); ++i)
      if (!node.input(i).empty() && !isNonDifferentiableInput(node, i))
        reaches.insert(node.input(i));
  }
  for (const auto &init : graph.initializer())
    if (reaches.count(init.name()) && isFloatKind(ElementKind(init.data_type())))
      result.insert(init.name());
  return result;
}

} // namespace colossal::import
