//===- RaisedModels.h - the model imported once per microbatch size -*- C++ -*-===//
//
// The search reads the model's cost graph at each microbatch size it tries,
// and the partitioner splits copies of the same raised IR: both take the
// model from here, imported (its batch dimension bound to the size) and
// raised once per size. The file is read and parsed once for all of them.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TOOLS_COLOSSAL_COMPILE_RAISEDMODELS_H
#define COLOSSAL_TOOLS_COLOSSAL_COMPILE_RAISEDMODELS_H

#include "colossal/Import/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <set>
#include <string>

namespace colossal {

class RaisedModels {
public:
  /// `inputPath` names the file in errors.
  RaisedModels(mlir::MLIRContext &context, const ImportOptions &import, const OnnxFile &file, std::string inputPath)
      : context_(context), import_(import), file_(file), inputPath_(std::move(inputPath)) {}

  /// The raised module at `microbatch` samples, or null with `error`.
  mlir::ModuleOp at(int64_t microbatch, std::string &error);

private:
  mlir::OwningOpRef<mlir::ModuleOp> importRaised(int64_t microbatch, std::string &error);

  mlir::MLIRContext &context_;
  const ImportOptions &import_;
  const OnnxFile &file_;
  std::string inputPath_;
  std::map<int64_t, mlir::OwningOpRef<mlir::ModuleOp>> modules_;
  std::map<int64_t, std::string> errors_;
  /// Diagnostics already printed: an error that does not depend on the
  /// microbatch size (an unbound dimension, an unsupported op) is printed
  /// once, not once per size.
  std::set<std::string> printed_;
};

} // namespace colossal

#endif // COLOSSAL_TOOLS_COLOSSAL_COMPILE_RAISEDMODELS_H
