//===- StepInterface.cpp -------------------------------------------------===//

#include "colossal/runtime/train/StepInterface.h"

#include "colossal/runtime/Error.h"

namespace colossal::rt {

StepParameters::~StepParameters() = default;
GradientReady::~GradientReady() = default;
StepCollectives::~StepCollectives() = default;

host::Tensor StepCollectives::allReduceInPlace(host::Tensor &&x, const std::string &axis) {
  host::Tensor sum = allReduce(x, axis);
  x = host::Tensor();
  return sum;
}

host::Tensor StepCollectives::broadcast(const host::Tensor &, const std::string &axis, int64_t) {
  fail("step", "this program's collectives have no broadcast over '" + axis + "'");
}

host::Tensor StepCollectives::reduceTo(const host::Tensor &, const std::string &axis, int64_t) {
  fail("step", "this program's collectives have no reduce over '" + axis + "'");
}

} // namespace colossal::rt
