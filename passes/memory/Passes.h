//===- Passes.h - the memory passes' declarations and registration -*- C++
//-*-===//

#ifndef COLOSSAL_PASSES_MEMORY_PASSES_H
#define COLOSSAL_PASSES_MEMORY_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace colossal::memory {

#define GEN_PASS_DECL
#include "passes/memory/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/memory/Passes.h.inc"

} // namespace colossal::memory

#endif // COLOSSAL_PASSES_MEMORY_PASSES_H
