//===- HostSource.cpp - the training step as host C++ ---------------------===//

#include "colossal/Codegen/HostSource.h"

#include "colossal/Codegen/CompiledOptimizer.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <map>
#include <set>

namespace colossal::codegen {

using namespace mlir;
using namespace colossal::train;
using namespace colossal::dist;

namespace {

/// A float as a C++ float literal.
std::string floatLiteral(double value) {
  if (std::isnan(value))
    return "std::numeric_limits<float>::quiet_NaN()";
  if (std::isinf(value))
    return value > 0 ? "std::numeric_limits<float>::infinity()" : "-std::numeric_limits<float>::infinity()";
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.9g", value);
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  return text + "f";
}

std::string shapeLiteral(ArrayRef<int64_t> shape) {
  std::string text = "Shape{";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "}";
}

std::string quoted(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "\"";
}

/// The element kind the host target stores a value as.
enum class Kind { Float, Integer };

class Emitter {
public:
  Emitter(func::FuncOp step, llvm::raw_ostream &os, bool device, std::vector<ExternalConstant> *external)
      : step_(step), os_(os), device_(device), external_(external) {}

  LogicalResult emitStep(const std::map<std::string, size_t> &parameterIndex,
                         const std::vector<std::string> &trainableOrder);
  /// A pipeline stage's function (passes/partition/SplitStages.h) as
  /// `void NAME(colossal::rt::StageCall &call)`.
  LogicalResult emitStage(const std::string &name, const std::map<std::string, size_t> &inputIndex,
                          const std::map<std::string, size_t> &parameterIndex,
                          const std::map<std::string, size_t> &trainableIndex);

  /// The step's values' high-water mark in bytes, in the order the program
  /// holds and frees them (what StepMemory measures at run time), and the
  /// bytes of every value it defines.
  int64_t plannedPeakBytes() const { return peak_; }
  int64_t valueBytes() const { return total_; }

private:
  FailureOr<Kind> kindOf(Value v, Operation *user) {
    Type element = cast<ShapedType>(v.getType()).getElementType();
    if (element.isF32() || element.isBF16() || element.isF16())
      return Kind::Float;
    if (isa<IntegerType>(element))
      return Kind::Integer;
    return user->emitError() << "emitted programs compute in float32, bf16 or fp16 and integers; this op has a "
                             << "value of type " << v.getType();
  }

  /// The 16-bit type a float value is stored in, or "" for float32: its
  /// elements are rounded to it after the op computes in float32.
  static std::string storageOf(Value v) {
    Type element = cast<ShapedType>(v.getType()).getElementType();
    return element.isBF16() ? "colossal::rt::DType::BF16" : element.isF16() ? "colossal::rt::DType::F16" : "";
  }

  std::string shape(Value v) { return shapeLiteral(cast<ShapedType>(v.getType()).getShape()); }

  /// Bytes a value occupies on either target: float32 or int64 elements.
  static int64_t bytesOf(Value v) {
    auto type = cast<ShapedType>(v.getType());
    return type.getNumElements() * (isa<IntegerType>(type.getElementType()) ? 8 : 4);
  }
  /// The value `name` now belongs to the step: charged until freed. A
  /// value nothing reads is freed at once, unless `keepUnused` (the caller
  /// frees it after holding its op's other results).
  void hold(Value v, const std::string &name, bool keepUnused = false) {
    owned_.insert(v);
    os_ << "  memory.hold(" << name << ");\n";
    held_ += bytesOf(v);
    total_ += bytesOf(v);
    peak_ = std::max(peak_, held_);
    if (v.use_empty() && !keepUnused)
      free(v);
  }
  void free(Value v) {
    os_ << "  memory.free(" << ref(v) << ");\n";
    held_ -= bytesOf(v);
  }
  /// After `op`: frees the values it read last (an operand read twice
  /// once) and releases the parameter reads it used last.
  void freeAfterLastUse(Operation *op) {
    llvm::SmallPtrSet<Value, 4> done;
    for (Value operand : op->getOperands()) {
      if (lastUse_.lookup(operand) != op || !done.insert(operand).second)
        continue;
      if (owned_.contains(operand))
        free(operand);
      else if (fetched_.count(operand))
        release(operand);
    }
  }
  /// The last use of a parameter read: the step is done with the tensor.
  void release(Value v) { os_ << "  parameters.release(" << fetched_.lookup(v) << "); // " << ref(v) << "\n"; }
  std::string ref(Value v) { return names_.lookup(v); }
  std::string optionalRef(Value v) { return v ? "&" + ref(v) : "nullptr"; }
  /// The op and, when it came from a named ONNX node, that node.
  std::string describe(Operation *op) {
    std::string text = op->getName().getStringRef().str();
    if (auto named = dyn_cast<NameLoc>(op->getLoc()))
      text += " (node " + named.getName().str() + ")";
    return quoted(text);
  }

  /// Declares `result = expression` and checks the result's shape and kind;
  /// its name, or failure.
  FailureOr<std::string> declare(Operation *op, Value result, const std::string &expression) {
    FailureOr<Kind> kind = kindOf(result, op);
    if (failed(kind))
      return failure();
    std::string name = "v" + std::to_string(counter_++);
    names_[result] = name;
    os_ << "  Tensor " << name << " = " << expression << ";\n";
    os_ << "  expect(" << name << ", " << shape(result) << ", " << (*kind == Kind::Integer ? "true" : "false") << ", "
        << describe(op) << ");\n";
    return name;
  }

  /// Declares a new value (rounded to its 16-bit type, if any) and holds it.
  LogicalResult define(Operation *op, Value result, const std::string &expression) {
    std::string storage = storageOf(result);
    FailureOr<std::string> name =
        declare(op, result, storage.empty() ? expression : "roundTo(" + expression + ", " + storage + ")");
    if (failed(name))
      return failure();
    hold(result, *name);
    return success();
  }

  /// Declares the results of a multi-result op from a vector expression.
  /// They all exist from the call on: every one is held before the unused
  /// ones are freed, as the op's memory really is.
  LogicalResult defineAll(Operation *op, const std::string &expression) {
    std::string list = "r" + std::to_string(counter_++);
    os_ << "  std::vector<Tensor> " << list << " = " << expression << ";\n";
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      std::string element = "std::move(" + list + "[" + std::to_string(i) + "])", storage = storageOf(result);
      FailureOr<std::string> name =
          declare(op, result, storage.empty() ? element : "roundTo(" + element + ", " + storage + ")");
      if (failed(name))
        return failure();
      hold(result, *name, /*keepUnused=*/true);
    }
    for (Value result : op->getResults())
      if (result.use_empty())
        free(result);
    return success();
  }

  /// `op`'s result: its operand under another shape. An operand this op
  /// reads last moves into the result (no copy, the same bytes charged).
  LogicalResult relabel(Operation *op) {
    Value x = op->getOperand(0), result = op->getResult(0);
    return reuse(op, "reshape(std::move(" + ref(x) + "), " + shape(result) + ")",
                 "reshape(" + ref(x) + ", " + shape(result) + ")", /*computes=*/false);
  }

  /// `op`'s result made in its operand's storage (`inPlace`, which moves
  /// the operand) when this op reads the operand last: the same bytes
  /// charged, no second tensor. Otherwise `copying`, a new value; so too
  /// when the op `computes` values that a 16-bit type must round.
  LogicalResult reuse(Operation *op, const std::string &inPlace, const std::string &copying, bool computes) {
    Value x = op->getOperand(0), result = op->getResult(0);
    if (!owned_.contains(x) || lastUse_.lookup(x) != op || result.use_empty() ||
        (computes && !storageOf(result).empty()) || bytesOf(x) != bytesOf(result))
      return define(op, result, copying);
    if (failed(declare(op, result, inPlace)))
      return failure();
    owned_.erase(x);
    owned_.insert(result);
    return success();
  }

