//===- GradientRuleTest.cpp - every gradient rule against finite differences -===//
//
// Each case is a small float64 program: trainable parameters feed the op
// under test, whose result is weighted by a fixed random tensor and summed
// into the loss. train-autodiff's gradients, run through the interpreter,
// must equal central finite differences of the loss (h = 1e-6) for every
// element of every parameter, to 1e-6 absolute plus 1e-5 relative.
//
//===----------------------------------------------------------------------===//

#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/Execute/HostInterpreter.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/autodiff/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using colossal::execute::HostValue;

struct RuleCase {
  const char *name;
  /// train.parameter declarations of the inputs ({trainable} or not).
  const char *parameters;
  /// Ops reading the parameters and defining %y.
  const char *body;
  /// The type of %y.
  const char *resultType;
};

// clang-format off
const RuleCase kCases[] = {
  {"add_broadcast", "train.parameter @a : tensor<2x3xf64> {trainable}\n train.parameter @b : tensor<3xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n %b = train.param @b : tensor<3xf64>\n"
   "%y = train.add %a, %b : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"sub_broadcast", "train.parameter @a : tensor<2x3xf64> {trainable}\n train.parameter @b : tensor<2x1xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n %b = train.param @b : tensor<2x1xf64>\n"
   "%y = train.sub %a, %b : (tensor<2x3xf64>, tensor<2x1xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"mul_broadcast", "train.parameter @a : tensor<2x3xf64> {trainable}\n train.parameter @b : tensor<1x3xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n %b = train.param @b : tensor<1x3xf64>\n"
   "%y = train.mul %a, %b : (tensor<2x3xf64>, tensor<1x3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"div", "train.parameter @a : tensor<2x3xf64> {trainable}\n train.parameter @b : tensor<2x3xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n %b = train.param @b : tensor<2x3xf64>\n"
   "%two = train.constant dense<2.0> : tensor<f64>\n"
   "%bb = train.mul %b, %b : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%d = train.add %bb, %two : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>\n"
   "%y = train.div %a, %d : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"unary_neg_sin_cos_exp_tanh", "train.parameter @a : tensor<2x3xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n"
   "%n = train.neg %a : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%s = train.sin %n : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%c = train.cos %s : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%e = train.exp %c : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%y = train.tanh %e : (tensor<2x3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"relu", "train.parameter @a : tensor<3x4xf64> {trainable}",
   "%a = train.param @a : tensor<3x4xf64>\n %y = train.relu %a : (tensor<3x4xf64>) -> tensor<3x4xf64>", "tensor<3x4xf64>"},
  {"reshape_transpose", "train.parameter @a : tensor<2x3x4xf64> {trainable}",
   "%a = train.param @a : tensor<2x3x4xf64>\n"
   "%t = train.transpose %a {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf64>) -> tensor<4x2x3xf64>\n"
   "%y = train.reshape %t : (tensor<4x2x3xf64>) -> tensor<8x3xf64>", "tensor<8x3xf64>"},
  {"linear", "train.parameter @x : tensor<2x3x4xf64> {trainable}\n train.parameter @w : tensor<4x5xf64> {trainable}\n train.parameter @b : tensor<5xf64> {trainable}",
   "%x = train.param @x : tensor<2x3x4xf64>\n %w = train.param @w : tensor<4x5xf64>\n %b = train.param @b : tensor<5xf64>\n"
   "%y = train.linear %x, %w, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>", "tensor<2x3x5xf64>"},
  {"matmul_batched", "train.parameter @a : tensor<2x3x4xf64> {trainable}\n train.parameter @b : tensor<2x4x5xf64> {trainable}",
   "%a = train.param @a : tensor<2x3x4xf64>\n %b = train.param @b : tensor<2x4x5xf64>\n"
   "%y = train.matmul %a, %b : (tensor<2x3x4xf64>, tensor<2x4x5xf64>) -> tensor<2x3x5xf64>", "tensor<2x3x5xf64>"},
  {"matmul_broadcast_weight", "train.parameter @a : tensor<2x3x4xf64> {trainable}\n train.parameter @b : tensor<4x5xf64> {trainable}",
   "%a = train.param @a : tensor<2x3x4xf64>\n %b = train.param @b : tensor<4x5xf64>\n"
   "%y = train.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> tensor<2x3x5xf64>", "tensor<2x3x5xf64>"},
  {"gelu_erf_tanh_silu", "train.parameter @a : tensor<3x4xf64> {trainable}",
   "%a = train.param @a : tensor<3x4xf64>\n"
   "%g = train.gelu %a : (tensor<3x4xf64>) -> tensor<3x4xf64>\n"
   "%t = train.gelu %g {approximate = \"tanh\"} : (tensor<3x4xf64>) -> tensor<3x4xf64>\n"
   "%y = train.silu %t : (tensor<3x4xf64>) -> tensor<3x4xf64>", "tensor<3x4xf64>"},
  {"layer_norm", "train.parameter @x : tensor<3x8xf64> {trainable}\n train.parameter @s : tensor<8xf64> {trainable}\n train.parameter @b : tensor<8xf64> {trainable}",
   "%x = train.param @x : tensor<3x8xf64>\n %s = train.param @s : tensor<8xf64>\n %b = train.param @b : tensor<8xf64>\n"
   "%y = train.layer_norm %x, %s, %b {axis = 1 : i64} : (tensor<3x8xf64>, tensor<8xf64>, tensor<8xf64>) -> tensor<3x8xf64>", "tensor<3x8xf64>"},
  {"rms_norm", "train.parameter @x : tensor<3x8xf64> {trainable}\n train.parameter @s : tensor<8xf64> {trainable}",
   "%x = train.param @x : tensor<3x8xf64>\n %s = train.param @s : tensor<8xf64>\n"
   "%y = train.rms_norm %x, %s {axis = 1 : i64} : (tensor<3x8xf64>, tensor<8xf64>) -> tensor<3x8xf64>", "tensor<3x8xf64>"},
  {"attention", "train.parameter @q : tensor<2x4x3xf64> {trainable}\n train.parameter @k : tensor<2x4x3xf64> {trainable}\n train.parameter @v : tensor<2x4x3xf64> {trainable}",
   "%q = train.param @q : tensor<2x4x3xf64>\n %k = train.param @k : tensor<2x4x3xf64>\n %v = train.param @v : tensor<2x4x3xf64>\n"
   "%y = train.attention %q, %k, %v {scale = 0.5 : f32} : (tensor<2x4x3xf64>, tensor<2x4x3xf64>, tensor<2x4x3xf64>) -> tensor<2x4x3xf64>", "tensor<2x4x3xf64>"},
  {"attention_causal_masked", "train.parameter @q : tensor<2x3x3xf64> {trainable}\n train.parameter @k : tensor<2x4x3xf64> {trainable}\n train.parameter @v : tensor<2x4x2xf64> {trainable}",
   "%q = train.param @q : tensor<2x3x3xf64>\n %k = train.param @k : tensor<2x4x3xf64>\n %v = train.param @v : tensor<2x4x2xf64>\n"
   "%m = train.constant dense<[[0.0, -1.0, 0.5, 0.0], [0.0, 0.0, -2.0, 0.0], [1.0, 0.0, 0.0, 0.0]]> : tensor<3x4xf64>\n"
   "%y = train.attention %q, %k, %v, %m {scale = 0.7 : f32, causal = true} : (tensor<2x3x3xf64>, tensor<2x4x3xf64>, tensor<2x4x2xf64>, tensor<3x4xf64>) -> tensor<2x3x2xf64>", "tensor<2x3x2xf64>"},
  {"cross_entropy_ignore", "train.parameter @z : tensor<4x5xf64> {trainable}",
   "%z = train.param @z : tensor<4x5xf64>\n"
   "%l = train.constant dense<[1, -100, 4, 1]> : tensor<4xi64>\n"
   "%y = train.cross_entropy %z, %l {ignore_index = -100 : i64} : (tensor<4x5xf64>, tensor<4xi64>) -> tensor<f64>", "tensor<f64>"},
  {"nll_loss_weighted_mean", "train.parameter @z : tensor<4x5xf64> {trainable}",
   "%z = train.param @z : tensor<4x5xf64>\n"
   "%l = train.constant dense<[1, -100, 4, 1]> : tensor<4xi64>\n"
   "%w = train.constant dense<[0.5, 2.0, 1.0, 1.5, 0.25]> : tensor<5xf64>\n"
   "%y = train.nll_loss %z, %l, %w {ignore_index = -100 : i64} : (tensor<4x5xf64>, tensor<4xi64>, tensor<5xf64>) -> tensor<f64>", "tensor<f64>"},
  {"nll_loss_classes_axis1_none", "train.parameter @z : tensor<2x3x2xf64> {trainable}",
   "%z = train.param @z : tensor<2x3x2xf64>\n"
   "%l = train.constant dense<[[2, 0], [1, 2]]> : tensor<2x2xi64>\n"
   "%w = train.constant dense<[0.5, 2.0, 1.5]> : tensor<3xf64>\n"
   "%y = train.nll_loss %z, %l, %w {reduction = \"none\"} : (tensor<2x3x2xf64>, tensor<2x2xi64>, tensor<3xf64>) -> tensor<2x2xf64>", "tensor<2x2xf64>"},
  {"gather_repeated_negative", "train.parameter @t : tensor<5x3xf64> {trainable}",
   "%t = train.param @t : tensor<5x3xf64>\n"
   "%i = train.constant dense<[[1, 4], [-1, 1]]> : tensor<2x2xi64>\n"
   "%y = train.gather %t, %i {axis = 0 : i64} : (tensor<5x3xf64>, tensor<2x2xi64>) -> tensor<2x2x3xf64>", "tensor<2x2x3xf64>"},
  {"slice_strided", "train.parameter @a : tensor<4x6xf64> {trainable}",
   "%a = train.param @a : tensor<4x6xf64>\n"
   "%y = train.slice %a {starts = array<i64: 1, 0>, limits = array<i64: 4, 6>, steps = array<i64: 2, 3>} : (tensor<4x6xf64>) -> tensor<2x2xf64>", "tensor<2x2xf64>"},
  {"concat_split", "train.parameter @a : tensor<2x3xf64> {trainable}\n train.parameter @b : tensor<2x2xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n %b = train.param @b : tensor<2x2xf64>\n"
   "%c = train.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf64>, tensor<2x2xf64>) -> tensor<2x5xf64>\n"
   "%s:2 = train.split %c {axis = 1 : i64, sizes = array<i64: 1, 4>} : (tensor<2x5xf64>) -> (tensor<2x1xf64>, tensor<2x4xf64>)\n"
   "%y = train.mul %s#1, %s#1 : (tensor<2x4xf64>, tensor<2x4xf64>) -> tensor<2x4xf64>", "tensor<2x4xf64>"},
  {"dropout_reduce", "train.parameter @a : tensor<3x4xf64> {trainable}",
   "%a = train.param @a : tensor<3x4xf64>\n"
   "%d:2 = train.dropout %a {ratio = 0.0 : f32} : (tensor<3x4xf64>) -> (tensor<3x4xf64>, tensor<3x4xi1>)\n"
   "%s = train.reduce_sum %d#0 {axes = array<i64: 1>, keepdims = true} : (tensor<3x4xf64>) -> tensor<3x1xf64>\n"
   "%m = train.reduce_mean %a {axes = array<i64: 0>, keepdims = false} : (tensor<3x4xf64>) -> tensor<4xf64>\n"
   "%y = train.mul %s, %m : (tensor<3x1xf64>, tensor<4xf64>) -> tensor<3x4xf64>", "tensor<3x4xf64>"},
  {"einsum_outer_and_contract", "train.parameter @a : tensor<3xf64> {trainable}\n train.parameter @b : tensor<4xf64> {trainable}\n train.parameter @c : tensor<4x2xf64> {trainable}",
   "%a = train.param @a : tensor<3xf64>\n %b = train.param @b : tensor<4xf64>\n %c = train.param @c : tensor<4x2xf64>\n"
   "%o = train.einsum %a, %b {equation = \"i,j->ij\"} : (tensor<3xf64>, tensor<4xf64>) -> tensor<3x4xf64>\n"
   "%y = train.einsum %o, %c {equation = \"ij,jk->ik\"} : (tensor<3x4xf64>, tensor<4x2xf64>) -> tensor<3x2xf64>", "tensor<3x2xf64>"},
  {"broadcast", "train.parameter @a : tensor<1x3xf64> {trainable}",
   "%a = train.param @a : tensor<1x3xf64>\n %y = train.broadcast %a : (tensor<1x3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"conv_grouped_strided_padded", "train.parameter @x : tensor<2x4x5x5xf64> {trainable}\n train.parameter @w : tensor<6x2x3x2xf64> {trainable}\n train.parameter @b : tensor<6xf64> {trainable}",
   "%x = train.param @x : tensor<2x4x5x5xf64>\n %w = train.param @w : tensor<6x2x3x2xf64>\n %b = train.param @b : tensor<6xf64>\n"
   "%y = train.conv %x, %w, %b {strides = array<i64: 2, 1>, pads = array<i64: 1, 0, 1, 1>, dilations = array<i64: 1, 2>, group = 2 : i64} : (tensor<2x4x5x5xf64>, tensor<6x2x3x2xf64>, tensor<6xf64>) -> tensor<2x6x3x4xf64>", "tensor<2x6x3x4xf64>"},
  {"softmax_log_softmax", "train.parameter @a : tensor<3x4xf64> {trainable}",
   "%a = train.param @a : tensor<3x4xf64>\n"
   "%s = train.softmax %a {axis = 1 : i64} : (tensor<3x4xf64>) -> tensor<3x4xf64>\n"
   "%y = train.log_softmax %s {axis = 0 : i64} : (tensor<3x4xf64>) -> tensor<3x4xf64>", "tensor<3x4xf64>"},
  {"where_max_min", "train.parameter @a : tensor<2x3xf64> {trainable}\n train.parameter @b : tensor<3xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n %b = train.param @b : tensor<3xf64>\n"
   "%c = train.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>\n"
   "%w = train.where %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>\n"
   "%m = train.max %w, %b : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>\n"
   "%y = train.min %m, %a : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"pow_sqrt_reciprocal_log", "train.parameter @a : tensor<2x3xf64> {trainable}\n train.parameter @b : tensor<2x3xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n %b = train.param @b : tensor<2x3xf64>\n"
   "%one = train.constant dense<1.5> : tensor<f64>\n"
   "%aa = train.mul %a, %a : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%base = train.add %aa, %one : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>\n"
   "%q = train.pow %base, %b : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%r = train.sqrt %q : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%s = train.reciprocal %r : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%t = train.add %s, %one : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>\n"
   "%y = train.log %t : (tensor<2x3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"sigmoid_abs_erf", "train.parameter @a : tensor<2x3xf64> {trainable}",
   "%a = train.param @a : tensor<2x3xf64>\n"
   "%s = train.sigmoid %a : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%e = train.erf %a : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%b = train.abs %a : (tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%m = train.mul %s, %e : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>\n"
   "%y = train.add %m, %b : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>", "tensor<2x3xf64>"},
  {"reduce_max", "train.parameter @a : tensor<3x4xf64> {trainable}",
   "%a = train.param @a : tensor<3x4xf64>\n"
   "%y = train.reduce_max %a {axes = array<i64: 1>, keepdims = false} : (tensor<3x4xf64>) -> tensor<3xf64>", "tensor<3xf64>"},
  {"gemm_transposed_with_c", "train.parameter @a : tensor<4x3xf64> {trainable}\n train.parameter @b : tensor<5x4xf64> {trainable}\n train.parameter @c : tensor<5xf64> {trainable}",
   "%a = train.param @a : tensor<4x3xf64>\n %b = train.param @b : tensor<5x4xf64>\n %c = train.param @c : tensor<5xf64>\n"
   "%y = train.gemm %a, %b, %c {trans_a = true, trans_b = true, alpha = 0.5 : f32, beta = 2.0 : f32} : (tensor<4x3xf64>, tensor<5x4xf64>, tensor<5xf64>) -> tensor<3x5xf64>", "tensor<3x5xf64>"},
  {"trilu", "train.parameter @a : tensor<3x4xf64> {trainable}",
   "%a = train.param @a : tensor<3x4xf64>\n"
   "%y = train.trilu %a {upper = false, k = 1 : i64} : (tensor<3x4xf64>) -> tensor<3x4xf64>", "tensor<3x4xf64>"},
};
// clang-format on

