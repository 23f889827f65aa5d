//===- Passes.h - the autodiff passes' declarations and registration -*- C++
//-*-===//

#ifndef COLOSSAL_PASSES_AUTODIFF_PASSES_H
#define COLOSSAL_PASSES_AUTODIFF_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace colossal::autodiff {

#define GEN_PASS_DECL
#include "passes/autodiff/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/autodiff/Passes.h.inc"

} // namespace colossal::autodiff

#endif // COLOSSAL_PASSES_AUTODIFF_PASSES_H
