//===- Health.h - a step that went numerically wrong stops the job ---*- C++ -*-===//
//
// A NaN or infinite loss or gradient norm means the run is lost (unless fp16
// loss scaling is about to skip the step, which the caller decides first).
// Reporting it with the step number and stopping beats training on garbage.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_HEALTH_H
#define COLOSSAL_RUNTIME_HEALTH_H

#include <cstdint>

namespace colossal::rt {

/// Fails with "step N: loss is nan" (or the gradient norm) when either is not finite.
void requireFiniteStep(int64_t step, double loss, double gradNorm);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_HEALTH_H
