//===- HostInterpreter.h - run a train-dialect function on the host -*- C++ -*-===//
//
// The reference executor: it evaluates a `train` function op by op on the
// host, calling the runtime's host kernels (cpu::gemm, softmax, layer and RMS
// norm, GELU, SiLU, attention, cross-entropy, embedding) for fp32 tensors,
// as the emitted host program does, and straightforward float64 loops for
// everything else (other element types, and ops the kernels do not cover:
// convolutions, einsum, reductions, shape ops). `train.optimizer_update`
// runs the runtime's fused host optimizer on float32 copies. It is what the ONNX node
// tests run through numerically, and the yardstick later targets are
// compared with; it is written for clarity, not speed.
//
// Values are held as float64 with their MLIR element type; integer and
// boolean results are stored exactly (int64 values up to 2^53). Dropout uses
// the runtime's Philox generator with seed 0 at step 0.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_EXECUTE_HOSTINTERPRETER_H
#define COLOSSAL_EXECUTE_HOSTINTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace colossal::execute {

struct HostValue {
  std::vector<int64_t> shape;
  mlir::Type elementType;
  std::vector<double> data;

  int64_t elements() const;
};

/// Evaluates `function` on `arguments` (in order); `parameters` holds the
/// values of `train.param` symbols by name. On failure returns false and
/// sets `error` to "OP at LOCATION: reason" (an unsupported op, a missing
/// parameter, an argument of the wrong shape).
bool interpret(mlir::func::FuncOp function, const std::vector<HostValue> &arguments,
               const std::map<std::string, HostValue> &parameters, std::vector<HostValue> &results,
               std::string &error);

} // namespace colossal::execute

#endif // COLOSSAL_EXECUTE_HOSTINTERPRETER_H