int rankOf(const std::string &type) {
  return int(std::count(type.begin(), type.end(), 'x')); // "tensor<2x3xf64>": 2
}

class GradientRule : public ::testing::TestWithParam<RuleCase> {};

TEST_P(GradientRule, MatchesCentralFiniteDifferences) {
  const RuleCase &c = GetParam();
  std::string axes;
  for (int d = 0; d < rankOf(c.resultType); ++d)
    axes += (d ? ", " : "") + std::to_string(d);
  std::string text = std::string("module {\n ") + c.parameters + "\n train.parameter @weight : " + c.resultType +
                     "\n func.func @forward() -> (tensor<f64> {train.name = \"loss\"}) {\n " + c.body +
                     "\n %weight = train.param @weight : " + c.resultType + "\n %p = train.mul %y, %weight : (" +
                     c.resultType + ", " + c.resultType + ") -> " + c.resultType +
                     "\n %loss = train.reduce_sum %p {axes = array<i64" + (axes.empty() ? "" : ": " + axes) +
                     ">, keepdims = false} : (" + c.resultType + ") -> tensor<f64>\n return %loss : tensor<f64>\n }\n}\n";
  mlir::MLIRContext context;
  context.loadDialect<colossal::train::TrainDialect, mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    ADD_FAILURE() << diag.str();
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  ASSERT_TRUE(module) << text;
  mlir::PassManager pm(&context);
  pm.addPass(colossal::autodiff::createAutodiffPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));

  // Random values for every parameter (trainable or not).
  std::mt19937 engine(11);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::map<std::string, HostValue> parameters;
  std::vector<std::string> trainable;
  for (auto p : module->getOps<colossal::train::ParameterOp>()) {
    auto type = mlir::cast<mlir::RankedTensorType>(p.getType());
    HostValue v;
    v.shape.assign(type.getShape().begin(), type.getShape().end());
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      v.data.push_back(dist(engine));
    parameters[p.getSymName().str()] = v;
    if (p.getTrainable())
      trainable.push_back(p.getSymName().str());
  }
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  auto both = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  std::vector<HostValue> results;
  std::string error;
  ASSERT_TRUE(colossal::execute::interpret(both, {}, parameters, results, error)) << error;
  ASSERT_EQ(results.size(), trainable.size() + 1);
  auto lossAt = [&](const std::map<std::string, HostValue> &values) {
    std::vector<HostValue> out;
    std::string e;
    EXPECT_TRUE(colossal::execute::interpret(forward, {}, values, out, e)) << e;
    return out.empty() ? 0.0 : out[0].data[0];
  };
  const double h = 1e-6;
  for (size_t t = 0; t < trainable.size(); ++t) {
    std::map<std::string, HostValue> shifted = parameters;
    HostValue &p = shifted[trainable[t]];
    for (size_t i = 0; i < p.data.size(); ++i) {
      double saved = p.data[i];
      p.data[i] = saved + h;
      double plus = lossAt(shifted);
      p.data[i] = saved - h;
      double minus = lossAt(shifted);
      p.data[i] = saved;
      double numeric = (plus - minus) / (2 * h), analytic = results[t + 1].data[i];
      EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::fabs(numeric))
          << c.name << ": d loss / d " << trainable[t] << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, GradientRule, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RuleCase> &info) { return std::string(info.param.name); });

} // namespace
