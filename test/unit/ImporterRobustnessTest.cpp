//===- ImporterRobustnessTest.cpp - hostile bytes never crash the importer ===//
//
// Deterministic corruption of a real export: every truncation point of the
// MLP fixture and a few thousand seeded byte flips must each either import
// or fail with a diagnostic, never crash, hang or leak (the sanitizer build
// runs this too). The libFuzzer target explores further in CI.
//
//===----------------------------------------------------------------------===//

#include "ImportChecked.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace {

using colossal::test::boundDimensions;
using colossal::test::firstImportError;
using colossal::test::importChecked;
using colossal::test::readFixtureBytes;

TEST(ImporterRobustness, TheIntactFixtureImports) {
  std::string bytes = readFixtureBytes("mlp/mlp_opset14.onnx");
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(importChecked(bytes));
}

TEST(ImporterRobustness, EveryTruncationFailsCleanly) {
  std::string bytes = readFixtureBytes("mlp/mlp_opset14.onnx");
  ASSERT_FALSE(bytes.empty());
  int imported = 0;
  for (size_t size = 0; size < bytes.size(); size += 7)
    imported += importChecked(bytes.substr(0, size));
  // A prefix can be a valid but smaller protobuf; none may crash, and almost
  // all must be refused.
  EXPECT_LT(imported, 5);
}

TEST(ImporterRobustness, SeededByteFlipsNeverCrash) {
  std::string original = readFixtureBytes("gpt2/gpt2_opset17.onnx");
  ASSERT_FALSE(original.empty());
  std::mt19937 random(12345);
  // Flip bytes in the graph's nodes, which a torch export writes before the
  // weights (the first half of this file); flips inside raw weights only
  // change numbers.
  size_t structure = original.size() / 2;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = original;
    for (int flips = 0; flips < 4; ++flips) {
      size_t at = random() % structure;
      bytes[at] = char(random() & 0xff);
    }
    importChecked(bytes, boundDimensions());
  }
}

/// The GPT-2 fixture with its first node of `opType` edited by `edit`.
std::string withFirstNodeEdited(const std::string &opType,
                                const std::function<void(onnx::NodeProto &)> &edit,
                                std::string &name) {
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(readFixtureBytes("gpt2/gpt2_opset17.onnx")));
  for (onnx::NodeProto &node : *model.mutable_graph()->mutable_node())
    if (node.op_type() == opType) {
      edit(node);
      name = node.name();
      return model.SerializeAsString();
    }
  ADD_FAILURE() << "no " << opType << " node";
  return {};
}

TEST(ImporterRobustness, InputCountsAreCheckedAgainstTheSchema) {
  std::string name;
  std::string bytes = withFirstNodeEdited(
      "Where", [](onnx::NodeProto &node) { node.mutable_input()->RemoveLast(); }, name);
  EXPECT_NE(firstImportError(bytes, boundDimensions())
                .find("node '" + name + "' (Where): takes 3 inputs, has 2"),
            std::string::npos);
  bytes = withFirstNodeEdited(
      "Slice",
      [](onnx::NodeProto &node) {
        while (node.input_size() < 6)
          node.add_input(node.input(0));
      },
      name);
  EXPECT_NE(firstImportError(bytes, boundDimensions())
                .find("node '" + name + "' (Slice): takes 3 to 5 inputs, has 6"),
            std::string::npos);
}

TEST(ImporterRobustness, AVariadicOpsInputsAreAllRequired) {
  std::string name;
  std::string bytes = withFirstNodeEdited(
      "Concat", [](onnx::NodeProto &node) { node.set_input(1, ""); }, name);
  EXPECT_NE(firstImportError(bytes, boundDimensions())
                .find("node '" + name + "' (Concat): required input 1 is unnamed"),
            std::string::npos);
}

} // namespace
