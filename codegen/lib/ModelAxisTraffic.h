//===- ModelAxisTraffic.h - what the model axes move, read off the IR -*- C++ -*-===//
//
// The manifest's account of the tensor, sequence and grid axes of one
// rank's step (Package.cpp): collectives counted in @forward_backward,
// the trainer's norm completions, SUMMA's per-layer collectives as the
// cost model prices them, and a grid's layout. Internal to codegen.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_CODEGEN_LIB_MODELAXISTRAFFIC_H
#define COLOSSAL_CODEGEN_LIB_MODELAXISTRAFFIC_H

#include "colossal/Codegen/HostSource.h"
#include "colossal/cost/Estimator.h"
#include "colossal/support/Json.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace colossal::codegen {

/// A tensor grid's layers (2.5D's depth; 1 for 2D and 3D).
int64_t gridDepthOf(mlir::ModuleOp module);

/// The mesh axes a grid's step communicates over, with their ranks.
std::vector<std::pair<const char *, int64_t>> gridAxesOf(mlir::ModuleOp module, int64_t side, int64_t depth);

/// What tensor or sequence parallelism moves over model axis `axis` of
/// `ranks` ranks each step, read off the IR.
support::Json modelAxisOf(mlir::ModuleOp module, const ProgramSettings &s, llvm::StringRef axis, int64_t ranks);

/// Adds a tensor grid's collectives per step to `comm`.
void addGridComm(mlir::ModuleOp module, const ProgramSettings &s, int64_t side, int64_t depth,
                 const std::string &optimizer, std::vector<cost::CommTotal> &comm);

/// The manifest's `tensor_grid` section for a grid of side `side`.
support::Json gridManifestOf(mlir::ModuleOp module, const ProgramSettings &s, int64_t side);

} // namespace colossal::codegen

#endif // COLOSSAL_CODEGEN_LIB_MODELAXISTRAFFIC_H
