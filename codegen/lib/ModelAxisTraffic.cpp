//===- ModelAxisTraffic.cpp - what the model axes move, read off the IR ---===//

#include "ModelAxisTraffic.h"

#include "colossal/Dialect/Train/TrainDialect.h"
#include "colossal/cost/TensorGrid.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <set>

namespace colossal::codegen {

using namespace mlir;
using support::Json;

/// A tensor grid's layers (2.5D's depth; 1 for 2D and 3D).
int64_t gridDepthOf(ModuleOp module) {
  auto depth = module->getAttrOfType<IntegerAttr>("train.tensor_grid_depth");
  return depth ? depth.getInt() : 1;
}

/// The mesh axes a grid's step communicates over, with their ranks: a 2D
/// grid's rows and columns, 2.5D's layers and one column's rows across
/// them, or a 3D cube's axes and the rows of one tp_in or tp_out column.
std::vector<std::pair<const char *, int64_t>> gridAxesOf(ModuleOp module, int64_t side, int64_t depth) {
  if (module->hasAttr("train.tensor_cube"))
    return {
        {"tp_in", side}, {"tp_w", side}, {"tp_out", side}, {"tp_rows_in", side * side}, {"tp_rows_out", side * side}};
  if (depth > 1)
    return {{"tp_row", side}, {"tp_col", side}, {"tp_depth", depth}, {"tp_rows", depth * side}};
  return {{"tp_row", side}, {"tp_col", side}};
}

/// What tensor or sequence parallelism moves over its model axis each step,
/// read off the IR: every dist.all_reduce of @forward_backward once per
/// microbatch (the forward's sums and the backward's sums of the copies'
/// gradients), and the trainer's completions of the per-tensor norms of the
/// split tensors (two floats per split trainable tensor: one for the
/// gradient norm, one more for LAMB's and LARS's trust ratios). A
/// vocabulary-parallel cross-entropy sums three floats per row in two calls
/// (the maxima, then the denominators with the label logits), its gradient
/// two in two; one split by tokens sums two floats (its loss and counted
/// labels), its gradient one (the count, under "mean"). Ring attention
/// passes its key and value blocks (and their mask slice) P - 1 steps
/// around the ring of P ranks; its gradient runs that ring again, then
/// P - 1 steps with the blocks' gradients too and one step with the
/// gradients alone (RingAttention.h).
Json modelAxisOf(ModuleOp module, const ProgramSettings &s, StringRef axis, int64_t ranks) {
  int64_t activationBytes = 0, calls = 0, splitTensors = 0;
  // Sequence parallelism's collectives: the whole tensor's bytes each (what
  // the communicator counts) for gathers and scatters, the sent bytes for
  // all-to-alls.
  int64_t gatherBytes = 0, gathers = 0, scatterBytes = 0, scatters = 0, tradeBytes = 0, trades = 0;
  int64_t ringBytes = 0, ringSteps = 0, steps = ranks - 1;
  auto bytesOf = [](Value v) {
    auto type = cast<ShapedType>(v.getType());
    return type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8);
  };
  // Only this axis's: an op names the axis it communicates over.
  auto on = [&](Operation *op, StringRef name) {
    auto attr = op->getAttrOfType<StringAttr>(name);
    return attr && attr.getValue() == axis;
  };
  if (auto step = module.lookupSymbol<func::FuncOp>("forward_backward"))
    step.walk([&](Operation *op) {
      if (isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp, dist::AllToAllOp>(op) && !on(op, "axis"))
        return;
      if (auto sum = dyn_cast<dist::AllReduceOp>(op))
        activationBytes += bytesOf(sum.getResult()), ++calls;
      if (auto gather = dyn_cast<dist::AllGatherOp>(op))
        gatherBytes += bytesOf(gather.getResult()), ++gathers;
      if (auto scatter = dyn_cast<dist::ReduceScatterOp>(op))
        scatterBytes += bytesOf(scatter.getInput()), ++scatters;
      if (auto trade = dyn_cast<dist::AllToAllOp>(op))
        tradeBytes += bytesOf(trade.getInput()), ++trades;
      if (isa<train::AttentionOp, train::AttentionGradOp>(op) && on(op, "ring_axis")) {
        int64_t keys = bytesOf(op->getOperand(1)) + bytesOf(op->getOperand(2));
        int64_t blocks =
            keys + (op->getNumOperands() > (isa<train::AttentionOp>(op) ? 3u : 4u) ? bytesOf(op->getOperand(3)) : 0);
        if (isa<train::AttentionOp>(op))
          ringBytes += steps * blocks, ringSteps += steps;
        else
          ringBytes += steps * blocks + steps * (blocks + keys) + keys, ringSteps += 2 * steps + 1;
      }
      bool loss = isa<train::CrossEntropyOp>(op);
      if (isa<train::CrossEntropyOp, train::CrossEntropyGradOp>(op) && on(op, "mesh_axis")) {
        int64_t rows = cast<ShapedType>(op->getOperand(0).getType()).getDimSize(0);
        activationBytes += (loss ? 3 : 2) * rows * 4;
        calls += 2;
      }
      if (isa<train::CrossEntropyOp, train::CrossEntropyGradOp>(op) && on(op, "token_axis") &&
          (loss || op->getAttrOfType<StringAttr>("reduction").getValue() == "mean")) {
        activationBytes += loss ? 8 : 4;
        calls += 1;
      }
    });
  // Parameters are split over the tensor axis alone.
  for (train::ParameterOp p : module.getOps<train::ParameterOp>())
    splitTensors += axis == "tp" && p.getTrainable() && p.getSplitDim() ? 1 : 0;
  // Vocabulary parallelism: lookups from a rank's rows, losses over a
  // rank's columns of the logits.
  int64_t lookups = 0, losses = 0;
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    forward.walk([&](Operation *op) {
      if (!on(op, "mesh_axis"))
        return;
      lookups += isa<train::GatherOp>(op) ? 1 : 0;
      losses += isa<train::CrossEntropyOp>(op) ? 1 : 0;
    });
  return Json(
      Json::Object{{"ranks", Json(ranks)},
                   {"vocabulary_parallel", Json(Json::Object{{"lookups", Json(lookups)}, {"losses", Json(losses)}})},
                   {"activation_all_reduce_bytes_per_step", Json(activationBytes * s.microbatches)},
                   {"activation_all_reduces_per_step", Json(calls * s.microbatches)},
                   {"activation_all_gather_bytes_per_step", Json(gatherBytes * s.microbatches)},
                   {"activation_all_gathers_per_step", Json(gathers * s.microbatches)},
                   {"activation_reduce_scatter_bytes_per_step", Json(scatterBytes * s.microbatches)},
                   {"activation_reduce_scatters_per_step", Json(scatters * s.microbatches)},
                   {"activation_all_to_all_bytes_per_step", Json(tradeBytes * s.microbatches)},
                   {"activation_all_to_alls_per_step", Json(trades * s.microbatches)},
                   {"activation_send_recv_bytes_per_step", Json(ringBytes * s.microbatches)},
                   {"activation_send_recvs_per_step", Json(ringSteps * s.microbatches)},
                   {"split_trainable_tensors", Json(splitTensors)},
                   {"norm_completion_bytes", Json(8 * splitTensors)}});
}

