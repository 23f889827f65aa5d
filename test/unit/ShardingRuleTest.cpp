//===- ShardingRuleTest.cpp - factor rules are consistent on real models --===//
//
// On every fixture, imported and raised, each op's rule must be
// well-formed: every operand and result dimension maps to factors whose
// sizes multiply to the dimension's size (or to nothing for a size-1
// dimension), and every factor indexes something. A rule that breaks this
// would make the planner split tensors wrongly.
//
//===----------------------------------------------------------------------===//

#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Import/OnnxImporter.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

namespace {

void checkRule(mlir::Operation *op, const colossal::train::ShardingRule &rule) {
  std::vector<int> uses(rule.factors.size(), 0);
  auto checkTensors = [&](mlir::ValueRange values,
                          llvm::ArrayRef<colossal::train::TensorFactors> tensors) {
    ASSERT_EQ(values.size(), tensors.size()) << op->getName().getStringRef().str();
    for (auto [value, dims] : llvm::zip(values, tensors)) {
      auto shape = llvm::cast<mlir::RankedTensorType>(value.getType()).getShape();
      ASSERT_EQ(shape.size(), dims.size()) << op->getName().getStringRef().str();
      for (auto [size, factors] : llvm::zip(shape, dims)) {
        int64_t product = 1;
        for (int f : factors) {
          ASSERT_LT(f, (int)rule.factors.size());
          product *= rule.factors[f].size;
          ++uses[f];
        }
        if (factors.empty())
          EXPECT_EQ(size, 1) << op->getName().getStringRef().str() << ": " << rule.str();
        else
          EXPECT_EQ(product, size) << op->getName().getStringRef().str() << ": " << rule.str();
      }
    }
  };
  checkTensors(op->getOperands(), rule.operands);
  checkTensors(op->getResults(), rule.results);
  for (size_t f = 0; f < uses.size(); ++f)
    EXPECT_GT(uses[f], 0) << "factor " << f << " of " << rule.str() << " indexes nothing";
}

class ShardingRuleOnFixtures : public testing::TestWithParam<const char *> {};

TEST_P(ShardingRuleOnFixtures, EveryOpHasAWellFormedRule) {
  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  colossal::ImportOptions options;
  options.seq = 8;
  // Batch 2, unless the file fixes its own (the MLP's is 4).
  if (!colossal::fixedBatchOfFile(std::string(COLOSSAL_FIXTURES_DIR) + "/" + GetParam(), options))
    options.batch = 2;
  auto module = colossal::importOnnxFile(
      context, std::string(COLOSSAL_FIXTURES_DIR) + "/" + GetParam(), options);
  ASSERT_TRUE(module);
  // Raised ops (linear, attention, layer_norm, ...) carry the rules the
  // planner reads most.
  mlir::PassManager pm(&context);
  colossal::train::buildRaisePipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  int checked = 0;
  module->walk([&](colossal::train::ShardingRuleOpInterface op) {
    checkRule(op, op.getShardingRule());
    ++checked;
  });
  EXPECT_GT(checked, 5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ShardingRuleOnFixtures,
                         testing::Values("mlp/mlp_opset14.onnx", "cnn/cnn_opset17.onnx", "gpt2/gpt2_opset14.onnx",
                                         "bert/bert_opset17.onnx", "vit/vit_opset14.onnx", "llama/llama_opset17.onnx",
                                         "llama_gqa/llama_gqa_opset17.onnx"));

} // namespace
