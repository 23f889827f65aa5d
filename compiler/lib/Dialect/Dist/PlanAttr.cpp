//===- PlanAttr.cpp - the training plan on a module ----------------------===//

#include "colossal/Dialect/Dist/DistDialect.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace colossal::dist {

namespace {

LogicalResult checkOneOf(function_ref<InFlightDiagnostic()> emitError, StringRef key, StringRef value,
                         ArrayRef<StringRef> allowed) {
  if (llvm::is_contained(allowed, value))
    return success();
  InFlightDiagnostic diag = emitError();
  diag << "plan: " << key << " is '" << value << "', expected one of";
  for (StringRef name : allowed)
    diag << " " << name;
  return diag;
}

} // namespace

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t dp, int64_t tp, int64_t sp,
                               int64_t pp, StringRef tpMode, int64_t tpDepth, StringRef sequence, int64_t microbatches,
                               StringRef schedule, int64_t virtualStages, DenseI64ArrayAttr stageLayers, int64_t zero,
                               StringRef offload, StringRef recompute, StringRef cluster, int64_t nodes) {
  std::pair<StringRef, int64_t> counts[] = {{"dp", dp},
                                            {"tp", tp},
                                            {"sp", sp},
                                            {"pp", pp},
                                            {"tp_depth", tpDepth},
                                            {"microbatches", microbatches},
                                            {"virtual_stages", virtualStages},
                                            {"nodes", nodes}};
  for (auto [key, value] : counts)
    if (value < 1)
      return emitError() << "plan: " << key << " is " << value << ", expected at least 1";
  if (zero < 0 || zero > 3)
    return emitError() << "plan: zero is " << zero << ", expected 0, 1, 2 or 3";
  if (failed(checkOneOf(emitError, "tp_mode", tpMode, {"1d", "2d", "2.5d", "3d"})) ||
      failed(checkOneOf(emitError, "sequence", sequence, {"none", "megatron", "all-to-all", "ring"})) ||
      failed(checkOneOf(emitError, "schedule", schedule, {"gpipe", "1f1b", "interleaved"})) ||
      failed(checkOneOf(emitError, "offload", offload, {"none", "optimizer"})) ||
      failed(checkOneOf(emitError, "recompute", recompute, {"none", "selective", "full"})))
    return failure();
  if (cluster.empty())
    return emitError() << "plan: the cluster is unnamed";
  if (stageLayers) {
    if (int64_t(stageLayers.size()) != pp * virtualStages)
      return emitError() << "plan: stage_layers has " << stageLayers.size()
                         << " entries for pp x virtual_stages = " << pp * virtualStages;
    if (llvm::any_of(stageLayers.asArrayRef(), [](int64_t layers) { return layers < 1; }))
      return emitError() << "plan: every pipeline stage holds at least one layer";
  }
  return success();
}

} // namespace colossal::dist
