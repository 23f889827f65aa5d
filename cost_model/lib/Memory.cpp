//===- Memory.cpp - per-rank memory by category ---------------------------===//

#include "colossal/cost/Memory.h"

namespace colossal::cost {

Json MemoryBreakdown::toJson() const {
  return Json::Object{{"parameters", parameters},       {"gradients", gradients},
                      {"optimizer_state", optimizer},  {"activations", activations},
                      {"communication_buffers", communication},
                      {"workspace", workspace},        {"host_optimizer_state", hostOptimizer},
                      {"host_gradients", hostGradients}, {"host_parameters", hostParameters}};
}

ModelStateBytes zeroModelStates(double psi, int nd, int stage, double weightBytes,
                                double optimizerBytes) {
  ModelStateBytes m{weightBytes * psi, weightBytes * psi, optimizerBytes * psi};
  if (stage >= 1)
    m.optimizer /= nd;
  if (stage >= 2)
    m.gradients /= nd;
  if (stage >= 3)
    m.parameters /= nd;
  return m;
}

} // namespace colossal::cost
