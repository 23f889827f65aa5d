//===- OnnxImporter.h - ONNX ModelProto to the train dialect ----*- C++ -*-===//
//
// Imports a training export (a graph whose first output is the scalar loss)
// into a module holding `train.parameter` declarations and one function,
// `@forward`, over static shapes. Parameter bytes stay in the model file.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_IMPORT_ONNXIMPORTER_H
#define COLOSSAL_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace colossal {

struct ImportOptions {
  /// Binds dynamic dimensions whose name contains "batch" (any case).
  std::optional<int64_t> batch;
  /// Binds dynamic dimensions whose name contains "seq" (any case).
  std::optional<int64_t> seq;
  /// Binds dynamic dimensions by exact name; wins over batch and seq.
  std::map<std::string, int64_t> bindings;
  /// When set, exactly these parameters are trainable (a file of names, one
  /// per line); graph inputs named here are shape-only parameters.
  std::optional<std::vector<std::string>> trainable;
  /// Parameters to freeze although they reach the loss.
  std::vector<std::string> frozen;
  /// Require the first graph output to be a scalar floating-point loss.
  /// The node conformance suite imports single-op graphs without one.
  bool requireLoss = true;
  /// Graph inputs fixed at compile time, as serialized ONNX TensorProtos:
  /// shape arguments (Reshape's shape, Slice's starts, ...) that a graph
  /// takes as inputs rather than computes. They import as constants.
  std::map<std::string, std::string> constantInputs;
};

/// A parameter's initial value: float kinds as float32, integer kinds as int64.
struct InitialValue {
  std::vector<int64_t> shape;
  bool integer = false;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};

/// The initial values of the initializers `names` of the ONNX file at
/// `path`; an error names the file and the tensor (a missing one is a
/// shape-only parameter).
std::optional<std::map<std::string, InitialValue>> readInitialValues(const std::string &path,
                                                                     const std::vector<std::string> &names,
                                                                     std::string &error);

/// Writes the model at `path` without the initializers `names` (the
/// weights) to `outPath`: the graph a trained program's weights are put back
/// into (`model_train --export`). False, with `error`, for a model whose
/// other constants live in external files or whose weights are not float32
/// or int64.
bool writeGraphWithoutWeights(const std::string &path, const std::vector<std::string> &names,
                              const std::string &outPath, std::string &error);

/// Imports the ONNX file at `path`. On failure, diagnostics naming the file,
/// the node and the reason have been emitted through the context's handler.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext &context,
                                                 const std::string &path,
                                                 const ImportOptions &options);

/// An ONNX file read and parsed once, to import several times (the plan
/// search imports the model at each microbatch size it tries; parsing a
/// file with its weights inline is most of an import's time).
class OnnxFile {
public:
  /// Reads and parses `path`; on failure emits an error naming the file
  /// through `context` and returns null.
  static std::shared_ptr<const OnnxFile> read(mlir::MLIRContext &context, const std::string &path);
  ~OnnxFile();
  OnnxFile(const OnnxFile &) = delete;
  OnnxFile &operator=(const OnnxFile &) = delete;

  const std::string &path() const { return path_; }

private:
  friend mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext &, const OnnxFile &, const ImportOptions &);
  friend std::optional<struct FixedBatch> fixedBatchOf(const OnnxFile &, const ImportOptions &);
  struct Parsed;
  OnnxFile();
  std::unique_ptr<Parsed> parsed_;
  std::string path_, baseDir_;
};

/// Imports a parsed file; diagnostics as for the overload that reads it.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext &context, const OnnxFile &file,
                                                 const ImportOptions &options);

/// The batch a model file fixes (exported without a dynamic batch axis):
/// its size and the data input that shows it, e.g. 'input_ids' [4, 128].
struct FixedBatch {
  int64_t size = 0;
  std::string input;
  std::string shape;
};

/// The batch the ONNX file at `path` fixes; nullopt when its batch is
/// dynamic, when its inputs do not show one, or when the file cannot be
/// read (importing it reports why).
std::optional<FixedBatch> fixedBatchOfFile(const std::string &path, const ImportOptions &options);

/// The same, of a file already parsed.
std::optional<FixedBatch> fixedBatchOf(const OnnxFile &file, const ImportOptions &options);

/// Imports an ONNX model from bytes already in memory (the fuzzer's entry);
/// `displayName` names it in diagnostics, `baseDir` resolves external data.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxBytes(mlir::MLIRContext &context,
                                                  const void *data, size_t size,
                                                  const std::string &displayName,
                                                  const std::string &baseDir,
                                                  const ImportOptions &options);

/// The ONNX op types the importer accepts (default domain).
const std::vector<std::string> &supportedOnnxOps();

/// Reads a list of names, one per line ('#' starts a comment).
std::optional<std::vector<std::string>> readNameList(const std::string &path, std::string &error);

} // namespace colossal

#endif // COLOSSAL_IMPORT_ONNXIMPORTER_H
