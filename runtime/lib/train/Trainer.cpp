//===- Trainer.cpp - the main loop of an emitted training program ---------===//
//
// The loop: a rank prepares its weights, optimizer and data, then per step
// runs each microbatch's step, averages the gradients over the data axis,
// completes their norm and updates; it logs what the step moved and held.
// The pieces are the files beside it: the flags (TrainerOptions), the data
// (DataSource), the weights and optimizer state (ModelState), where the
// step reads the weights (ParameterSources), the gradients it hands over
// (ReportedGradients) and its own collectives (TensorAxisCollectives).
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/train/Trainer.h"

#include "DataSource.h"
#include "ModelState.h"
#include "ParameterSources.h"
#include "PipelineStep.h"
#include "ReportedGradients.h"
#include "TensorAxisCollectives.h"
#include "TrainerOptions.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/Memory.h"
#include "colossal/runtime/TrackedAllocator.h"
#include "colossal/runtime/comm/CommCounters.h"
#include "colossal/runtime/comm/GridGroups.h"
#include "colossal/runtime/comm/Launch.h"
#include "colossal/runtime/comm/Mesh.h"
#include "colossal/runtime/comm/MpiCommunicator.h"
#include "colossal/runtime/comm/ProcessGroups.h"
#include "colossal/runtime/comm/SingleRankCommunicator.h"
#include "colossal/runtime/io/Checkpoint.h"
#include "colossal/runtime/io/StepLog.h"
#include "colossal/runtime/train/GradientBuckets.h"
#include "colossal/runtime/train/GradientDump.h"
#include "colossal/runtime/train/Health.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <malloc.h>
#include <memory>
#include <optional>
#include <set>

namespace colossal::rt {

namespace {

using namespace trainer;

/// Everything a rank prepares before the first collective.
struct Prepared {
  Options options;
  State state;
  std::unique_ptr<DataSource> data;
};

Prepared prepare(const TrainingProgram &program, const Options &o, int rank, int ranks, int tensorRank = 0,
                 int tensorRanks = 1) {
  if (o.settings.offloadOptimizer && o.settings.zero == 0 && ranks > 1)
    fail(program.model, "optimizer offload moves each rank's ZeRO shard of the optimizer to the host, and this "
                        "program has no ZeRO stage over its " +
                            std::to_string(ranks) + " ranks (recompile with --strategy zero=1,offload=optimizer)");
  // Found before training, not at the save after it.
  if (!o.save.empty() && !canHoldCheckpoint(o.save, o.saveEvery > 0))
    fail("--save " + o.save, std::string("it exists and holds other files than ") +
                                 (o.saveEvery > 0 ? "checkpoints" : "a checkpoint") +
                                 "; give a new directory or an earlier save's");
  Prepared p{o,
             loadWeights(program, o.weights, tensorRank, tensorRanks,
                         o.weightsGiven ? std::nullopt : std::optional<uint64_t>(o.seed)),
             nullptr};
  prepareOptimizer(program, o.settings.optimizer, p.state);
  if (p.state.trainable.empty())
    fail(program.model, "has no trainable parameter");
  p.data = std::make_unique<DataSource>(program, p.options, rank, ranks);
  return p;
}

/// Averages `values` over the data-parallel ranks.
void averageOverRanks(Communicator &dp, float *values, int64_t n) {
  if (dp.size() == 1)
    return;
  dp.allReduce(Buffer::of(values, DType::F32, n));
  float inverse = 1.0f / float(dp.size());
  for (int64_t k = 0; k < n; ++k)
    values[k] *= inverse;
}

/// The ranks a rank trains with: the data-parallel axis, the tensor and
/// sequence axes (null without them) and every rank (checkpoints, the log).
struct RankGroups {
  Communicator &dp;
  Communicator *tp;
  Communicator *sp;
  Communicator &world;
  /// The pipeline axis, with the rank's part of a pipelined program.
  Communicator *pp = nullptr;
  const PipelineRank *pipeline = nullptr;
  /// A tensor grid's axes inside tp, found by name: the rank's row's and
  /// column's groups (tp_row: ranks of one grid column; tp_col: ranks of
  /// one grid row); on 2.5D's layers also the rank's copies in the other
  /// layers (tp_depth) and its grid column across them (tp_rows), `tp`
  /// being the rank's layer; on a 3D cube tp_in, tp_w, tp_out and the rows
  /// of one tp_in or tp_out column (tp_rows_in, tp_rows_out).
  std::vector<Communicator *> grid;
  Communicator *gridAxis(const std::string &name) const {
    for (Communicator *c : grid)
      if (c->axis() == name)
        return c;
    return nullptr;
  }
};

/// Seconds to the microsecond, for the log's time breakdown.
std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", seconds);
  return text;
}

/// The step's activations as its plan holds them (StepMemory.h), in the
/// space the step runs in.
std::string plannedActivations() {
  const MemoryTracker &planned = MemoryTracker::planned();
  MemorySpace space = planned.peak(MemorySpace::Device) > 0 ? MemorySpace::Device : MemorySpace::Host;
  return "{\"current\": " + std::to_string(planned.current(space, MemoryCategory::Activations)) +
         ", \"peak\": " + std::to_string(planned.peak(space, MemoryCategory::Activations)) + "}";
}

/// The process's high-water resident memory, in bytes: the address space's
/// own (VmHWM), not getrusage's, which a process keeps from before exec (a
/// large launching process would show through).
int64_t residentPeakBytes() {
  std::FILE *status = std::fopen("/proc/self/status", "r");
  if (!status)
    return -1;
  char line[256];
  long long kb = -1;
  while (std::fgets(line, sizeof line, status))
    if (std::sscanf(line, "VmHWM: %lld kB", &kb) == 1)
      break;
  std::fclose(status);
  return kb < 0 ? -1 : int64_t(kb) * 1024;
}

/// FILE.rank-0000k.json for world rank k.
void writeTrace(const std::string &file, int worldRank, const std::string &text) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".rank-%05d.json", worldRank);
  std::string path = file + suffix;
  std::FILE *out = std::fopen(path.c_str(), "w");
  if (!out)
    fail("--trace " + file, "cannot create " + path + ": " + std::strerror(errno));
  bool written = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (std::fclose(out) != 0 || !written)
    fail("--trace " + file, "cannot write " + path);
}

