//===- Curve.h - a measured quantity by size ------------------------*- C++ -*-===//
//
// Efficiencies and bandwidths are measured at a few sizes (FLOPs per call,
// bytes per message) and read between them on a log scale.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_CURVE_H
#define COLOSSAL_COST_CURVE_H

#include "colossal/support/Json.h"

#include <vector>

namespace colossal::cost {

using support::Json;

/// One point of an efficiency curve: at `size` (FLOPs per GEMM call, or bytes
/// per collective), `value` (fraction of peak, or bus bandwidth in bytes/s).
struct CurvePoint {
  double size;
  double value;
};

/// Piecewise-linear in log(size), clamped at both ends.
double interpolate(const std::vector<CurvePoint> &curve, double size);

/// [{sizeKey: size, valueKey: value}, ...]
Json curveToJson(const std::vector<CurvePoint> &curve, const char *sizeKey, const char *valueKey);

} // namespace colossal::cost

#endif // COLOSSAL_COST_CURVE_H