/// A tensor grid's collectives per step (2D, and 2.5D's layers): SUMMA's broadcasts and
/// reduces of every grid linear layer as the cost model prices them
/// (cost/TensorGrid.h, Optimus's per-layer collectives), what the lowered
/// reshardings and the loss move on each grid axis as the IR counts them
/// (modelAxisOf), and the trainer's completions of the blocks' norms (two
/// floats per tensor, once for the gradient norm and once more for LAMB's
/// and LARS's trust ratios) over the axes each is split on: "tp", the
/// tensor ranks' communicator, for a block of both ("tp_layer", the rank's
/// layer, on 2.5D's). On 2.5D's layers the weights' gradients summed over
/// tp_depth and the loss's rows over tp_rows are the IR's too.
void addGridComm(ModuleOp module, const ProgramSettings &s, int64_t side, int64_t depth, const std::string &optimizer,
                 std::vector<cost::CommTotal> &comm) {
  auto add = [&](cost::Collective collective, const std::string &axis, double bytes, int calls) {
    if (calls == 0)
      return;
    auto it =
        llvm::find_if(comm, [&](const cost::CommTotal &c) { return c.collective == collective && c.axis == axis; });
    if (it == comm.end())
      it = comm.insert(comm.end(), cost::CommTotal{collective, axis});
    it->bytes += bytes, it->calls += calls;
  };
  auto bytesOf = [](Value v) {
    auto type = cast<ShapedType>(v.getType());
    return double(type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8));
  };
  // Every product the step makes: the forward's, those recomputation
  // runs again, and the backward's.
  double q2 = double(side * side);
  auto addLinear = [&](Value x, Value w, Value y, bool backward) {
    cost::GridLinear linear =
        cost::gridLinear(cost::TensorMode::TwoD, int(side), 1, bytesOf(x) * q2, bytesOf(w) * q2, bytesOf(y) * q2);
    for (const cost::GridCollective &c : backward ? linear.backward : linear.forward)
      add(c.collective, c.axis, c.bytes * c.calls * double(s.microbatches), c.calls * int(s.microbatches));
  };
  if (auto step = module.lookupSymbol<func::FuncOp>("forward_backward")) {
    step.walk([&](dist::GridLinearOp op) { addLinear(op.getInput(), op.getWeight(), op.getResult(), false); });
    step.walk([&](dist::GridLinearGradOp op) { addLinear(op.getInput(), op.getWeight(), op.getOutputGrad(), true); });
  }
  std::vector<std::pair<const char *, int64_t>> axes = gridAxesOf(module, side, depth);
  for (auto [axis, ranks] : axes) {
    Json counted = modelAxisOf(module, s, axis, ranks);
    auto take = [&](cost::Collective collective, const char *bytes, const char *calls) {
      add(collective, axis, counted.find(bytes)->asNumber(), int(counted.find(calls)->asNumber()));
    };
    take(cost::Collective::AllReduce, "activation_all_reduce_bytes_per_step", "activation_all_reduces_per_step");
    take(cost::Collective::AllGather, "activation_all_gather_bytes_per_step", "activation_all_gathers_per_step");
    take(cost::Collective::ReduceScatter, "activation_reduce_scatter_bytes_per_step",
         "activation_reduce_scatters_per_step");
    take(cost::Collective::AllToAll, "activation_all_to_all_bytes_per_step", "activation_all_to_alls_per_step");
  }
  int completions = optimizer == "lamb" || optimizer == "lars" ? 2 : 1;
  std::map<std::string, int> blocksOver;
  for (train::ParameterOp p : module.getOps<train::ParameterOp>())
    if (auto layout = p->getAttrOfType<dist::ShardingAttr>("dist.sharding"); layout && p.getTrainable()) {
      std::set<std::string> axes;
      for (const std::vector<std::string> &dim : layout.getLayout().dims)
        axes.insert(dim.begin(), dim.end());
      ++blocksOver[axes.size() > 1 ? (depth > 1 ? "tp_layer" : "tp") : *axes.begin()];
    }
  for (const auto &[axis, tensors] : blocksOver)
    add(cost::Collective::AllReduce, axis, double(completions * 8 * tensors), completions);
}

