//===- HostStepEmitter.h - a step function as runtime calls ------*- C++ -*-===//
//
// Emits one function of the training step (the whole step, or a pipeline
// stage's forward or backward) as host C++: each op a call into the
// runtime, each value a named tensor freed after its last use, so that the
// program holds what the compiler's memory plan counts. HostSource.cpp
// assembles these functions into the program.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_CODEGEN_HOSTSTEPEMITTER_H
#define COLOSSAL_CODEGEN_HOSTSTEPEMITTER_H

#include "CppLiterals.h"
#include "colossal/Codegen/HostSource.h"
#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>
#include <string>
#include <vector>

namespace colossal::codegen {

/// The element kind the host target stores a value as.
enum class Kind { Float, Integer };

class StepEmitter {
public:
  StepEmitter(mlir::func::FuncOp step, llvm::raw_ostream &os, bool device, std::vector<ExternalConstant> *external)
      : step_(step), os_(os), device_(device), external_(external) {}

  mlir::LogicalResult emitStep(const std::map<std::string, size_t> &parameterIndex,
                               const std::vector<std::string> &trainableOrder);
  /// A pipeline stage's function (passes/partition/SplitStages.h) as
  /// `void NAME(colossal::rt::StageCall &call)`.
  mlir::LogicalResult emitStage(const std::string &name, const std::map<std::string, size_t> &inputIndex,
                                const std::map<std::string, size_t> &parameterIndex,
                                const std::map<std::string, size_t> &trainableIndex);

  /// The step's values' high-water mark in bytes, in the order the program
  /// holds and frees them (what StepMemory measures at run time), and the
  /// bytes of every value it defines.
  int64_t plannedPeakBytes() const { return peak_; }
  int64_t valueBytes() const { return total_; }

private:
  mlir::FailureOr<Kind> kindOf(mlir::Value v, mlir::Operation *user) {
    mlir::Type element = mlir::cast<mlir::ShapedType>(v.getType()).getElementType();
    if (element.isF32() || element.isBF16() || element.isF16())
      return Kind::Float;
    if (mlir::isa<mlir::IntegerType>(element))
      return Kind::Integer;
    return user->emitError() << "emitted programs compute in float32, bf16 or fp16 and integers; this op has a "
                             << "value of type " << v.getType();
  }

  /// The 16-bit type a float value is stored in, or "" for float32: its
  /// elements are rounded to it after the op computes in float32.
  static std::string storageOf(mlir::Value v) {
    mlir::Type element = mlir::cast<mlir::ShapedType>(v.getType()).getElementType();
    return element.isBF16() ? "colossal::rt::DType::BF16" : element.isF16() ? "colossal::rt::DType::F16" : "";
  }

  std::string shape(mlir::Value v) { return shapeLiteral(mlir::cast<mlir::ShapedType>(v.getType()).getShape()); }

  /// Bytes a value occupies on either target: float32 or int64 elements.
  static int64_t bytesOf(mlir::Value v) {
    auto type = mlir::cast<mlir::ShapedType>(v.getType());
    return type.getNumElements() * (mlir::isa<mlir::IntegerType>(type.getElementType()) ? 8 : 4);
  }
  /// The value `name` now belongs to the step: charged until freed. A
  /// value nothing reads is freed at once, unless `keepUnused` (the caller
  /// frees it after holding its op's other results).
  void hold(mlir::Value v, const std::string &name, bool keepUnused = false) {
    owned_.insert(v);
    os_ << "  memory.hold(" << name << ");\n";
    held_ += bytesOf(v);
    total_ += bytesOf(v);
    peak_ = std::max(peak_, held_);
    if (v.use_empty() && !keepUnused)
      free(v);
  }
  void free(mlir::Value v) {
    os_ << "  memory.free(" << ref(v) << ");\n";
    held_ -= bytesOf(v);
  }
  /// After `op`: frees the values it read last (an operand read twice
  /// once) and releases the parameter reads it used last.
  void freeAfterLastUse(mlir::Operation *op) {
    llvm::SmallPtrSet<mlir::Value, 4> done;
    for (mlir::Value operand : op->getOperands()) {
      if (lastUse_.lookup(operand) != op || !done.insert(operand).second)
        continue;
      if (owned_.contains(operand))
        free(operand);
      else if (fetched_.count(operand))
        release(operand);
    }
  }
  /// The last use of a parameter read: the step is done with the tensor.
  void release(mlir::Value v) { os_ << "  parameters.release(" << fetched_.lookup(v) << "); // " << ref(v) << "\n"; }
  std::string ref(mlir::Value v) { return names_.lookup(v); }
  std::string optionalRef(mlir::Value v) { return v ? "&" + ref(v) : "nullptr"; }
  /// The op and, when it came from a named ONNX node, that node.
  std::string describe(mlir::Operation *op) {
    std::string text = op->getName().getStringRef().str();
    if (auto named = mlir::dyn_cast<mlir::NameLoc>(op->getLoc()))
      text += " (node " + named.getName().str() + ")";
    return quoted(text);
  }