  LogicalResult emitConstant(ConstantOp op);
  LogicalResult emitOp(Operation *op, const std::map<std::string, size_t> &parameterIndex);

  func::FuncOp step_;
  llvm::raw_ostream &os_;
  llvm::DenseMap<Value, std::string> names_;
  /// Values the step defines (not references to its arguments).
  llvm::DenseSet<Value> owned_;
  /// Host parameter reads: the parameter's index, released after the last use.
  llvm::DenseMap<Value, size_t> fetched_;
  /// The op reading each value last.
  llvm::DenseMap<Value, Operation *> lastUse_;
  int64_t held_ = 0, peak_ = 0, total_ = 0;
  int counter_ = 0;
  /// The CUDA target: values live on the device.
  bool device_ = false;
  /// Where constants too large for the source go (null: all inline).
  std::vector<ExternalConstant> *external_ = nullptr;
};

LogicalResult Emitter::emitConstant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitError() << "the host target needs dense constants";
  FailureOr<Kind> kind = kindOf(op.getResult(), op);
  if (failed(kind))
    return failure();
  int64_t n = dense.getNumElements();
  std::string values;
  if (external_ && !dense.isSplat() && n > kInlineConstantElements) {
    // Beside the program, not a literal the C++ compiler has to parse.
    std::string name = "constant" + std::to_string(external_->size());
    external_->push_back(ExternalConstant{name, dense});
    std::string count = std::to_string(n);
    return define(op, op.getResult(),
                  *kind == Kind::Float ? "Tensor::ofFloats(" + shape(op.getResult()) +
                                             ", colossal::rt::programFloats(\"" + name + "\", " + count + "))"
                                       : "Tensor::ofInts(" + shape(op.getResult()) + ", colossal::rt::programInts(\"" +
                                             name + "\", " + count + "))");
  }
  if (*kind == Kind::Float) {
    if (dense.isSplat()) {
      values = "std::vector<float>(" + std::to_string(n) + ", " +
               floatLiteral(dense.getSplatValue<APFloat>().convertToDouble()) + ")";
    } else {
      values = "std::vector<float>{";
      int64_t i = 0;
      for (APFloat v : dense.getValues<APFloat>())
        values += (i++ ? ", " : "") + floatLiteral(v.convertToDouble());
      values += "}";
    }
    return define(op, op.getResult(), "Tensor::ofFloats(" + shape(op.getResult()) + ", " + values + ")");
  }
  bool boolean = dense.getElementType().isInteger(1);
  auto asInt = [&](const APInt &v) { return std::to_string(boolean ? int64_t(v.getBoolValue()) : v.getSExtValue()); };
  if (dense.isSplat()) {
    values = "std::vector<int64_t>(" + std::to_string(n) + ", " + asInt(dense.getSplatValue<APInt>()) + ")";
  } else {
    values = "std::vector<int64_t>{";
    int64_t i = 0;
    for (APInt v : dense.getValues<APInt>())
      values += (i++ ? ", " : "") + asInt(v);
    values += "}";
  }
  return define(op, op.getResult(), "Tensor::ofInts(" + shape(op.getResult()) + ", " + values + ")");
}

std::string ignoreLiteral(std::optional<uint64_t> ignore) {
  return ignore ? "std::optional<int64_t>(" + std::to_string(int64_t(*ignore)) + ")" : "std::nullopt";
}

/// A loss split by tokens whose classes a tensor axis splits too: the
/// trailing arguments naming that axis and the classes.
template <typename LossOp> std::string vocabularyAxisOf(LossOp loss) {
  std::optional<StringRef> axis = loss.getMeshAxis();
  if (!axis)
    return "";
  return ", \"" + axis->str() + "\", " + std::to_string(loss.getClasses() ? int64_t(*loss.getClasses()) : -1);
}

