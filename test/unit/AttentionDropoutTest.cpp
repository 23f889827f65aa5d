//===- AttentionDropoutTest.cpp - raised attention draws the unfused masks ===//
//
// Attention whose probabilities pass through dropout is raised into one
// train.attention that draws the masks itself (AttentionDropout.h). Run by
// the interpreter on the same inputs, the raised program's loss and every
// gradient must equal the unraised program's, which computes the scores,
// softmax, a train.dropout of the same site and the product op by op: the
// same masks, or the two would differ by whole dropped probabilities.
//
//===----------------------------------------------------------------------===//

#include "FixtureData.h"
#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Execute/HostInterpreter.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using colossal::execute::HostValue;

/// Whether an integer input is a mask made into scores (a Hugging Face
/// attention mask, cast to floats), not tokens or labels.
bool castToScores(mlir::Value value) {
  for (mlir::Operation *user : value.getUsers())
    if (llvm::isa<colossal::train::CastOp>(user) ||
        (llvm::isa<colossal::train::ReshapeOp>(user) && castToScores(user->getResult(0))))
      return true;
  return false;
}

/// Inputs for @forward_backward: floats in [-1, 1), token ids and labels
/// below 16, padding on the last two tokens of the second row (a boolean
/// mask true there, an integer one 0 there).
std::vector<HostValue> inputsOf(mlir::func::FuncOp function) {
  std::vector<HostValue> arguments;
  uint64_t state = 12345;
  for (unsigned a = 0; a < function.getNumArguments(); ++a) {
    auto type = llvm::cast<mlir::RankedTensorType>(function.getArgument(a).getType());
    HostValue v;
    v.shape.assign(type.getShape().begin(), type.getShape().end());
    bool keepMask = castToScores(function.getArgument(a));
    for (int64_t i = 0; i < type.getNumElements(); ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      bool padded = i % type.getShape().back() >= 6 && i >= type.getShape().back();
      if (type.getElementType().isInteger(1))
        v.data.push_back(padded);
      else if (keepMask)
        v.data.push_back(!padded);
      else if (llvm::isa<mlir::IntegerType>(type.getElementType()))
        v.data.push_back(double((state >> 33) % 16));
      else
        v.data.push_back(double(state >> 40) / double(1ull << 23) - 1.0);
    }
    arguments.push_back(std::move(v));
  }
  return arguments;
}

std::vector<HostValue> run(mlir::ModuleOp module, const std::map<std::string, HostValue> &parameters) {
  auto function = module.lookupSymbol<mlir::func::FuncOp>("forward_backward");
  EXPECT_TRUE(function);
  std::vector<HostValue> results;
  std::string error;
  EXPECT_TRUE(colossal::execute::interpret(function, inputsOf(function), parameters, results, error)) << error;
  return results;
}

class AttentionDropout : public ::testing::TestWithParam<const char *> {};

TEST_P(AttentionDropout, RaisedDrawsTheUnfusedMasks) {
  std::string path = std::string(COLOSSAL_FIXTURES_DIR) + "/special/" + GetParam() + ".onnx";
  std::map<std::string, HostValue> parameters =
      colossal::test::loadInitializers(path, std::string(COLOSSAL_FIXTURES_DIR) + "/special");
  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  auto raised = colossal::test::importFixture(context, path, /*raise=*/true, /*differentiate=*/true);
  // Every raising but attention's (the loss must be raised to differentiate).
  auto unraised = colossal::test::importFixture(context, path, /*raise=*/false, /*differentiate=*/false);
  ASSERT_TRUE(unraised && raised);
  mlir::PassManager pm(&context);
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(colossal::train::createRaiseLayerNorm());
  fn.addPass(colossal::train::createRaiseCrossEntropy());
  fn.addPass(colossal::train::createRaiseLinear());
  pm.addPass(colossal::autodiff::createAutodiffPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*unraised)));
  int fused = 0;
  raised->walk([&](colossal::train::AttentionOp op) { fused += !op.getDropout().isZero(); });
  ASSERT_GT(fused, 0) << "no attention under dropout was raised";

  std::vector<HostValue> want = run(*unraised, parameters), got = run(*raised, parameters);
  ASSERT_EQ(want.size(), got.size());
  ASSERT_FALSE(want.empty());
  std::vector<double> diffs, norms;
  double largest = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    ASSERT_EQ(want[r].shape, got[r].shape) << "result " << r;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want[r].data.size(); ++i) {
      diff += (got[r].data[i] - want[r].data[i]) * (got[r].data[i] - want[r].data[i]);
      norm += want[r].data[i] * want[r].data[i];
    }
    diffs.push_back(std::sqrt(diff));
    norms.push_back(std::sqrt(norm));
    largest = std::max(largest, norms.back());
  }
  // A gradient that is zero in exact arithmetic (a key projection's bias:
  // softmax ignores a constant added to a row of scores) is rounding noise
  // in both programs, compared to the largest result's scale.
  const double noise = 1e-6 * largest;
  double worst = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    EXPECT_LE(diffs[r], 1e-5 * norms[r] + noise) << GetParam() << " result " << r;
    if (norms[r] > noise)
      worst = std::max(worst, diffs[r] / norms[r]);
  }
  std::printf("%s: %d attentions under dropout raised; loss and %zu gradients within %.2e of the unraised ops\n",
              GetParam(), fused, want.size() - 1, worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AttentionDropout,
                         ::testing::Values("dropout_attention", "encoder_layers", "dropout_gpt2", "decoder_layers",
                                           "hf_gpt2", "hf_bert"),
                         [](const ::testing::TestParamInfo<const char *> &info) { return std::string(info.param); });

} // namespace
