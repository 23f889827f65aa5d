//===- RaisedModels.cpp - the model imported once per microbatch size -----===//

#include "RaisedModels.h"

#include "passes/raise/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

namespace colossal {

mlir::ModuleOp RaisedModels::at(int64_t microbatch, std::string &error) {
  auto it = modules_.find(microbatch);
  if (it == modules_.end())
    it = modules_.emplace(microbatch, importRaised(microbatch, errors_[microbatch])).first;
  if (!it->second)
    error = errors_[microbatch];
  return it->second ? *it->second : mlir::ModuleOp();
}

mlir::OwningOpRef<mlir::ModuleOp> RaisedModels::importRaised(int64_t microbatch, std::string &error) {
  ImportOptions options = import_;
  options.batch = microbatch;
  mlir::ScopedDiagnosticHandler once(
      &context_, [&](mlir::Diagnostic &diag) { return mlir::success(!printed_.insert(diag.str()).second); });
  mlir::OwningOpRef<mlir::ModuleOp> module = importOnnxFile(context_, file_, options);
  if (!module) {
    error = "importing " + inputPath_ + " failed (see the error above)";
    return nullptr;
  }
  // Verified once, raised: planning imports the model at several sizes,
  // and verifying after each of the raising passes was a tenth of it.
  mlir::PassManager pm(&context_);
  pm.enableVerifier(false);
  train::buildRaisePipeline(pm);
  if (mlir::failed(pm.run(*module)) || mlir::failed(mlir::verify(*module))) {
    error = "raising " + inputPath_ + " failed (see the error above)";
    return nullptr;
  }
  return module;
}

} // namespace colossal