LogicalResult Emitter::emitOp(Operation *op, const std::map<std::string, size_t> &parameterIndex) {
  auto in = [&](unsigned i) { return ref(op->getOperand(i)); };
  auto out = [&]() { return shape(op->getResult(0)); };
  auto one = [&](const std::string &expression) { return define(op, op->getResult(0), expression); };
  auto binaryOp = [&](const char *kind) {
    bool integer = isa<IntegerType>(cast<ShapedType>(op->getResult(0).getType()).getElementType());
    return one(std::string("binary(Binary::") + kind + ", " + in(0) + ", " + in(1) + ", " + out() + ", " +
               (integer ? "true" : "false") + ")");
  };
  auto compareOp = [&](const char *kind) {
    return one(std::string("compare(Compare::") + kind + ", " + in(0) + ", " + in(1) + ", " + out() + ")");
  };
  auto unaryOp = [&](const char *kind) { return one(std::string("unary(Unary::") + kind + ", " + in(0) + ")"); };
  // Which slice of a split tensor this rank holds.
  auto sliceOf = [&](StringRef axis) {
    return "collectives.rankOn(" + quoted(axis) + "), collectives.ranksOn(" + quoted(axis) + ")";
  };
  if (auto p = dyn_cast<ParamOp>(op)) {
    auto it = parameterIndex.find(p.getName().str());
    if (it == parameterIndex.end())
      return op->emitError() << "reads @" << p.getName() << ", which the module does not declare";
    std::string name = "v" + std::to_string(counter_++);
    names_[p.getResult()] = name;
    // A read fetches the parameter (under ZeRO-3 an all-gather) until its
    // last use; on the device the upload is the step's own copy.
    if (device_) {
      os_ << "  Tensor " << name << " = upload(parameters.fetch(" << it->second << ")); // @" << p.getName() << "\n";
      os_ << "  parameters.release(" << it->second << ");\n";
      hold(p.getResult(), name);
    } else {
      os_ << "  const Tensor &" << name << " = parameters.fetch(" << it->second << "); // @" << p.getName() << "\n";
      fetched_[p.getResult()] = it->second;
      if (p.getResult().use_empty())
        release(p.getResult());
    }
    return success();
  }
  if (auto c = dyn_cast<ConstantOp>(op))
    return emitConstant(c);
  if (isa<AddOp>(op)) return binaryOp("Add");
  if (isa<SubOp>(op)) return binaryOp("Sub");
  if (isa<MulOp>(op)) return binaryOp("Mul");
  if (isa<DivOp>(op)) return binaryOp("Div");
  if (isa<PowOp>(op)) return binaryOp("Pow");
  if (isa<MaxOp>(op)) return binaryOp("Max");
  if (isa<MinOp>(op)) return binaryOp("Min");
  if (isa<EqualOp>(op)) return compareOp("Equal");
  if (isa<LessOp>(op)) return compareOp("Less");
  if (isa<GreaterOp>(op)) return compareOp("Greater");
  if (isa<SqrtOp>(op)) return unaryOp("Sqrt");
  if (isa<ReciprocalOp>(op)) return unaryOp("Reciprocal");
  if (isa<NegOp>(op)) return unaryOp("Neg");
  if (isa<AbsOp>(op)) return unaryOp("Abs");
  if (isa<ExpOp>(op)) return unaryOp("Exp");
  if (isa<LogOp>(op)) return unaryOp("Log");
  if (isa<ErfOp>(op)) return unaryOp("Erf");
  if (isa<TanhOp>(op)) return unaryOp("Tanh");
  if (isa<SigmoidOp>(op)) return unaryOp("Sigmoid");
  if (isa<ReluOp>(op)) return unaryOp("Relu");
  if (isa<SinOp>(op)) return unaryOp("Sin");
  if (isa<CosOp>(op)) return unaryOp("Cos");
  if (isa<SiluOp>(op)) return unaryOp("Silu");
  if (auto g = dyn_cast<GeluOp>(op))
    return unaryOp(g.getApproximate() == "tanh" ? "GeluTanh" : "Gelu");
  if (isa<WhereOp>(op))
    return one("where(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + out() + ")");
  if (auto c = dyn_cast<CastOp>(op)) {
    Type to = c.getTo();
    if (!to.isF32() && !to.isBF16() && !to.isF16() && !isa<IntegerType>(to))
      return op->emitError() << "emitted programs compute in float32, bf16 or fp16; cannot cast to " << to;
    bool toBool = to.isInteger(1), toInteger = isa<IntegerType>(to) && !toBool;
    return one("cast(" + in(0) + ", " + (toInteger ? "true" : "false") + ", " + (toBool ? "true" : "false") + ")");
  }
  if (isa<MatMulOp>(op))
    return one("matmul(" + in(0) + ", " + in(1) + ", " + out() + ")");
  if (auto g = dyn_cast<GemmOp>(op))
    return one("gemm(" + in(0) + ", " + in(1) + ", " + optionalRef(g.getC()) + ", " +
               (g.getTransA() ? "true" : "false") + ", " + (g.getTransB() ? "true" : "false") + ", " +
               floatLiteral(g.getAlpha().convertToDouble()) + ", " + floatLiteral(g.getBeta().convertToDouble()) +
               ", " + out() + ")");
  if (auto l = dyn_cast<LinearOp>(op))
    return one("linear(" + in(0) + ", " + in(1) + ", " + optionalRef(l.getBias()) + ", " + out() +
               (l.getTransposeWeight() ? ", true" : "") + ")");
  if (auto c = dyn_cast<ConvOp>(op))
    return one("conv(" + in(0) + ", " + in(1) + ", " + optionalRef(c.getBias()) + ", " + shapeLiteral(c.getStrides()) + ", " +
               shapeLiteral(c.getPads()) + ", " + shapeLiteral(c.getDilations()) + ", " + std::to_string(int64_t(c.getGroup())) +
               ", " + out() + ")");
  if (auto e = dyn_cast<EinsumOp>(op)) {
    std::string list = "{";
    for (auto [i, v] : llvm::enumerate(e.getInputs()))
      list += (i ? ", &" : "&") + ref(v);
    return one("einsum(" + quoted(e.getEquation()) + ", " + list + "}, " + out() + ")");
  }
  if (auto s = dyn_cast<SoftmaxOp>(op))
    return one("softmax(" + in(0) + ", " + std::to_string(int64_t(s.getAxis())) + ", false)");
  if (auto s = dyn_cast<LogSoftmaxOp>(op))
    return one("softmax(" + in(0) + ", " + std::to_string(int64_t(s.getAxis())) + ", true)");
  if (auto n = dyn_cast<LayerNormOp>(op))
    return one("layerNorm(" + in(0) + ", " + optionalRef(n.getScale()) + ", " + optionalRef(n.getBias()) + ", " +
               std::to_string(int64_t(n.getAxis())) + ", " + floatLiteral(n.getEpsilon().convertToDouble()) + ")");
  if (auto n = dyn_cast<RmsNormOp>(op))
    return one("rmsNorm(" + in(0) + ", " + optionalRef(n.getScale()) + ", " + std::to_string(int64_t(n.getAxis())) +
               ", " + floatLiteral(n.getEpsilon().convertToDouble()) + ")");
  if (auto a = dyn_cast<AttentionOp>(op)) {
    if (!a.getDropout().isZero())
      return op->emitError() << "attention dropout has no host lowering yet";
    if (std::optional<StringRef> axis = a.getRingAxis())
      return one("ringAttention(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + optionalRef(a.getMask()) + ", " +
                 floatLiteral(a.getScale().convertToDouble()) + ", " + (a.getCausal() ? "true" : "false") +
                 ", collectives, " + quoted(*axis) + ")");
    return one("attention(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + optionalRef(a.getMask()) + ", " +
               floatLiteral(a.getScale().convertToDouble()) + ", " + (a.getCausal() ? "true" : "false") + ")");
  }
  if (auto r = dyn_cast<ReduceSumOp>(op))
    return one("reduce(ReduceKind::Sum, " + in(0) + ", " + shapeLiteral(r.getAxes()) + ", " + out() + ")");
  if (auto r = dyn_cast<ReduceMeanOp>(op))
    return one("reduce(ReduceKind::Mean, " + in(0) + ", " + shapeLiteral(r.getAxes()) + ", " + out() + ")");
  if (auto r = dyn_cast<ReduceMaxOp>(op))
    return one("reduce(ReduceKind::Max, " + in(0) + ", " + shapeLiteral(r.getAxes()) + ", " + out() + ")");
  if (auto d = dyn_cast<DropoutOp>(op); d && d.getMeshAxis()) {
    // The rank's tokens of a dropout over the whole tensor: the key counts
    // the whole tensor's elements.
    std::string axis = quoted(*d.getMeshAxis());
    return defineAll(op, "dropoutOfSlice(" + in(0) + ", " + floatLiteral(d.getRatio().convertToDouble()) +
                             ", random.dropoutKey(" + std::to_string(int64_t(d.getSite())) + ", " +
                             std::to_string(cast<ShapedType>(d.getInput().getType()).getNumElements()) +
                             " * collectives.ranksOn(" + axis + ")), " + std::to_string(int64_t(*d.getMeshDim())) +
                             ", collectives.rankOn(" + axis + "), collectives.ranksOn(" + axis + "))");
  }
  if (auto d = dyn_cast<DropoutOp>(op))
    return defineAll(op, "dropout(" + in(0) + ", " + floatLiteral(d.getRatio().convertToDouble()) +
                             ", random.dropoutKey(" + std::to_string(int64_t(d.getSite())) + ", " +
                             std::to_string(cast<ShapedType>(d.getInput().getType()).getNumElements()) + "))");
  if (auto l = dyn_cast<CrossEntropyOp>(op)) {
    if (std::optional<StringRef> axis = l.getTokenAxis())
      return one("tokenSplitCrossEntropy(" + in(0) + ", " + in(1) + ", " + ignoreLiteral(l.getIgnoreIndex()) + ", " +
                 quoted(l.getReduction()) + ", collectives, " + quoted(*axis) + vocabularyAxisOf(l) + ")");
    if (std::optional<StringRef> axis = l.getMeshAxis())
      return one("vocabularyParallelCrossEntropy(" + in(0) + ", " + in(1) + ", " + ignoreLiteral(l.getIgnoreIndex()) +
                 ", " + quoted(l.getReduction()) + ", collectives, " + quoted(*axis) + ", " +
                 std::to_string(l.getClasses() ? int64_t(*l.getClasses()) : int64_t(-1)) + ")");
    return one("crossEntropy(" + in(0) + ", " + in(1) + ", " + ignoreLiteral(l.getIgnoreIndex()) + ", " +
               quoted(l.getReduction()) + ")");
  }
  if (auto l = dyn_cast<NegativeLogLikelihoodLossOp>(op))
    return one("nllLoss(" + in(0) + ", " + in(1) + ", " + optionalRef(l.getWeights()) + ", " +
               ignoreLiteral(l.getIgnoreIndex()) + ", " + quoted(l.getReduction()) + ")");
  if (auto g = dyn_cast<GatherOp>(op)) {
    if (std::optional<StringRef> axis = g.getMeshAxis())
      return one("gatherFromSlice(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " +
                 sliceOf(*axis) + ", " + out() + ")");
    return one("gather(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " + out() + ")");
  }
  if (auto s = dyn_cast<SliceOp>(op))
    return one("slice(" + in(0) + ", " + shapeLiteral(s.getStarts()) + ", " + shapeLiteral(s.getSteps()) + ", " + out() + ")");
  if (auto c = dyn_cast<ConcatOp>(op)) {
    std::string list = "{";
    for (auto [i, v] : llvm::enumerate(c.getInputs()))
      list += (i ? ", &" : "&") + ref(v);
    return one("concat(" + list + "}, " + std::to_string(int64_t(c.getAxis())) + ", " + out() + ")");
  }
  if (auto s = dyn_cast<SplitOp>(op)) {
    std::string shapes = "{";
    for (auto [i, r] : llvm::enumerate(s.getResults()))
      shapes += (i ? ", " : "") + shape(r);
    return defineAll(op, "split(" + in(0) + ", " + std::to_string(int64_t(s.getAxis())) + ", " + shapes + "})");
  }
  // A reshape relabels its input; the copy to the tensor axis's ranks is
  // the identity (its gradient is the all-reduce).
  if (isa<ReshapeOp, CopyToRanksOp>(op))
    return relabel(op);
  if (isa<ReshardOp>(op))
    return op->emitError() << "a resharding reaches the emitter: run train-lower-resharding first";
  if (auto g = dyn_cast<AllGatherOp>(op))
    return one("collectives.allGather(" + in(0) + ", " + quoted(g.getAxis()) + ", " +
               std::to_string(int64_t(g.getDim())) + ")");
  if (auto a = dyn_cast<AllToAllOp>(op))
    return one("collectives.allToAll(" + in(0) + ", " + quoted(a.getAxis()) + ", " +
               std::to_string(int64_t(a.getSplitDim())) + ", " + std::to_string(int64_t(a.getConcatDim())) + ")");
  if (auto r = dyn_cast<ReduceScatterOp>(op))
    return one("collectives.reduceScatter(" + in(0) + ", " + quoted(r.getAxis()) + ", " +
               std::to_string(int64_t(r.getDim())) + ")");
  if (auto r = dyn_cast<RankSliceOp>(op)) {
    // The slice starts at the rank's index times its size along `dim`.
    auto type = cast<ShapedType>(r.getType());
    std::string starts = "Shape{", steps = "Shape{";
    for (int64_t d = 0; d < type.getRank(); ++d) {
      starts += std::string(d ? ", " : "") +
                (d == int64_t(r.getDim()) ? "collectives.rankOn(" + quoted(r.getAxis()) + ") * " +
                                                std::to_string(type.getDimSize(d))
                                          : "0");
      steps += std::string(d ? ", " : "") + "1";
    }
    return one("slice(" + in(0) + ", " + starts + "}, " + steps + "}, " + out() + ")");
  }
  if (auto r = dyn_cast<AllReduceOp>(op)) {
    // A sum is made in the storage of the operand it reads last (a weight
    // gradient's partial sums, a row-parallel layer's output).
    return reuse(op, "collectives.allReduceInPlace(std::move(" + in(0) + "), " + quoted(r.getAxis()) + ")",
                 "collectives.allReduce(" + in(0) + ", " + quoted(r.getAxis()) + ")", /*computes=*/true);
  }
  if (auto t = dyn_cast<TransposeOp>(op))
    return one("transpose(" + in(0) + ", " + shapeLiteral(t.getPerm()) + ")");
  if (isa<BroadcastOp>(op))
    return one("broadcast(" + in(0) + ", " + out() + ")");
  if (auto t = dyn_cast<TriluOp>(op))
    return one("trilu(" + in(0) + ", " + (t.getUpper() ? "true" : "false") + ", " + std::to_string(int64_t(t.getK())) +
               ")");
  if (auto g = dyn_cast<GeluGradOp>(op))
    return one("geluGrad(" + in(0) + ", " + in(1) + ", " + (g.getApproximate() == "tanh" ? "true" : "false") + ")");
  if (isa<SiluGradOp>(op))
    return one("siluGrad(" + in(0) + ", " + in(1) + ")");
  if (auto n = dyn_cast<LayerNormGradOp>(op))
    return defineAll(op, "layerNormGrad(" + ref(n.getInput()) + ", " + optionalRef(n.getScale()) + ", " +
                             ref(n.getResultGrad()) + ", " + std::to_string(int64_t(n.getAxis())) + ", " +
                             floatLiteral(n.getEpsilon().convertToDouble()) + ", " +
                             (n.getHasBias() ? "true" : "false") + ", " + std::to_string(op->getNumResults()) + ")");
  if (auto n = dyn_cast<RmsNormGradOp>(op))
    return defineAll(op, "rmsNormGrad(" + ref(n.getInput()) + ", " + optionalRef(n.getScale()) + ", " +
                             ref(n.getResultGrad()) + ", " + std::to_string(int64_t(n.getAxis())) + ", " +
                             floatLiteral(n.getEpsilon().convertToDouble()) + ", " +
                             std::to_string(op->getNumResults()) + ")");
  if (auto a = dyn_cast<AttentionGradOp>(op)) {
    if (std::optional<StringRef> axis = a.getRingAxis())
      return defineAll(op, "ringAttentionGrad(" + ref(a.getQuery()) + ", " + ref(a.getKey()) + ", " +
                               ref(a.getValue()) + ", " + optionalRef(a.getMask()) + ", " + ref(a.getResultGrad()) +
                               ", " + floatLiteral(a.getScale().convertToDouble()) + ", " +
                               (a.getCausal() ? "true" : "false") + ", collectives, " + quoted(*axis) + ")");
    return defineAll(op, "attentionGrad(" + ref(a.getQuery()) + ", " + ref(a.getKey()) + ", " + ref(a.getValue()) +
                             ", " + optionalRef(a.getMask()) + ", " + ref(a.getResultGrad()) + ", " + floatLiteral(a.getScale().convertToDouble()) +
                             ", " + (a.getCausal() ? "true" : "false") + ")");
  }
  if (auto c = dyn_cast<CrossEntropyGradOp>(op)) {
    if (std::optional<StringRef> axis = c.getTokenAxis())
      return one("tokenSplitCrossEntropyGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " +
                 ignoreLiteral(c.getIgnoreIndex()) + ", " + quoted(c.getReduction()) + ", collectives, " +
                 quoted(*axis) + vocabularyAxisOf(c) + ")");
    if (std::optional<StringRef> axis = c.getMeshAxis())
      return one("vocabularyParallelCrossEntropyGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " +
                 ignoreLiteral(c.getIgnoreIndex()) + ", " + quoted(c.getReduction()) + ", collectives, " +
                 quoted(*axis) + ", " + std::to_string(c.getClasses() ? int64_t(*c.getClasses()) : int64_t(-1)) + ")");
    return one("crossEntropyGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + ignoreLiteral(c.getIgnoreIndex()) +
               ", " + quoted(c.getReduction()) + ")");
  }
  if (auto n = dyn_cast<NllLossGradOp>(op))
    return one("nllLossGrad(" + out() + ", " + ref(n.getLabels()) + ", " + optionalRef(n.getWeights()) + ", " +
               ref(n.getLossGrad()) + ", " + ignoreLiteral(n.getIgnoreIndex()) + ", " + quoted(n.getReduction()) + ")");
  if (auto g = dyn_cast<GatherGradOp>(op)) {
    if (std::optional<StringRef> axis = g.getMeshAxis())
      return one("gatherFromSliceGrad(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " +
                 sliceOf(*axis) + ", " + out() + ")");
    return one("gatherGrad(" + in(0) + ", " + in(1) + ", " + std::to_string(int64_t(g.getAxis())) + ", " + out() +
               ")");
  }
  if (auto s = dyn_cast<SliceGradOp>(op))
    return one("sliceGrad(" + in(0) + ", " + shapeLiteral(s.getStarts()) + ", " + shapeLiteral(s.getSteps()) + ", " + out() + ")");
  if (auto c = dyn_cast<ConvGradOp>(op))
    return defineAll(op, "convGrad(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + shapeLiteral(c.getStrides()) + ", " +
                             shapeLiteral(c.getPads()) + ", " + shapeLiteral(c.getDilations()) + ", " +
                             std::to_string(int64_t(c.getGroup())) + ")");
  return op->emitError() << "has no host lowering yet (the interpreter runs it; emitted programs cannot)";
}

