//===- Pipeline.h - simulating a pipeline schedule ------------------*- C++ -*-===//
//
// Narayanan et al. (SC'21) give the bubble of GPipe and 1F1B as (p - 1) / m
// of the ideal time for p stages and m microbatches, and (p - 1) / (v m)
// with v interleaved chunks. The formula assumes identical stages; real
// stages differ (the first holds the embedding, the last the head and the
// loss), so the cost model runs the schedule instead: each pipeline rank
// executes its forward and backward tasks in the schedule's order, each task
// starting when its rank is free and its dependency (the previous stage's
// forward, the next stage's backward) has arrived. The makespan is the
// pipeline's part of the step time; the peak count of forwards whose backward
// has not run yet is what the rank must keep activations for.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_PIPELINE_H
#define COLOSSAL_COST_PIPELINE_H

#include "colossal/cost/Plan.h"

#include <string>
#include <vector>

namespace colossal::cost {

struct ChunkTimes {
  double forward = 0;  // one microbatch through this chunk
  double backward = 0;
};

struct PipelineTask {
  int rank, chunk, microbatch;
  bool forward;
  double start, end;
};

struct PipelineResult {
  double makespan = 0;
  /// Per rank: the most chunk-microbatches held for backward at once.
  std::vector<int> peakInFlight;
  /// Per rank: time spent computing.
  std::vector<double> busy;
  std::vector<PipelineTask> tasks;
};

/// Simulates `schedule` on `ranks` pipeline ranks with `chunks` model chunks
/// each (1 except for the interleaved schedule) and `microbatches`
/// microbatches. `times[c * ranks + r]` is virtual stage c * ranks + r;
/// `p2pSeconds` is the activation transfer between consecutive stages.
/// Fails (returns false, sets `error`) when the schedule cannot run. With
/// `recordTasks` false, `result.tasks` stays empty (the search needs only the
/// times; traces need the tasks).
bool simulatePipeline(Schedule schedule, int ranks, int chunks, int microbatches,
                      const std::vector<ChunkTimes> &times, double p2pSeconds,
                      PipelineResult &result, std::string &error, bool recordTasks = true);

/// The most chunk-microbatches `rank` holds for backward at once under
/// `schedule`: its peakInFlight in simulatePipeline, which depends on the
/// schedule's order alone, not on the times. The search bounds a plan's
/// activation memory with it before simulating.
int peakInFlight(Schedule schedule, int rank, int ranks, int chunks, int microbatches);

/// The most bytes `rank` holds for backward at once when one microbatch of
/// its chunk c keeps `chunkBytes[c]`: under the interleaved schedule its
/// chunks keep different amounts (the last stage's head and loss).
double peakHeldBytes(Schedule schedule, int rank, int ranks, int chunks, int microbatches,
                     const std::vector<double> &chunkBytes);

} // namespace colossal::cost

#endif // COLOSSAL_COST_PIPELINE_H