/// `overlapAllowed`: the communicator may be driven from a second thread (one
/// at a time), so gradient buckets can be reduced during the backward pass.
void train(const TrainingProgram &program, Prepared &p, const RankGroups &groups, CommCounters *counters,
           bool overlapAllowed) {
  const Options &o = p.options;
  State &s = p.state;
  Communicator &dp = groups.dp;
  Communicator *tp = groups.tp && groups.tp->size() > 1 ? groups.tp : nullptr;
  Communicator *sp = groups.sp && groups.sp->size() > 1 ? groups.sp : nullptr;
  int64_t tensorRank = tp ? tp->rank() : 0, tensorRanks = tp ? tp->size() : 1;
  // The step's own sums run on this thread: no second thread may talk then.
  overlapAllowed = overlapAllowed && !tp && !sp;
  std::vector<Communicator *> modelAxes = {tp, sp};
  modelAxes.insert(modelAxes.end(), groups.grid.begin(), groups.grid.end());
  TensorAxisCollectives collectives(modelAxes);
  // The split tensors' norms are the sums of their slices' over the axes
  // splitting them (two floats per tensor): the tensor axis, or on a grid
  // the grid axes a block is split over; whole tensors' are every rank's own.
  std::vector<std::pair<Communicator *, std::vector<size_t>>> splitOver;
  auto completedOver = [&](const ProgramParameter &p) -> Communicator * {
    if (p.splitDim >= 0)
      return tp;
    // (A block split over more than one grid axis is split over all of
    // the ranks holding one copy of the weights: tp.)
    std::set<std::string> over;
    for (const std::vector<std::string> &axes : p.gridSplit)
      over.insert(axes.begin(), axes.end());
    return over.size() > 1 ? tp : over.size() == 1 ? groups.gridAxis(*over.begin()) : nullptr;
  };
  for (size_t t = 0; t < s.trainable.size(); ++t)
    if (Communicator *c = completedOver(program.parameters[s.trainable[t]]); c && c->size() > 1) {
      auto it = std::find_if(splitOver.begin(), splitOver.end(), [c](const auto &group) { return group.first == c; });
      (it == splitOver.end() ? splitOver.emplace_back(c, std::vector<size_t>{}) : *it).second.push_back(t);
    }
  CompleteSquares completeSplit;
  if (!splitOver.empty())
    completeSplit = [&splitOver](std::vector<float> &squares) {
      for (auto &[communicator, split] : splitOver) {
        std::vector<float> packed;
        for (size_t t : split)
          packed.push_back(squares[2 * t]), packed.push_back(squares[2 * t + 1]);
        communicator->allReduce(Buffer::of(packed.data(), DType::F32, int64_t(packed.size())));
        for (size_t k = 0; k < split.size(); ++k)
          squares[2 * split[k]] = packed[2 * k], squares[2 * split[k] + 1] = packed[2 * k + 1];
      }
    };
  bool lead = groups.world.rank() == 0;
  s.lossScale = o.settings.lossScaling.dynamic ? o.settings.lossScaling.initial : 1.0;
  int64_t start = o.resume.empty() ? 0 : resumeState(groups.world, o.resume, program, o, s, tensorRank, tensorRanks);
  if (start > o.settings.steps)
    fail("--steps", "the checkpoint is at step " + std::to_string(start) + ", past --steps " +
                        std::to_string(o.settings.steps));
  if ((o.settings.zero > 0 && dp.size() > 1) || o.settings.offloadOptimizer) {
    // One rank offloading is stage 1 with the whole state as its shard.
    int stage = dp.size() > 1 ? int(o.settings.zero) : 1;
    std::vector<Floats *> weights;
    for (size_t index : s.trainable)
      weights.push_back(&s.parameters[index].floats);
    if (o.settings.offloadOptimizer)
      s.offload = makeHostCopyEngine();
    s.sharded = std::make_unique<ShardedOptimizer>(dp, stage, o.settings.optimizer, s.conventions, weights,
                                                   s.offload.get());
    if (completeSplit)
      s.sharded->setCompleteSquares(completeSplit);
    if (groups.pipeline)
      s.sharded->setTotalSquares([pipeline = groups.pipeline, pp = groups.pp](const std::vector<float> &squares) {
        return pipelineTotalSquares(*pipeline, *pp, squares);
      });
    s.sharded->scatterMoments(s.m, s.v);
    // Only the shard's state is kept.
    for (auto *list : {&s.m, &s.v})
      std::vector<Floats>().swap(*list);
    s.tensors.clear();
    if (stage >= 2) {
      for (Floats &g : s.grads)
        Floats().swap(g);
    }
    if (stage >= 3) {
      // The shard holds this rank's chunks; whole weights exist only while
      // the step reads them. Frozen ones stay whole.
      for (size_t index : s.trainable)
        Floats().swap(s.parameters[index].floats);
    }
  }
  std::unique_ptr<GatheredParameters> gathered;
  if (s.sharded && s.sharded->stage() == 3)
    gathered = std::make_unique<GatheredParameters>(program, s, *s.sharded, o.settings.prefetchBytes,
                                                    overlapAllowed);
  ReplicatedParameters replicated(s.parameters);
  StepParameters &stepParameters = gathered ? static_cast<StepParameters &>(*gathered) : replicated;
  LearningRateSchedule schedule;
  schedule.base = o.settings.optimizer.lr, schedule.warmupSteps = o.settings.warmupSteps;
  schedule.totalSteps = o.settings.steps, schedule.decay = o.settings.schedule;
  schedule.minRatio = o.settings.minLrRatio;
  // A pipeline's other ranks hold other stages, so other memory: the first
  // rank of each writes its own records beside the log (LOG.pipeline-rank-K).
  bool stageLead = groups.pipeline && groups.pp->rank() > 0 && dp.rank() == 0 && tensorRank == 0 &&
                   (sp ? sp->rank() : 0) == 0 &&
                   (groups.gridAxis("tp_depth") ? groups.gridAxis("tp_depth")->rank() : 0) == 0;
  StepLog log(lead                          ? o.log
              : stageLead && !o.log.empty() ? o.log + ".pipeline-rank-" + std::to_string(groups.pp->rank())
                                            : std::string());
  ProgressLine progress(o.settings.steps, lead && !o.quiet);
  auto begin = std::chrono::steady_clock::now();
  int64_t microbatches = o.settings.microbatches;
  std::vector<int64_t> gradientElements;
  for (size_t index : s.trainable)
    gradientElements.push_back(elementsOf(program.parameters[index].shape));
  OverlappedGradientAverage average(dp, planGradientBuckets(gradientElements, o.settings.gradientBucketBytes),
                                    s.grads);
  ReportedGradients reported(program, s, average, microbatches);
  PipelineTimeline timeline;
  // The traced step's collectives, each with its span (--trace).
  CommTimeline commTimeline;
  if (counters && !o.trace.empty())
    counters->setTimeline(&commTimeline);
  // Detached before the timeline goes, however train() ends.
  struct Detach {
    CommCounters *counters;
    ~Detach() {
      if (counters)
        counters->setTimeline(nullptr);
    }
  } detach{counters};
  for (int64_t step = start + 1; step <= o.settings.steps; ++step) {
    auto stepBegin = std::chrono::steady_clock::now();
    MemoryTracker::global().resetPeaks();
    MemoryTracker::planned().resetPeaks();
    if (counters)
      counters->reset();
    // --trace writes the last step.
    const bool traced = !o.trace.empty() && step == o.settings.steps;
    if (counters && traced)
      commTimeline.start();
    if (gathered)
      gathered->prefetcher().resetCounts();
    int64_t toHostBefore = s.offload ? s.offload->bytesToHost() : 0;
    int64_t toDeviceBefore = s.offload ? s.offload->bytesToDevice() : 0;
    for (Floats &g : s.grads)
      std::fill(g.begin(), g.end(), 0.0f);
    bool scatterEachMicrobatch = s.sharded && s.sharded->stage() >= 2;
    average.begin();
    if (s.sharded)
      s.sharded->beginStep();
    float loss = 0;
    // Where the step's wall time goes, for the log: reading the data, the
    // emitted step (on the CUDA target its uploads, kernels and downloads),
    // and the optimizer; the rest is the gradients' reduction and bookkeeping.
    double dataSeconds = 0, computeSeconds = 0;
    auto since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    // A program without a pipeline traces its step calls (a microbatch's
    // forward and backward, "F0+B0", as the plan's trace names them), the
    // gradients' reduction it waits for and the optimizer.
    auto span = [&](std::string name, std::chrono::steady_clock::time_point from) {
      if (!groups.pipeline)
        timeline.spans.push_back(
            {std::move(name), std::chrono::duration<double>(from - stepBegin).count(), since(stepBegin), true});
    };
    if (!groups.pipeline)
      timeline.spans.clear();
    if (groups.pipeline) {
      // The rank's forward and backward calls in the schedule's order; the
      // loss is the last stage's.
      auto computeBegin = std::chrono::steady_clock::now();
      loss = runPipelineStep(
          *groups.pipeline, *groups.pp,
          [&](int64_t m) {
            auto dataBegin = std::chrono::steady_clock::now();
            std::vector<Tensor> inputs = p.data->microbatch(step - 1, m);
            dataSeconds += since(dataBegin);
            return inputs;
          },
          stepParameters, reported, collectives, o.seed, uint64_t(step), int64_t(dp.rank()) * microbatches,
          float(s.lossScale), [&] { reported.beginMicrobatch(false, false); }, &timeline);
      computeSeconds += since(computeBegin);
      groups.pp->allReduce(Buffer::of(&loss, DType::F32, 1));
      sumSharedGradients(*groups.pipeline, *groups.pp, s.grads);
    }
    for (int64_t m = 0; m < (groups.pipeline ? 0 : microbatches); ++m) {
      auto dataBegin = std::chrono::steady_clock::now();
      std::vector<Tensor> inputs = p.data->microbatch(step - 1, m), grads;
      dataSeconds += since(dataBegin);
      Tensor microLoss;
      StepRandomness random{o.seed, uint64_t(step), int64_t(dp.rank()) * microbatches + m};
      // ZeRO-2 and 3 reduce-scatter instead; ZeRO-3 gathers during the step
      // (one thread at a time on the communicator).
      reported.beginMicrobatch(overlapAllowed && !scatterEachMicrobatch && dp.size() > 1 && m + 1 == microbatches,
                               scatterEachMicrobatch);
      if (gathered)
        gathered->prefetcher().beginCall();
      {
        // What the step allocates is its values (kernels charge their
        // scratch as workspace, collectives their buffers as communication).
        MemoryScope scope(MemoryCategory::Activations);
        auto computeBegin = std::chrono::steady_clock::now();
        program.step(inputs, stepParameters, random, float(s.lossScale), microLoss, grads, reported, collectives);
        computeSeconds += since(computeBegin);
        span("F" + std::to_string(m) + "+B" + std::to_string(m), computeBegin);
      }
      if (gathered) {
        gathered->prefetcher().finishCall();
        gathered->requireAllReleased();
      }
      if (microLoss.integer || microLoss.floats.size() != 1)
        fail(program.model, "the step's loss is not a float scalar");
      if (grads.size() != s.trainable.size())
        fail(program.model, "the step returned " + std::to_string(grads.size()) + " gradients for " +
                                std::to_string(s.trainable.size()) + " trainable parameters");
      loss += microLoss.floats[0] / float(microbatches);
      // The gradients the step did not report (the CUDA step reports none).
      for (size_t t = 0; t < grads.size(); ++t)
        if (!reported.taken(t))
          reported.take(t, grads[t]);
      // ZeRO-2/3: this microbatch's gradients go to their shards at once.
      if (scatterEachMicrobatch)
        s.sharded->reduceStaged();
    }
    // Data parallel: every rank ends the step with the average of all ranks'
    // gradients (one all-reduce per bucket, the buckets in a fixed order), so
    // the replicated weights stay identical. ZeRO-2 reduced them per
    // microbatch.
    auto reductionBegin = std::chrono::steady_clock::now();
    if (!scatterEachMicrobatch) {
      if (!s.sharded)
        for (size_t t = 0; t < s.grads.size(); ++t)
          s.tensors[t].grad = s.tensors[t].update = s.grads[t].data();
      average.finish();
    }
    if (s.sharded) {
      if (scatterEachMicrobatch)
        s.sharded->finishAccumulation();
      else
        s.sharded->useGradients(s.grads);
    }
    if (dp.size() > 1)
      span("data-parallel reduction (exposed)", reductionBegin);
    // The step's mean loss over the data-parallel ranks, for the log: one
    // all-reduce of a float, counted and predicted like the others.
    averageOverRanks(dp, &loss, 1);
    // The gradients are of the scaled loss until the optimizer unscales them.
    float unscale = float(1.0 / s.lossScale);
    std::optional<GradientDump> dump;
    if (!o.dumpGradients.empty() && step == start + 1)
      dump = scatterEachMicrobatch ? GradientDump::ofShard(s.sharded->gradientShard(), unscale)
                                   : GradientDump::ofTensors(s.grads, unscale);
    double gradNorm = (s.sharded         ? s.sharded->gradientNorm()
                       : groups.pipeline ? pipelineGradientNorm(*groups.pipeline, *groups.pp, s.tensors, completeSplit)
                                         : gradientNorm(s.tensors, completeSplit)) *
                      unscale;
    double lr = schedule.at(step);
    double stepLossScale = s.lossScale;
    // Every rank computes the same norm (after the gradients' reduction), so
    // every rank skips the same steps.
    bool skip = o.settings.lossScaling.dynamic && std::isfinite(loss) && !std::isfinite(gradNorm);
    double optimizerSeconds = 0;
    if (skip) {
      // fp16 gradients overflowed: no update, a smaller scale next step.
      s.lossScale *= o.settings.lossScaling.backoff;
      s.finiteSteps = 0;
      if (s.lossScale < 0x1p-24)
        fail("step " + std::to_string(step),
             "the gradients are not finite at any loss scale (the loss was " + std::to_string(loss) + ")");
    } else {
      requireFiniteStep(step, loss, gradNorm);
      double clip = o.settings.optimizer.clipGradNorm;
      // Unscaling and clipping are one factor on every gradient; a power-of-two
      // scale divides exactly.
      float gradScale = unscale * (clip > 0 && gradNorm > clip ? float(clip / gradNorm) : 1.0f);
      ++s.updates;
      auto optimizerBegin = std::chrono::steady_clock::now();
      if (s.sharded)
        s.sharded->step(lr, s.updates, gradScale);
      else
        optimizerStep(o.settings.optimizer, lr, s.updates, s.tensors, gradScale, completeSplit);
      optimizerSeconds = since(optimizerBegin);
      span("optimizer", optimizerBegin);
      if (o.settings.lossScaling.dynamic && ++s.finiteSteps >= o.settings.lossScaling.window) {
        s.lossScale *= o.settings.lossScaling.growth;
        s.finiteSteps = 0;
      }
    }
    std::string comm = counters ? counters->json() : std::string();

    auto now = std::chrono::steady_clock::now();
    StepRecord record;
    record.step = step, record.loss = loss, record.lr = lr, record.gradNorm = gradNorm;
    record.lossScale = stepLossScale;
    if (o.settings.lossScaling.dynamic)
      record.extra.push_back({"skipped", skip ? "true" : "false"});
    double stepSeconds = std::chrono::duration<double>(now - stepBegin).count();
    record.tokensPerSecond = stepSeconds > 0 ? double(p.data->tokensPerStep()) / stepSeconds : 0;
    record.time = std::chrono::duration<double>(now - begin).count();
    record.extra.push_back({"seconds", "{\"data\": " + formatSeconds(dataSeconds) +
                                           ", \"step\": " + formatSeconds(computeSeconds) +
                                           ", \"optimizer\": " + formatSeconds(optimizerSeconds) + "}"});
    if (counters)
      record.extra.push_back({"comm", comm});
    if (groups.pipeline) {
      // Each pipeline rank's idle share of its step (rank 0 logs; every rank
      // writes its own into --trace).
      char pipeline[96];
      std::snprintf(pipeline, sizeof pipeline, "{\"rank\": %d, \"idle_fraction\": %.6f, \"seconds\": %.6f}",
                    groups.pp->rank(), timeline.idleFraction(), timeline.seconds);
      record.extra.push_back({"pipeline", pipeline});
      if (traced) {
        commTimeline.stop();
        writeTrace(o.trace, groups.world.rank(), timeline.chromeTrace(groups.pp->rank(), &commTimeline));
      }
    } else if (traced) {
      commTimeline.stop();
      timeline.seconds = std::chrono::duration<double>(now - stepBegin).count();
      timeline.origin = stepBegin;
      writeTrace(o.trace, groups.world.rank(), timeline.chromeTrace(0, &commTimeline));
    }
    if (dp.size() > 1 && !scatterEachMicrobatch)
      record.extra.push_back({"gradient_buckets", "{\"total\": " + std::to_string(average.buckets().size()) +
                                                      ", \"started_during_step\": " +
                                                      std::to_string(average.startedDuringStep()) + "}"});
    if (gathered)
      record.extra.push_back({"zero3_gathers", "{\"total\": " + std::to_string(gathered->prefetcher().gathers()) +
                                                   ", \"prefetched\": " +
                                                   std::to_string(gathered->prefetcher().prefetched()) + "}"});
    // This rank's model states, buffers and their peaks during the step, as
    // the allocator charged them; beside them the step's activations as its
    // plan says it holds them, and what the process's resident memory ever
    // reached (the libraries' own buffers included).
    record.extra.push_back({"memory", MemoryTracker::global().json(MemorySpace::Host)});
    record.extra.push_back({"planned_activations", plannedActivations()});
    record.extra.push_back({"rss_peak_bytes", std::to_string(residentPeakBytes())});
    if (int64_t inUse = deviceBytesInUse(); inUse >= 0) {
      record.extra.push_back({"device_memory", MemoryTracker::global().json(MemorySpace::Device)});
      record.extra.push_back({"device_in_use_bytes", std::to_string(inUse)});
    }
    if (s.offload) {
      // What went to and from the host this step, and what the host keeps.
      record.extra.push_back({"offload", "{\"to_host\": " + std::to_string(s.offload->bytesToHost() - toHostBefore) +
                                             ", \"to_device\": " +
                                             std::to_string(s.offload->bytesToDevice() - toDeviceBefore) + "}"});
      record.extra.push_back({"pinned_memory", MemoryTracker::global().json(MemorySpace::PinnedHost)});
    }
    log.write(record);
    progress.update(record);
    if (dump)
      dump->write(o.dumpGradients, program, s.trainable, s.sharded.get(), tp, groups.world.rank());
    // The last step's checkpoint is written after the loop.
    if (o.saveEvery > 0 && step % o.saveEvery == 0 && step < o.settings.steps)
      saveState(groups.world, o.save, program, o, s, step, tensorRank, tensorRanks);
  }
  progress.finish();
  if (!o.save.empty())
    saveState(groups.world, o.save, program, o, s, std::max(start, o.settings.steps), tensorRank, tensorRanks);
  if (!o.exportDir.empty())
    exportWeights(groups.world, o.exportDir, program,
                  groups.pipeline ? groups.pipeline->allParameters : program.parameters, o, s,
                  std::max(start, o.settings.steps), tensorRank, tensorRanks);
}