LogicalResult Emitter::emitStep(const std::map<std::string, size_t> &parameterIndex,
                                const std::vector<std::string> &trainableOrder) {
  Block &body = step_.getBody().front();
  os_ << "void trainStep(const std::vector<HostTensor> &inputs, colossal::rt::StepParameters &parameters,\n"
         "               const colossal::rt::StepRandomness &random, float lossScale, HostTensor &loss,\n"
         "               std::vector<HostTensor> &gradients, colossal::rt::GradientReady &gradientReady,\n"
      << (device_ ? "               colossal::rt::StepCollectives &stepCollectives) {\n"
                    // The split ops on device tensors (DeviceCollectives.h).
                    "  colossal::rt::device::Collectives collectives(stepCollectives);\n"
                  : "               colossal::rt::StepCollectives &collectives) {\n");
  // Each value is freed after the statement of its last use: the step's
  // memory is its live values, not all of them.
  os_ << "  colossal::rt::StepMemory memory(colossal::rt::MemorySpace::" << (device_ ? "Device" : "Host") << ");\n";
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse_[operand] = &op;
  for (BlockArgument arg : body.getArguments()) {
    std::string name = "v" + std::to_string(counter_++);
    names_[arg] = name;
    auto inputName = step_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name");
    if (inputName && inputName.getValue() == "loss_scale") {
      // The loss gradient's seed: the trainer's current loss scale.
      os_ << "  Tensor " << name << " = " << (device_ ? "upload(" : "")
          << "HostTensor::ofFloats(Shape{}, {lossScale})" << (device_ ? ")" : "") << "; // loss_scale\n";
      hold(arg, name);
      continue;
    }
    os_ << (device_ ? "  Tensor " : "  const Tensor &") << name << " = "
        << (device_ ? "upload(inputs[" : "inputs[") << arg.getArgNumber() << (device_ ? "])" : "]") << "; // "
        << (inputName ? inputName.getValue() : StringRef("input")) << "\n";
    // On the device an input is a copy the step owns.
    if (device_)
      hold(arg, name);
  }
  // Each trainable gradient is reported as soon as it is computed, so the
  // trainer can reduce it while the backward pass goes on (host target; a
  // device gradient is downloaded with the rest at the end).
  Operation *terminator = body.getTerminator();
  std::map<std::string, Value> gradientByName;
  for (unsigned r = 1; r < step_.getNumResults(); ++r)
    if (auto name = step_.getResultAttrOfType<StringAttr>(r, "train.name"))
      gradientByName[name.getValue().str()] = terminator->getOperand(r);
  struct Report {
    size_t index;
    StringRef name;
    Value gradient;
  };
  llvm::DenseMap<Operation *, std::vector<Report>> reportsAfter;
  // Reported gradients freed at once: their places in the list stay empty.
  llvm::DenseSet<Value> taken;
  for (auto [index, name] : llvm::enumerate(trainableOrder))
    if (auto it = gradientByName.find("grad:" + name); it != gradientByName.end() && !device_)
      if (Operation *definer = it->second.getDefiningOp())
        reportsAfter[definer].push_back({index, name, it->second});
  for (Operation &op : body.without_terminator()) {
    if (failed(emitOp(&op, parameterIndex)))
      return failure();
    if (auto it = reportsAfter.find(&op); it != reportsAfter.end()) {
      for (const Report &report : it->second)
        os_ << "  gradientReady(" << report.index << ", " << ref(report.gradient) << "); // @" << report.name
            << "\n";
      // The trainer has taken them: a gradient only returned is freed now,
      // not held to the end of the step.
      llvm::SmallPtrSet<Value, 4> freed;
      for (const Report &report : it->second) {
        Value g = report.gradient;
        if (owned_.contains(g) && g != terminator->getOperand(0) && freed.insert(g).second &&
            llvm::all_of(g.getUsers(), [&](Operation *user) { return user == terminator; })) {
          free(g);
          taken.insert(g);
        }
      }
    }
    freeAfterLastUse(&op);
  }
  auto toHost = [&](Value v) { return device_ ? "download(" + ref(v) + ")" : ref(v); };
  os_ << "  loss = " << toHost(terminator->getOperand(0)) << ";\n";
  os_ << "  gradients.clear();\n";
  for (const std::string &name : trainableOrder) {
    auto it = gradientByName.find("grad:" + name);
    if (it == gradientByName.end())
      return step_.emitError() << "@forward_backward returns no gradient for trainable parameter @" << name;
    if (taken.contains(it->second))
      os_ << "  gradients.emplace_back(); // @" << name << ", taken when reported\n";
    else
      os_ << "  gradients.push_back(" << toHost(it->second) << "); // @" << name << "\n";
  }
  // Parameter reads the step returns as they are: released once copied.
  llvm::SmallPtrSet<Value, 4> returned;
  for (Value v : terminator->getOperands())
    if (fetched_.count(v) && returned.insert(v).second)
      release(v);
  os_ << "}\n";
  return success();
}

