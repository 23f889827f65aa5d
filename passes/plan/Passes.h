//===- Passes.h - planning passes -------------------------------*- C++ -*-===//

#ifndef COLOSSAL_PASSES_PLAN_PASSES_H
#define COLOSSAL_PASSES_PLAN_PASSES_H

#include "colossal/Dialect/Dist/DistDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace colossal::plan {

#define GEN_PASS_DECL
#include "passes/plan/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/plan/Passes.h.inc"

} // namespace colossal::plan

#endif // COLOSSAL_PASSES_PLAN_PASSES_H