/// The manifest's `tensor_grid` section: the grid's mode, side, depth, its
/// SUMMA products, the tables split by vocabulary (and of them those tied
/// to the output layer), and what each grid axis moves (modelAxisOf).
Json gridManifestOf(ModuleOp module, const ProgramSettings &s, int64_t side) {
  int64_t linears = 0;
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    forward.walk([&](dist::GridLinearOp) { ++linears; });
  int64_t depth = gridDepthOf(module);
  bool cube = module->hasAttr("train.tensor_cube");
  // Embedding tables split by vocabulary over the grid (TensorGrid.h),
  // and of them those the output layer reads too (tied: its SUMMA
  // weight).
  Json::Array tables, tied;
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    forward.walk([&](train::GatherOp lookup) {
      // (On 2.5D's layers a tied table is read as copies over tp_depth.)
      Value table = lookup.getData();
      if (auto copies = table.getDefiningOp<dist::ReshardOp>())
        table = copies.getInput();
      auto read = table.getDefiningOp<train::ParamOp>();
      if (!read || !lookup.getMeshAxis())
        return;
      tables.push_back(Json(read.getName().str()));
      // (On the cube the output layer reads it gathered over tp_w first.)
      auto viewed = [](Operation *user) {
        if (auto gathered = dyn_cast<dist::ReshardOp>(user))
          return llvm::any_of(gathered->getUsers(), [](Operation *u) { return isa<train::TransposeOp>(u); });
        return isa<train::TransposeOp>(user);
      };
      if (llvm::any_of(lookup.getData().getUsers(), viewed))
        tied.push_back(Json(read.getName().str()));
    });
  Json::Object grid{{"mode", cube        ? "3d"
                             : depth > 1 ? "2.5d"
                                         : "2d"},
                    {"side", Json(side)},
                    {"depth", Json(depth)},
                    {"grid_linears", Json(linears)},
                    {"lookup_tables", Json(tables)},
                    {"tied_lookup_tables", Json(tied)}};
  for (auto [axis, ranks] : gridAxesOf(module, side, depth))
    grid[axis] = modelAxisOf(module, s, axis, ranks);
  return Json(std::move(grid));
}

} // namespace colossal::codegen