LogicalResult Emitter::emitStage(const std::string &function, const std::map<std::string, size_t> &inputIndex,
                                 const std::map<std::string, size_t> &parameterIndex,
                                 const std::map<std::string, size_t> &trainableIndex) {
  Block &body = step_.getBody().front();
  // On the device a stage takes its arguments from the trainer as host
  // tensors and uploads them, and downloads what it returns and reports.
  os_ << "void " << function << "(colossal::rt::StageCall &call) {\n"
      << "  colossal::rt::StepParameters &parameters = call.parameters;\n"
      << "  const colossal::rt::StepRandomness &random = call.random;\n"
      << "  colossal::rt::GradientReady &gradientReady = call.gradientReady;\n"
      << (device_ ? "  colossal::rt::device::Collectives collectives(call.collectives);\n"
                  : "  colossal::rt::StepCollectives &collectives = call.collectives;\n")
      << "  (void)parameters, (void)random, (void)gradientReady, (void)collectives;\n"
      << "  colossal::rt::StepMemory memory(colossal::rt::MemorySpace::" << (device_ ? "Device" : "Host") << ");\n";
  auto upload = [&](const std::string &host) { return device_ ? "upload(" + host + ")" : host; };
  auto toHost = [&](Value v) { return device_ ? "download(" + ref(v) + ")" : ref(v); };
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse_[operand] = &op;
  int64_t taken = 0;
  for (BlockArgument arg : body.getArguments()) {
    std::string name = "v" + std::to_string(counter_++);
    names_[arg] = name;
    auto label = step_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name");
    StringRef argName = label ? label.getValue() : StringRef("input");
    if (argName == "loss_scale") {
      os_ << "  Tensor " << name << " = " << upload("HostTensor::ofFloats(Shape{}, {call.lossScale})")
          << "; // loss_scale\n";
      hold(arg, name);
    } else if (auto it = inputIndex.find(argName.str()); it != inputIndex.end()) {
      os_ << (device_ ? "  Tensor " : "  const Tensor &") << name << " = "
          << upload("call.inputs[" + std::to_string(it->second) + "]") << "; // " << argName << "\n";
      if (device_)
        hold(arg, name);
    } else {
      std::string argument = "call.arguments[" + std::to_string(taken++) + "]";
      os_ << "  Tensor " << name << " = " << (device_ ? upload(argument) : "std::move(" + argument + ")") << "; // "
          << argName << "\n";
      if (device_)
        os_ << "  " << argument << " = HostTensor();\n";
      hold(arg, name);
    }
  }
  Operation *terminator = body.getTerminator();
  llvm::DenseMap<Operation *, std::vector<std::pair<size_t, Value>>> reportsAfter;
  llvm::DenseSet<Value> reported;
  for (unsigned r = 0; r < step_.getNumResults(); ++r) {
    auto label = step_.getResultAttrOfType<StringAttr>(r, "train.name");
    if (!label || !label.getValue().starts_with("grad:"))
      continue;
    auto it = trainableIndex.find(label.getValue().drop_front(5).str());
    if (it == trainableIndex.end())
      return step_.emitError() << "returns " << label << ", which is no trainable parameter's";
    Value g = terminator->getOperand(r);
    Operation *definer = g.getDefiningOp();
    if (!definer)
      return step_.emitError() << "returns an argument as " << label;
    reportsAfter[definer].push_back({it->second, g});
    reported.insert(g);
  }
  for (Operation &op : body.without_terminator()) {
    if (failed(emitOp(&op, parameterIndex)))
      return failure();
    if (auto it = reportsAfter.find(&op); it != reportsAfter.end())
      for (auto [index, g] : it->second) {
        os_ << "  gradientReady(" << index << ", " << toHost(g) << ");\n";
        if (owned_.contains(g) && llvm::all_of(g.getUsers(), [&](Operation *user) { return user == terminator; })) {
          free(g);
          owned_.erase(g);
        }
      }
    freeAfterLastUse(&op);
  }
  os_ << "  call.results.resize(" << step_.getNumResults() << ");\n";
  for (unsigned r = 0; r < step_.getNumResults(); ++r) {
    Value v = terminator->getOperand(r);
    if (reported.contains(v))
      continue;
    bool lastReturn =
        llvm::none_of(llvm::drop_begin(terminator->getOperands(), r + 1), [&](Value later) { return later == v; });
    // A value of the function's own leaves it (the trainer holds it now).
    bool move = owned_.contains(v) && lastReturn && !device_;
    os_ << "  call.results[" << r << "] = " << (move ? "std::move(" + ref(v) + ")" : toHost(v)) << ";\n";
  }
  llvm::SmallPtrSet<Value, 4> returned;
  for (Value v : terminator->getOperands())
    if (fetched_.count(v) && returned.insert(v).second)
      release(v);
  os_ << "}\n\n";
  return success();
}

