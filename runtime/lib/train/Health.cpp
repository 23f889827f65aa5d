//===- Health.cpp ---------------------------------------------------------===//

#include "colossal/runtime/train/Health.h"

#include "colossal/runtime/Error.h"

#include <cmath>
#include <string>

namespace colossal::rt {

namespace {
std::string spell(double value) { return std::isnan(value) ? "nan" : value > 0 ? "+inf" : "-inf"; }
} // namespace

void requireFiniteStep(int64_t step, double loss, double gradNorm) {
  std::string where = "step " + std::to_string(step);
  if (!std::isfinite(loss))
    fail(where, "the loss is " + spell(loss) +
                    " (lower the learning rate, enable gradient clipping, or use bf16/fp32)");
  if (!std::isfinite(gradNorm))
    fail(where, "the gradient norm is " + spell(gradNorm) + " (the loss was " + std::to_string(loss) + ")");
}

} // namespace colossal::rt