void printError(const char *argv0, const std::string &call, const std::string &reason) {
  std::fprintf(stderr, "%s: error: %s: %s\n", argv0, call.c_str(), reason.c_str());
}

/// One rank: a single process without a launcher.
int trainAlone(int argc, char **argv, const TrainingProgram &program) {
  try {
    std::optional<Options> options = parseOptions(argc, argv, program);
    if (!options)
      return 0;
    Prepared p = prepare(program, *options, 0, 1);
    SingleRankCommunicator dp("dp");
    train(program, p, RankGroups{dp, nullptr, nullptr, dp}, nullptr, /*overlapAllowed=*/false);
    return 0;
  } catch (const Error &e) {
    printError(argv[0], e.call(), e.reason());
  } catch (const std::exception &e) {
    printError(argv[0], program.model, e.what());
  }
  return 1;
}

/// Data-parallel (and tensor-parallel) ranks under a launcher. Set-up
/// failures (flags, files) are agreed on before the first collective, so
/// every rank leaves and the lowest failing rank says why; failures after
/// that abort the job.
int trainParallel(int argc, char **argv, const TrainingProgram &program, int ranks, int tensorRanks, int sequenceRanks,
                  int pipelineRanks) {
  MpiSession mpi(&argc, &argv);
  CommCounters counters;
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world(&counters);
  // The tensor axis inside: its ranks are neighbours (one node); the
  // sequence axis next; the pipeline axis outside, across nodes
  // (Megatron-LM's order).
  std::string outer = (pipelineRanks > 1 ? "pp=" + std::to_string(pipelineRanks) + "," : "") +
                      "dp=" + std::to_string(ranks) + (sequenceRanks > 1 ? ",sp=" + std::to_string(sequenceRanks) : "");
  std::string mesh = outer + (tensorRanks > 1 ? ",tp=" + std::to_string(tensorRanks) : "");
  ProcessGroups groups = ProcessGroups::overMpi(MeshShape::parse(mesh), *world);
  // A tensor grid: the same ranks split again by the grid's axes.
  std::optional<GridGroups> gridGroups;
  if (int64_t q = program.settings.tensorGrid; q > 1) {
    std::string error;
    gridGroups = GridGroups::overMpi(
        outer, GridShape{q, std::max<int64_t>(program.settings.tensorGridDepth, 1), program.settings.tensorCube},
        tensorRanks, *world, error);
    if (!gridGroups) {
      printError(argv[0], program.model, error);
      return 1;
    }
  }
  std::vector<Communicator *> grid = gridGroups ? gridGroups->axes() : std::vector<Communicator *>{};
  Communicator &dp = groups.axis("dp");
  // (On 2.5D's layers the tensor ranks that hold one copy of the weights
  // are the rank's layer: its blocks are sliced, saved and completed there.)
  Communicator *layer = gridGroups ? gridGroups->layer() : nullptr;
  Communicator *tp = layer ? layer : tensorRanks > 1 ? &groups.axis("tp") : nullptr;
  Communicator *sp = sequenceRanks > 1 ? &groups.axis("sp") : nullptr;
  Communicator *pp = pipelineRanks > 1 ? &groups.axis("pp") : nullptr;
  std::optional<Prepared> prepared;
  std::optional<PipelineRank> pipeline;
  std::string call, reason;
  bool help = false;
  try {
    std::optional<Options> options = parseOptions(argc, argv, program, /*printHelp=*/mpi.rank() == 0);
    if (!options)
      help = true;
    else {
      // A pipeline rank trains its stages' part of the model.
      if (pp)
        pipeline.emplace(pipelineRankOf(program, pp->rank(), pp->size()));
      prepared.emplace(prepare(pipeline ? pipeline->program : program, *options, dp.rank(), ranks, tp ? tp->rank() : 0,
                               tp ? tp->size() : 1));
    }
  } catch (const Error &e) {
    call = e.call(), reason = e.reason();
  } catch (const std::exception &e) {
    call = program.model, reason = e.what();
  }
  int worldSize = ranks * tensorRanks * sequenceRanks * pipelineRanks;
  int64_t failed = reason.empty() ? 0 : worldSize - mpi.rank();
  world->allReduce(Buffer::of(&failed, DType::I64, 1), ReduceOp::Max);
  if (failed > 0) {
    if (!reason.empty() && worldSize - mpi.rank() == failed)
      printError(argv[0], (mpi.rank() == 0 ? "" : "rank " + std::to_string(mpi.rank()) + ": ") + call, reason);
    return 1;
  }
  if (help)
    return 0;
  counters.reset();
  return runOrAbort(
      [&] {
        train(pipeline ? pipeline->program : program, *prepared,
              RankGroups{dp, tp, sp, *world, pp, pipeline ? &*pipeline : nullptr, grid}, &counters,
              mpi.threadsMayCommunicate());
        return 0;
      },
      [] { MpiSession::abort(1); }, worldSize);
}

} // namespace