/// The smallest table an integer value indexes or class count it labels
/// (the largest int64 when it does neither).
int64_t rangeOfUses(Value input, int64_t tensorRanks) {
  int64_t range = std::numeric_limits<int64_t>::max();
  for (Operation *user : input.getUsers()) {
    // Labels flattened for the loss (labels.view(-1)) label what the
    // flattened ones do; the rank's slice of the tokens (sequence
    // parallelism) what the whole do.
    if (isa<ReshapeOp, ReshardOp, RankSliceOp>(user)) {
      range = std::min(range, rangeOfUses(user->getResult(0), tensorRanks));
      continue;
    }
    // A table or logits split by vocabulary hold 1 / tensorRanks of it.
    int64_t slices = user->hasAttr("mesh_axis") ? tensorRanks : 1;
    if (auto g = dyn_cast<GatherOp>(user); g && g.getIndices() == input) {
      auto data = cast<ShapedType>(g.getData().getType());
      int64_t axis = int64_t(g.getAxis());
      axis = axis < 0 ? axis + data.getRank() : axis;
      int64_t rows = data.getDimSize(axis) * slices;
      // A padded vocabulary: the model's rows, not the padding's.
      if (auto read = g.getData().getDefiningOp<ParamOp>())
        if (auto p = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(read, read.getNameAttr()))
          rows -= slices > 1 ? int64_t(p.getPadding()) : 0;
      range = std::min(range, rows);
    }
    if (auto c = dyn_cast<CrossEntropyOp>(user); c && c.getLabels() == input)
      range = std::min(range, c.getClasses() ? int64_t(*c.getClasses())
                                             : cast<ShapedType>(c.getLogits().getType()).getDimSize(1) * slices);
    if (auto n = dyn_cast<NegativeLogLikelihoodLossOp>(user); n && n.getLabels() == input)
      range = std::min(range, cast<ShapedType>(n.getLogProbs().getType()).getDimSize(1));
  }
  return range;
}

/// The range of synthetic values for an integer input: its uses' range; 2
/// when it neither indexes nor labels.
int64_t integerRange(Value input, int64_t tensorRanks) {
  int64_t range = rangeOfUses(input, tensorRanks);
  return range == std::numeric_limits<int64_t>::max() ? 2 : range;
}

/// The emitted name of a ParameterInit kind.
const char *initKindName(rt::ParameterInit::Kind kind) {
  switch (kind) {
  case rt::ParameterInit::Normal:
    return "Normal";
  case rt::ParameterInit::Ones:
    return "Ones";
  case rt::ParameterInit::Zeros:
    return "Zeros";
  default:
    return "File";
  }
}

} // namespace

// As Hugging Face's models initialize: a norm's scale at 1, a norm's bias
// and any other vector at 0, the rest (matrices, embeddings) from N(0, std^2).
std::map<std::string, rt::ParameterInit::Kind> initKinds(ModuleOp module) {
  std::set<std::string> scales, biases;
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    forward.walk([&](ParamOp read) {
      SmallVector<Value> values{read.getResult()};
      // Mixed precision casts a read before its use.
      for (Operation *user : read->getUsers())
        if (auto cast = dyn_cast<CastOp>(user))
          values.push_back(cast.getResult());
      for (Value v : values)
        for (Operation *user : v.getUsers()) {
          if (auto n = dyn_cast<LayerNormOp>(user)) {
            if (n.getScale() == v)
              scales.insert(read.getName().str());
            if (n.getBias() == v)
              biases.insert(read.getName().str());
          }
          if (auto n = dyn_cast<RmsNormOp>(user); n && n.getScale() == v)
            scales.insert(read.getName().str());
        }
    });
  std::map<std::string, rt::ParameterInit::Kind> kinds;
  for (ParameterOp p : module.getOps<ParameterOp>()) {
    std::string name = p.getSymName().str();
    if (!p.getTrainable())
      kinds[name] = rt::ParameterInit::File;
    else if (scales.count(name))
      kinds[name] = rt::ParameterInit::Ones;
    else if (biases.count(name) || cast<ShapedType>(p.getType()).getRank() <= 1)
      kinds[name] = rt::ParameterInit::Zeros;
    else
      kinds[name] = rt::ParameterInit::Normal;
  }
  return kinds;
}

