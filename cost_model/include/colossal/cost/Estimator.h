//===- Estimator.h - step time and memory of a plan ------------------*- C++ -*-===//
//
// Evaluates one plan (a strategy and its per-op shardings) of a graph on a
// cluster:
//
// - compute: each op's roofline on its local shard, max(FLOPs / achievable
//   rate, bytes / memory bandwidth), with the GEMM rate from the cluster's
//   efficiency table; backward FLOPs as the graph states them; recomputation
//   adds the recomputed forwards to the backward pass;
// - communication: the resharding collectives on every edge (forward) and
//   their transposes on the gradients (backward), parameter-gradient
//   reductions over the model-parallel axes that split the batch or
//   sequence, data-parallel gradient reduction or ZeRO's reduce-scatter and
//   gathers (overlapped with the backward pass except for the last layer's
//   bucket), pipeline sends, ring attention overlapped with attention compute;
// - the pipeline: a simulation of the schedule over per-stage times;
// - memory per rank by category, at the rank that needs the most.
//
// The same plan always gives the same numbers: no measurement happens here.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_ESTIMATOR_H
#define COLOSSAL_COST_ESTIMATOR_H

#include "colossal/cost/Communication.h"
#include "colossal/cost/Memory.h"
#include "colossal/cost/Pipeline.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace colossal::cost {

/// Bytes and time one rank spends in one kind of collective on one axis
/// during one step: what the runtime's counters report for the same plan.
struct CommTotal {
  Collective collective;
  std::string axis;
  double bytes = 0;
  double seconds = 0;
  int calls = 0;
};

struct StageEstimate {
  double forward = 0, backward = 0; // per microbatch, per chunk summed
  double computeForward = 0, computeBackward = 0;
  double commForward = 0, commBackward = 0;
  double dataParallelSeconds = 0, dataParallelExposed = 0;
  double optimizerSeconds = 0, offloadSeconds = 0;
  /// Optimizer offload: bytes per step from device to host (the shard's
  /// gradients) and back (its updated weights).
  double offloadToHost = 0, offloadToDevice = 0;
  int64_t parameters = 0; // local parameter elements
  MemoryBreakdown memory;
  std::vector<CommTotal> comm;
  /// Of `comm`, the collectives after the step's calls off the data axis:
  /// norms completed over the model axes, the pipeline's sums.
  std::vector<CommTotal> afterCalls;
};

struct Estimate {
  Strategy strategy;
  Mesh mesh;
  double stepTime = 0;
  double compute = 0;      // busiest rank's compute
  double exposedComm = 0;  // communication on the critical path
  double bubble = 0;       // pipeline idle time on the busiest rank
  double offload = 0;      // host transfers and host optimizer not hidden
  double optimizer = 0;    // device optimizer step
  double modelFlopsPerStep = 0;
  double tflopsPerGpu = 0;
  double mfu = 0;
  double tokensPerSecond = 0;
  double capacity = 0;
  int peakStage = 0;
  MemoryBreakdown memory; // at the rank that needs the most
  std::vector<StageEstimate> stages;
  PipelineResult pipeline;
  /// Per virtual stage (chunk * pipeline ranks + rank), one microbatch's
  /// collectives inside its forward call and inside its backward call
  /// (recomputed ones included): the trace's communication stream.
  std::vector<std::vector<CommTotal>> stageForwardComm, stageBackwardComm;
  /// Whether the gradient buckets' reductions and ZeRO-3's gathers run on
  /// a second thread beside the step (EstimateOptions).
  bool bucketsOverlapped = true, gathersPrefetched = true;
  /// Per virtual stage, for one microbatch: real layers, seconds in layers,
  /// and seconds outside them (embedding, head, loss); forward + backward
  /// with their communication. The stage balancer reads them.
  std::vector<int64_t> stageLayers;
  std::vector<double> stageLayerSeconds, stageOtherSeconds;
  /// The fewest bytes one layer keeps for one microbatch on a rank (0
  /// without layers): with the peak in flight, a floor under a pipeline
  /// rank's activations that the search uses before simulating.
  double leastLayerActivations = 0;

  /// Offload: a rank's share of its node's host memory (0: unknown, not
  /// checked) and the most pinned host memory any rank needs.
  double hostCapacity = 0;
  double hostPeak = 0;

