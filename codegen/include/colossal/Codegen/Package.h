//===- Package.h - an output directory with a ready executable ----*- C++ -*-===//
//
// `colossal-compile -o DIR` writes:
//   DIR/train_step.cpp        the emitted program (HostSource.h)
//   DIR/weights.safetensors   the initial weights from the ONNX file
//   DIR/constants.safetensors constants too large for the source, if any
//   DIR/manifest.json         the model, target, precision, inputs,
//                             parameters and every training setting
//   DIR/model_train           the executable, built by the system C++
//                             compiler against the runtime (no shell)
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_CODEGEN_PACKAGE_H
#define COLOSSAL_CODEGEN_PACKAGE_H

#include "colossal/Codegen/HostSource.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/Timing.h"

#include <functional>
#include <string>

namespace colossal::codegen {

struct PackageOptions {
  std::string directory;
  std::string onnxPath;
  std::string target = "cpu";
  std::string precision = "fp32";
  /// Stop after writing the source, the weights and the manifest.
  bool build = true;
  ProgramSettings settings;
  /// Where the source, weights and build times go (--time-phases), if set.
  mlir::TimingScope *timing = nullptr;
  /// Told each phase as it begins, the build included (a terminal's
  /// progress line).
  std::function<void(const std::string &)> onPhase;
};

/// Writes the directory and builds the executable; errors go through the
/// module's context (naming the file, tensor or compiler command).
mlir::LogicalResult writePackage(mlir::ModuleOp module, const PackageOptions &options);

} // namespace colossal::codegen

#endif // COLOSSAL_CODEGEN_PACKAGE_H