namespace {

/// The pipeline's stage functions in order (stage s's forward at 2s, its
/// backward at 2s + 1); empty when the step is one function.
std::vector<func::FuncOp> stageFunctionsOf(ModuleOp module) {
  std::vector<func::FuncOp> functions;
  for (int64_t s = 0;; ++s) {
    auto forward = module.lookupSymbol<func::FuncOp>("stage" + std::to_string(s) + "_forward");
    auto backward = module.lookupSymbol<func::FuncOp>("stage" + std::to_string(s) + "_backward");
    if (!forward || !backward)
      return functions;
    functions.push_back(forward);
    functions.push_back(backward);
  }
}

std::string cppStageName(int64_t stage, bool backward) {
  return "stage" + std::to_string(stage) + (backward ? "Backward" : "Forward");
}

/// The C++ initializer of a StageValue for argument or result `i` of
/// `function`.
FailureOr<std::string> stageValueOf(func::FuncOp function, unsigned i, bool result,
                                    const std::map<std::string, size_t> &inputIndex,
                                    const std::map<std::string, size_t> &trainableIndex) {
  auto label = result ? function.getResultAttrOfType<StringAttr>(i, "train.name")
                      : function.getArgAttrOfType<StringAttr>(i, "train.name");
  auto peer = result ? function.getResultAttrOfType<IntegerAttr>(i, "dist.to")
                     : function.getArgAttrOfType<IntegerAttr>(i, "dist.from");
  auto type = cast<ShapedType>(result ? function.getResultTypes()[i] : function.getArgumentTypes()[i]);
  StringRef name = label ? label.getValue() : StringRef();
  std::string kind;
  int64_t index = 0;
  auto number = [&](StringRef text) {
    int64_t n = 0;
    return text.getAsInteger(10, n) ? int64_t(-1) : n;
  };
  if (name == "loss")
    kind = "Loss";
  else if (name == "loss_scale")
    kind = "LossScale";
  else if (name.consume_front("grad:")) {
    auto it = trainableIndex.find(name.str());
    if (it == trainableIndex.end())
      return function.emitError() << "returns the gradient of '" << name << "', which is no trainable parameter";
    kind = "Gradient", index = int64_t(it->second);
  } else if (name.consume_front("send:"))
    kind = "Sent", index = number(name);
  else if (name.consume_front("recv:"))
    kind = "Received", index = number(name);
  else if (name.consume_front("save:"))
    kind = "Saved", index = number(name);
  else if (auto it = inputIndex.find(name.str()); it != inputIndex.end())
    kind = "Input", index = int64_t(it->second);
  if (kind.empty() || index < 0 || ((kind == "Sent" || kind == "Received") && !peer))
    return function.emitError() << (result ? "result " : "argument ") << i << " ('" << name
                                << "') is no pipeline value (loss, grad:, send:, recv:, save: or a program input)";
  return "{colossal::rt::StageValue::" + kind + ", " + std::to_string(index) + ", " +
         std::to_string(peer ? peer.getInt() : int64_t(-1)) + ", " + shapeLiteral(type.getShape()) + ", " +
         (isa<IntegerType>(type.getElementType()) ? "true" : "false") + "}";
}

} // namespace