  /// Declares `result = expression` and checks the result's shape and kind;
  /// its name, or failure.
  mlir::FailureOr<std::string> declare(mlir::Operation *op, mlir::Value result, const std::string &expression) {
    mlir::FailureOr<Kind> kind = kindOf(result, op);
    if (failed(kind))
      return mlir::failure();
    std::string name = "v" + std::to_string(counter_++);
    names_[result] = name;
    os_ << "  Tensor " << name << " = " << expression << ";\n";
    os_ << "  expect(" << name << ", " << shape(result) << ", " << (*kind == Kind::Integer ? "true" : "false") << ", "
        << describe(op) << ");\n";
    return name;
  }

  /// Declares a new value (rounded to its 16-bit type, if any) and holds it.
  mlir::LogicalResult define(mlir::Operation *op, mlir::Value result, const std::string &expression) {
    std::string storage = storageOf(result);
    mlir::FailureOr<std::string> name =
        declare(op, result, storage.empty() ? expression : "roundTo(" + expression + ", " + storage + ")");
    if (failed(name))
      return mlir::failure();
    hold(result, *name);
    return mlir::success();
  }

  /// Declares the results of a multi-result op from a vector expression.
  /// They all exist from the call on: every one is held before the unused
  /// ones are freed, as the op's memory really is.
  mlir::LogicalResult defineAll(mlir::Operation *op, const std::string &expression) {
    std::string list = "r" + std::to_string(counter_++);
    os_ << "  std::vector<Tensor> " << list << " = " << expression << ";\n";
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      std::string element = "std::move(" + list + "[" + std::to_string(i) + "])", storage = storageOf(result);
      mlir::FailureOr<std::string> name =
          declare(op, result, storage.empty() ? element : "roundTo(" + element + ", " + storage + ")");
      if (failed(name))
        return mlir::failure();
      hold(result, *name, /*keepUnused=*/true);
    }
    for (mlir::Value result : op->getResults())
      if (result.use_empty())
        free(result);
    return mlir::success();
  }

  /// `op`'s result: its operand under another shape. An operand this op
  /// reads last moves into the result (no copy, the same bytes charged).
  mlir::LogicalResult relabel(mlir::Operation *op) {
    mlir::Value x = op->getOperand(0), result = op->getResult(0);
    return reuse(op, "reshape(std::move(" + ref(x) + "), " + shape(result) + ")",
                 "reshape(" + ref(x) + ", " + shape(result) + ")", /*computes=*/false);
  }

  /// `op`'s result made in its operand's storage (`inPlace`, which moves
  /// the operand) when this op reads the operand last: the same bytes
  /// charged, no second tensor. Otherwise `copying`, a new value; so too
  /// when the op `computes` values that a 16-bit type must round.
  mlir::LogicalResult reuse(mlir::Operation *op, const std::string &inPlace, const std::string &copying,
                            bool computes) {
    mlir::Value x = op->getOperand(0), result = op->getResult(0);
    if (!owned_.contains(x) || lastUse_.lookup(x) != op || result.use_empty() ||
        (computes && !storageOf(result).empty()) || bytesOf(x) != bytesOf(result))
      return define(op, result, copying);
    if (failed(declare(op, result, inPlace)))
      return mlir::failure();
    owned_.erase(x);
    owned_.insert(result);
    return mlir::success();
  }

  mlir::LogicalResult emitConstant(train::ConstantOp op);
  mlir::LogicalResult emitOp(mlir::Operation *op, const std::map<std::string, size_t> &parameterIndex);

  mlir::func::FuncOp step_;
  llvm::raw_ostream &os_;
  llvm::DenseMap<mlir::Value, std::string> names_;
  /// Values the step defines (not references to its arguments).
  llvm::DenseSet<mlir::Value> owned_;
  /// Host parameter reads: the parameter's index, released after the last use.
  llvm::DenseMap<mlir::Value, size_t> fetched_;
  /// The op reading each value last.
  llvm::DenseMap<mlir::Value, mlir::Operation *> lastUse_;
  int64_t held_ = 0, peak_ = 0, total_ = 0;
  int counter_ = 0;
  /// The CUDA target: values live on the device.
  bool device_ = false;
  /// Where constants too large for the source go (null: all inline).
  std::vector<ExternalConstant> *external_ = nullptr;
};

} // namespace colossal::codegen

#endif // COLOSSAL_CODEGEN_HOSTSTEPEMITTER_H
