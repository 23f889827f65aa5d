//===- ModelSummary.h - the one-screen summary of an imported model -------===//

#ifndef COLOSSAL_TOOLS_MODELSUMMARY_H
#define COLOSSAL_TOOLS_MODELSUMMARY_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace colossal {

/// Prints inputs, outputs, parameters (count, bytes, trainable or frozen) and
/// the op histogram of `module`, in about one screen.
void printModelSummary(mlir::ModuleOp module, llvm::StringRef modelPath, llvm::raw_ostream &os);

} // namespace colossal

#endif // COLOSSAL_TOOLS_MODELSUMMARY_H