int trainerMain(int argc, char **argv, const TrainingProgram &program) {
  // Every step allocates the same tensors again: keep freed blocks in the
  // heap rather than returning them to the system and faulting them back in.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // A file-size limit reached while saving is a failed write (EFBIG), which
  // the save reports on every rank, not a signal that kills one rank.
  std::signal(SIGXFSZ, SIG_IGN);
  // --help needs no launcher: a program compiled for N ranks explains itself
  // when started alone.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      trainer::printUsage(argv[0], program);
      return 0;
    }
  int ranks = int(program.settings.ranks), tensorRanks = int(std::max<int64_t>(program.settings.tensorRanks, 1));
  int sequenceRanks = int(std::max<int64_t>(program.settings.sequenceRanks, 1));
  int pipelineRanks = int(std::max<int64_t>(program.settings.pipelineRanks, 1));
  int worldSize = ranks * tensorRanks * sequenceRanks * pipelineRanks;
  LaunchInfo launch;
  try {
    launch = detectLaunch();
  } catch (const Error &e) {
    printError(argv[0], e.call(), e.reason());
    return 1;
  }
  if (launch.worldSize != worldSize) {
    std::string compiled =
        std::to_string(ranks) + " data-parallel rank" + (ranks == 1 ? "" : "s") +
        (sequenceRanks > 1 ? " x " + std::to_string(sequenceRanks) + " sequence-parallel ranks" : "") +
        (tensorRanks > 1 ? " x " + std::to_string(tensorRanks) + " tensor-parallel ranks" : "") +
        (pipelineRanks > 1 ? " x " + std::to_string(pipelineRanks) + " pipeline ranks" : "");
    // Every rank says it: the launcher may stop the others as soon as one
    // exits, before rank 0 has written anything.
    printError(argv[0], launch.rank == 0 ? "launch" : "rank " + std::to_string(launch.rank) + ": launch",
               "this program was compiled for " + compiled + " and started as " +
                   std::to_string(launch.worldSize) + " (" +
                   (worldSize == 1 ? std::string("run it without mpirun, or recompile with --gpus N")
                                   : "run it with mpirun -np " + std::to_string(worldSize)) +
                   ")");
    return 1;
  }
  return worldSize == 1 ? trainAlone(argc, argv, program)
                        : trainParallel(argc, argv, program, ranks, tensorRanks, sequenceRanks, pipelineRanks);
}

} // namespace colossal::rt
