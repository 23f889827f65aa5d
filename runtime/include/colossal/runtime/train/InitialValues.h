//===- InitialValues.h - weights a program draws itself --------*- C++ -*-===//
//
// A program compiled with --init starts its trainable parameters from values
// it draws rather than reads: element i of parameter NAME under run seed s
// is a pure function of (s, NAME, i), i counted in the model's own shape
// (before any vocabulary padding). Every rank draws only the elements of its
// own slice, and one rank, N ranks and any split hold the same weights.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_INITIALVALUES_H
#define COLOSSAL_RUNTIME_INITIALVALUES_H

#include "colossal/runtime/train/StepInterface.h"
#include "colossal/runtime/train/TensorSlices.h"

#include <cstdint>
#include <string>

namespace colossal::rt {

/// The Philox key half a parameter's name contributes (64-bit FNV-1a).
uint64_t parameterKey(const std::string &name);

/// Element `index` (in the model's shape) of a parameter keyed `key` under
/// `init` and run seed `seed`: N(0, std^2) by Box-Muller over one Philox
/// block, 1 or 0.
float initialValue(const ParameterInit &init, uint64_t seed, uint64_t key, uint64_t index);

/// Parameter `p`'s values on the rank holding `slice` of it (of `p.shape`):
/// padding rows are zeros.
void drawSlice(const ProgramParameter &p, const SliceOf &slice, uint64_t seed, float *out);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_INITIALVALUES_H
