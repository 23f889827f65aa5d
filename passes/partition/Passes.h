//===- Passes.h - the partition passes' declarations and registration -*- C++
//-*-===//

#ifndef COLOSSAL_PASSES_PARTITION_PASSES_H
#define COLOSSAL_PASSES_PARTITION_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace colossal::partition {

#define GEN_PASS_DECL
#include "passes/partition/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/partition/Passes.h.inc"

} // namespace colossal::partition

#endif // COLOSSAL_PASSES_PARTITION_PASSES_H