  bool hostFits() const { return hostCapacity <= 0 || hostPeak <= hostCapacity; }
  bool fits() const { return memory.total() <= capacity && hostFits(); }
  /// The plan's `predicted`, `memory` and `communication` sections.
  Json toJson() const;
  /// Step time breakdown, throughput and memory per rank, as lines of text
  /// for a report.
  std::string summary() const;
  /// One predicted step per pipeline rank, as Chrome-trace JSON (Perfetto).
  Json chromeTrace() const;
};

struct EstimateOptions {
  /// Gradient bucket for data-parallel reduction (PyTorch DDP's default):
  /// one all-reduce per bucket; the emitted program's trainer uses it too.
  double bucketBytes = 25.0 * (1 << 20);
  /// cuBLAS and kernel workspace kept per device.
  double workspaceBytes = 32.0 * (1 << 20);
  /// All-reduces of two floats per trainable tensor a ZeRO step makes to
  /// complete norms across shards: one for the gradient norm, one more for
  /// LAMB's trust ratios (the default optimizer).
  int shardedNormReductions = 2;
  /// Optimizer moments per trainable weight: 2 for LAMB and Adam (the
  /// default), 1 for SGD and LARS (the momentum buffer). With 16-bit
  /// weights the optimizer also keeps a float32 master copy.
  int optimizerMoments = 2;
  /// Keep the simulated pipeline's tasks (for chromeTrace()); the search
  /// turns it off.
  bool recordPipelineTasks = true;
  /// Where the explicit sharding comes from (checkSharding).
  SplitLayouts layouts = SplitLayouts::Blocks;
  /// Full recomputation re-runs the layers' forward collectives too
  /// (Megatron-LM); the partitioner's recomputation keeps their results as
  /// checkpoints instead (passes/memory/RecomputeLayers.h), so the program's
  /// predictions turn this off.
  bool recomputeCollectives = true;
  /// Whether the data axis's gradient buckets are reduced on a second
  /// thread while the backward pass runs (all but the last), as PyTorch DDP
  /// and Megatron-LM do; and whether ZeRO-3's gathers are prefetched there.
  /// The emitted programs do either only where their trainer does
  /// (evaluationOf).
  bool overlapGradientBuckets = true;
  bool prefetchGathers = true;
  // A field added here is compared in Estimator.cpp's sameOptions too.
};

/// What an estimate computes before ZeRO and offload enter: the sharding's
/// checks, the op costs, the activations, the pipeline and the parameters
/// per rank. A search evaluating one plan under several ZeRO stages and
/// offloads passes one holder to each `estimate`: the first call fills it,
/// the others reuse it where the graph, sharding and cluster (the same
/// objects, unchanged between the calls), the options and the strategy but
/// its ZeRO and offload are the same, and only add the model states.
class EstimateReuse {
public:
  EstimateReuse();
  ~EstimateReuse();
  EstimateReuse(const EstimateReuse &) = delete;
  EstimateReuse &operator=(const EstimateReuse &) = delete;
  struct Base;

private:
  friend std::optional<Estimate> estimate(const Graph &, const Strategy &, const Cluster &, std::string &,
                                          const GraphSharding *, const EstimateOptions &, EstimateReuse *);
  std::unique_ptr<Base> base_;
};

/// Evaluates the plan; nullopt with `error` when it cannot run (a split that
/// does not divide, a device count the cluster lacks, ...). With `sharding`
/// null, shardings come from the strategy's templates.
std::optional<Estimate> estimate(const Graph &graph, const Strategy &strategy, const Cluster &cluster,
                                 std::string &error, const GraphSharding *sharding = nullptr,
                                 const EstimateOptions &options = {}, EstimateReuse *reuse = nullptr);

/// Bytes one microbatch's ops in `layer` keep for backward on one rank (the
/// activation memory of that layer), under `recompute`; with
/// `keepShardedInputs`, inputs an op gathers are kept as the producer's shard.
double savedActivationBytes(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                            Recompute recompute, int layer, bool keepShardedInputs = false);

} // namespace colossal::cost

#endif // COLOSSAL_COST_ESTIMATOR_H
