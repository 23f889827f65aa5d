//===- StepInterface.cpp -------------------------------------------------===//

#include "colossal/runtime/train/StepInterface.h"

namespace colossal::rt {

StepParameters::~StepParameters() = default;
GradientReady::~GradientReady() = default;
StepCollectives::~StepCollectives() = default;

host::Tensor StepCollectives::allReduceInPlace(host::Tensor &&x, const std::string &axis) {
  host::Tensor sum = allReduce(x, axis);
  x = host::Tensor();
  return sum;
}

} // namespace colossal::rt
