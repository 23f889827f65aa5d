//===- PipelineSchedule.h - the order a pipeline rank runs its work -*- C++ -*-===//
//
// A pipeline of `ranks` ranks, each holding `chunks` model chunks (virtual
// stage c * ranks + r on rank r, Megatron-LM's interleaving; one chunk
// otherwise), runs every microbatch's forward and backward through every
// virtual stage. The schedule fixes each rank's order of tasks:
//
// - GPipe (Huang et al. 2019): every forward, then every backward;
// - 1F1B (PipeDream-Flush, Narayanan et al. 2021): ranks - rank - 1
//   warm-up forwards, then one forward and one backward in turn, then the
//   remaining backwards, so a rank holds at most ranks - rank microbatches'
//   activations;
// - interleaved 1F1B (Narayanan et al. SC'21): the same phases over
//   microbatches x chunks tasks, microbatches advancing in groups of `ranks`
//   through the chunks, with 2 (ranks - rank - 1) + (chunks - 1) ranks
//   warm-up forwards.
//
// A task runs when its inputs are there (the previous virtual stage's
// activations for a forward, the next one's gradients for a backward);
// sends never wait for the receiver, so these orders cannot deadlock. The
// cost model simulates the same orders (cost/Pipeline.h).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TRAIN_PIPELINESCHEDULE_H
#define COLOSSAL_RUNTIME_TRAIN_PIPELINESCHEDULE_H

#include <optional>
#include <string>
#include <vector>

namespace colossal::rt {

enum class PipelineScheduleKind { GPipe, OneFOneB, Interleaved };

/// "gpipe", "1f1b", "interleaved"; nullopt for another name.
std::optional<PipelineScheduleKind> pipelineScheduleNamed(const std::string &name);
const char *nameOf(PipelineScheduleKind kind);

struct PipelineShape {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  int ranks = 1;
  /// Model chunks per rank (the interleaved schedule's virtual stages).
  int chunks = 1;
  int microbatches = 1;

  int stages() const { return ranks * chunks; }
  /// The rank and chunk holding virtual stage `stage`.
  int rankOf(int stage) const { return stage % ranks; }
  int chunkOf(int stage) const { return stage / ranks; }
  int stageOf(int rank, int chunk) const { return chunk * ranks + rank; }
};

/// Why `shape` cannot run (a count below 1, several chunks outside the
/// interleaved schedule, microbatches the interleaved schedule cannot group
/// by `ranks`); empty when it can.
std::string pipelineShapeError(const PipelineShape &shape);

struct PipelineTask {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;

  bool operator==(const PipelineTask &other) const {
    return forward == other.forward && chunk == other.chunk && microbatch == other.microbatch;
  }
};

/// Rank `rank`'s tasks in the order it runs them: 2 x chunks x microbatches
/// tasks. The shape must be valid (pipelineShapeError empty).
std::vector<PipelineTask> pipelineOrder(const PipelineShape &shape, int rank);

/// The most microbatch-chunks `rank` holds for their backward at once
/// (forwards run whose backward has not): what it keeps activations for.
int pipelineActivationsHeld(const PipelineShape &shape, int rank);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_TRAIN_PIPELINESCHEDULE_H