LogicalResult emitHostSource(ModuleOp module, const ProgramSettings &settings, llvm::raw_ostream &os,
                             StepMemoryPlan *memory, std::vector<ExternalConstant> *external) {
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  std::vector<func::FuncOp> stages = stageFunctionsOf(module);
  if ((!step && stages.empty()) || !forward)
    return module.emitError() << "the module has no @forward_backward (run train-autodiff first)";
  FailureOr<CompiledOptimizer> compiled = readCompiledOptimizer(module);
  if (failed(compiled))
    return failure();
  CompiledOptimizer &optimizer = *compiled;
  std::map<std::string, size_t> parameterIndex;
  std::vector<ParameterOp> parameters;
  std::vector<std::string> trainableOrder;
  for (ParameterOp p : module.getOps<ParameterOp>()) {
    parameterIndex[p.getSymName().str()] = parameters.size();
    parameters.push_back(p);
    if (p.getTrainable())
      trainableOrder.push_back(p.getSymName().str());
  }

  bool device = settings.target == "cuda";
  auto precision = module->getAttrOfType<StringAttr>("train.precision");
  os << "// The training step of " << settings.model << ", emitted by colossal-compile for the "
     << (device ? "CUDA" : "host") << " target\n"
     << "// (" << (precision ? precision.getValue() : StringRef("fp32"))
     << ", one statement per op of @forward_backward; 16-bit values are float32\n"
     << "// rounded to their type after each op). Built against the runtime's public\n"
     << "// headers; main() hands the step to the runtime's trainer.\n\n"
     << "#include \"colossal/runtime/kernels/HostTensor.h\"\n"
     << "#include \"colossal/runtime/io/ProgramFiles.h\"\n"
     << "#include \"colossal/runtime/train/StepMemory.h\"\n"
     << "#include \"colossal/runtime/train/Trainer.h\"\n"
     << (device ? ""
                : "#include \"colossal/runtime/kernels/SequenceParallel.h\"\n"
                  "#include \"colossal/runtime/kernels/RingAttention.h\"\n"
                  "#include \"colossal/runtime/kernels/VocabularyParallel.h\"\n");
  if (device)
    os << "#include \"colossal/runtime/kernels/CudaDevice.h\"\n#include \"colossal/runtime/comm/DeviceCollectives.h\"\n"
       << "#include \"colossal/runtime/kernels/DeviceTensor.h\"\n"
       << "#include \"colossal/runtime/Error.h\"\n#include \"colossal/runtime/comm/Launch.h\"\n\n#include <cstdio>\n";
  os << "\n#include <limits>\n#include <optional>\n#include <string>\n#include <utility>\n#include <vector>\n\n"
     << "namespace {\n\nusing HostTensor = colossal::rt::host::Tensor;\n"
     << "using namespace colossal::rt::" << (device ? "device" : "host") << ";\n\n";
  std::map<std::string, size_t> inputIndex, trainableIndex;
  for (BlockArgument arg : forward.getArguments())
    if (auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name"))
      inputIndex[name.getValue().str()] = arg.getArgNumber();
  for (auto [t, name] : llvm::enumerate(trainableOrder))
    trainableIndex[name] = t;
  if (stages.empty()) {
    Emitter emitter(step, os, device, external);
    if (failed(emitter.emitStep(parameterIndex, trainableOrder)))
      return failure();
    if (memory)
      *memory = StepMemoryPlan{emitter.plannedPeakBytes(), emitter.valueBytes()};
  } else {
    // Each function holds its own values; the largest is what one call
    // holds at once (the values a stage keeps between calls are the
    // trainer's).
    StepMemoryPlan plan;
    for (func::FuncOp function : stages) {
      Emitter emitter(function, os, device, external);
      auto stage = function->getAttrOfType<IntegerAttr>("dist.stage");
      bool backward = function.getSymName().ends_with("_backward");
      if (!stage ||
          failed(emitter.emitStage(cppStageName(stage.getInt(), backward), inputIndex, parameterIndex, trainableIndex)))
        return failure();
      plan.peakBytes = std::max(plan.peakBytes, emitter.plannedPeakBytes());
      plan.valueBytes += emitter.valueBytes();
    }
    if (memory)
      *memory = plan;
  }

  os << "\ncolossal::rt::TrainingProgram program() {\n"
     << "  colossal::rt::TrainingProgram p;\n"
     << "  p.model = " << quoted(settings.model) << ";\n";
  bool scalesLoss = false;
  auto tensorParallel = module->getAttrOfType<IntegerAttr>("train.tensor_parallel");
  int64_t tensorRanks = tensorParallel ? tensorParallel.getInt() : 1;
  for (func::FuncOp function : stages)
    for (unsigned a = 0; a < function.getNumArguments(); ++a)
      if (auto name = function.getArgAttrOfType<StringAttr>(a, "train.name"); name && name.getValue() == "loss_scale")
        scalesLoss = true;
  // The program's inputs are @forward's (the step adds the loss scale).
  func::FuncOp inputsOf = step ? step : forward;
  for (BlockArgument arg : inputsOf.getArguments()) {
    auto name = inputsOf.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "train.name");
    if (name && name.getValue() == "loss_scale") {
      scalesLoss = true;
      continue;
    }
    auto type = cast<ShapedType>(arg.getType());
    bool integer = isa<IntegerType>(type.getElementType());
    if (!integer && !type.getElementType().isF32())
      return inputsOf.emitError() << "graph input " << arg.getArgNumber() << " has type " << type
                                  << "; the host target takes float32 and integer inputs";
    os << "  p.inputs.push_back({" << quoted(name ? name.getValue() : "input") << ", "
       << shapeLiteral(type.getShape()) << ", " << (integer ? "true" : "false") << ", "
       << (integer ? integerRange(forward.getArgument(arg.getArgNumber()), tensorRanks) : 0) << "});\n";
  }
  // Frozen parameters keep the default conventions: no optimizer reads them.
  std::map<std::string, rt::ParameterInit::Kind> kinds;
  if (settings.initStd >= 0)
    kinds = initKinds(module);
  for (ParameterOp p : parameters) {
    CompiledOptimizer::Conventions conventions;
    if (auto it = optimizer.conventions.find(p.getSymName().str()); it != optimizer.conventions.end())
      conventions = it->second;
    os << "  p.parameters.push_back({" << quoted(p.getSymName()) << ", "
       << shapeLiteral(cast<ShapedType>(p.getType()).getShape()) << ", " << (p.getTrainable() ? "true" : "false")
       << ", {/*decay=*/" << (conventions.decay ? "true" : "false") << ", /*trustRatio=*/"
       << (conventions.trustRatio ? "true" : "false") << "}, /*splitDim=*/"
       << (p.getSplitDim() ? int64_t(*p.getSplitDim()) : int64_t(-1)) << ", /*splitGroups=*/"
       << int64_t(p.getSplitGroups()) << ", /*padding=*/" << int64_t(p.getPadding());
    if (settings.initStd >= 0)
      os << ", /*init=*/{colossal::rt::ParameterInit::" << initKindName(kinds[p.getSymName().str()]) << ", "
         << floatLiteral(settings.initStd) << "}";
    os << "});\n";
  }
  // train.optimizer_update lowers to the runtime's fused optimizer: these are
  // its settings (defaults a flag may override), the masks above its
  // per-tensor conventions.
  std::string where;
  llvm::raw_string_ostream(where) << optimizer.op.getLoc();
  os << "  colossal::rt::TrainingSettings &s = p.settings;\n"
     << "  // train.optimizer_update {kind = " << quoted(optimizer.kind) << "} of @optimizer_step, " << where << "\n"
     << "  s.optimizer.kind = *colossal::rt::parseOptimizer(" << quoted(optimizer.kind) << ");\n"
     << "  s.optimizer.lr = " << llvm::format("%.9g", settings.lr) << ";\n"
     << "  s.optimizer.beta1 = " << llvm::format("%.17g", optimizer.beta1) << ";\n"
     << "  s.optimizer.beta2 = " << llvm::format("%.17g", optimizer.beta2) << ";\n"
     << "  s.optimizer.eps = " << llvm::format("%.17g", optimizer.eps) << ";\n"
     << "  s.optimizer.weightDecay = " << llvm::format("%.17g", optimizer.weightDecay) << ";\n"
     << "  s.optimizer.momentum = " << llvm::format("%.17g", optimizer.momentum) << ";\n"
     << "  s.optimizer.nesterov = " << (optimizer.nesterov ? "true" : "false") << ";\n"
     << "  s.optimizer.eta = " << llvm::format("%.17g", optimizer.eta) << ";\n"
     << "  s.optimizer.clipGradNorm = " << llvm::format("%.9g", settings.clipGradNorm) << ";\n"
     << "  s.warmupSteps = " << settings.warmupSteps << ";\n"
     << "  s.schedule = *colossal::rt::parseDecay(" << quoted(settings.schedule) << ");\n"
     << "  s.steps = " << settings.steps << ";\n"
     << "  s.microbatches = " << settings.microbatches << ";\n"
     << "  s.ranks = " << settings.ranks << ";\n"
     << "  s.tensorRanks = " << settings.tensorRanks << ";\n"
     << "  s.sequenceRanks = " << settings.sequenceRanks << ";\n"
     << "  s.zero = " << settings.zero << ";\n"
     << (settings.offloadOptimizer ? "  s.offloadOptimizer = true;\n" : "")
     << "  s.gradientBucketBytes = " << settings.gradientBucketBytes << ";\n"
     << "  s.prefetchBytes = " << settings.prefetchBytes << ";\n"
     << "  s.lossScaling.dynamic = " << (scalesLoss ? "true" : "false") << ";\n";
  if (stages.empty()) {
    os << "  p.step = trainStep;\n";
  } else {
    os << "  s.pipelineRanks = " << settings.pipelineRanks << ";\n"
       << "  s.virtualStages = " << settings.virtualStages << ";\n"
       << "  s.pipelineSchedule = " << quoted(settings.pipelineSchedule) << ";\n";
    for (func::FuncOp function : stages) {
      int64_t stage = function->getAttrOfType<IntegerAttr>("dist.stage").getInt();
      bool backward = function.getSymName().ends_with("_backward");
      os << "  {\n    colossal::rt::StageFunction f;\n    f.stage = " << stage
         << ", f.backward = " << (backward ? "true" : "false") << ";\n";
      for (bool result : {false, true}) {
        unsigned n = result ? function.getNumResults() : function.getNumArguments();
        for (unsigned i = 0; i < n; ++i) {
          FailureOr<std::string> value = stageValueOf(function, i, result, inputIndex, trainableIndex);
          if (failed(value))
            return failure();
          os << "    f." << (result ? "results" : "arguments") << ".push_back(" << *value << ");\n";
        }
      }
      std::set<size_t> reads;
      function.walk([&](ParamOp read) { reads.insert(parameterIndex[read.getName().str()]); });
      os << "    f.parameters = {";
      for (auto [k, index] : llvm::enumerate(reads))
        os << (k ? ", " : "") << index;
      os << "};\n    f.run = " << cppStageName(stage, backward) << ";\n    p.stages.push_back(std::move(f));\n  }\n";
    }
  }
  os << "  return p;\n}\n\n} // namespace\n\n"
     << (device ? "int main(int argc, char **argv) {\n"
                  "  // --help needs no GPU.\n"
                  "  bool help = false;\n"
                  "  for (int i = 1; i < argc; ++i)\n"
                  "    help = help || std::string(argv[i]) == \"--help\" || std::string(argv[i]) == \"-h\";\n"
                  "  try {\n"
                  "    // One GPU per rank: the local rank picks it.\n"
                  "    if (!help)\n"
                  "      colossal::rt::cuda::initializeCudaDevice(colossal::rt::detectLaunch().localRank);\n"
                  "  } catch (const colossal::rt::Error &e) {\n"
                  "    std::fprintf(stderr, \"%s: error: %s: %s\\n\", argv[0], e.call().c_str(), e.reason().c_str());\n"
                  "    return 1;\n"
                  "  }\n"
                  "  return colossal::rt::trainerMain(argc, argv, program());\n}\n"
                : "int main(int argc, char **argv) { return colossal::rt::trainerMain(argc, argv, program()); }\n");
  return success();
}

} // namespace colossal::codegen
