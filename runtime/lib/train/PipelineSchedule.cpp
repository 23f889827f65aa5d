//===- PipelineSchedule.cpp - the order a pipeline rank runs its work -----===//

#include "colossal/runtime/train/PipelineSchedule.h"

#include <algorithm>

namespace colossal::rt {

std::optional<PipelineScheduleKind> pipelineScheduleNamed(const std::string &name) {
  if (name == "gpipe")
    return PipelineScheduleKind::GPipe;
  if (name == "1f1b")
    return PipelineScheduleKind::OneFOneB;
  if (name == "interleaved")
    return PipelineScheduleKind::Interleaved;
  return std::nullopt;
}

const char *nameOf(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::GPipe:
    return "gpipe";
  case PipelineScheduleKind::OneFOneB:
    return "1f1b";
  case PipelineScheduleKind::Interleaved:
    return "interleaved";
  }
  return "?";
}

std::string pipelineShapeError(const PipelineShape &shape) {
  if (shape.ranks < 1 || shape.chunks < 1 || shape.microbatches < 1)
    return "a pipeline needs at least one rank, chunk and microbatch (ranks " + std::to_string(shape.ranks) +
           ", chunks " + std::to_string(shape.chunks) + ", microbatches " + std::to_string(shape.microbatches) + ")";
  if (shape.kind != PipelineScheduleKind::Interleaved && shape.chunks != 1)
    return std::string("only the interleaved schedule runs several model chunks per rank, not ") + nameOf(shape.kind);
  // Microbatches move through the chunks in groups of `ranks`.
  if (shape.kind == PipelineScheduleKind::Interleaved && shape.microbatches % shape.ranks != 0)
    return "the interleaved schedule needs the microbatches (" + std::to_string(shape.microbatches) +
           ") to be a multiple of the pipeline ranks (" + std::to_string(shape.ranks) + ")";
  return "";
}

namespace {

/// Forwards run before the first backward.
int warmupForwards(const PipelineShape &shape, int rank) {
  int total = shape.microbatches * shape.chunks;
  switch (shape.kind) {
  case PipelineScheduleKind::GPipe:
    return total;
  case PipelineScheduleKind::OneFOneB:
    return std::min(shape.ranks - rank - 1, total);
  case PipelineScheduleKind::Interleaved:
    return std::min(2 * (shape.ranks - rank - 1) + (shape.chunks - 1) * shape.ranks, total);
  }
  return total;
}

/// The k-th forward (or backward) of a rank: with chunks, microbatches go
/// through chunk 0 in a group of `ranks`, then chunk 1, and so on;
/// backwards visit the chunks from the last.
PipelineTask nthTask(const PipelineShape &shape, int k, bool forward) {
  int round = shape.ranks * shape.chunks;
  int group = k / round, within = k % round;
  int chunk = within / shape.ranks;
  return PipelineTask{forward, forward ? chunk : shape.chunks - 1 - chunk, group * shape.ranks + within % shape.ranks};
}

} // namespace

std::vector<PipelineTask> pipelineOrder(const PipelineShape &shape, int rank) {
  int total = shape.microbatches * shape.chunks;
  int warmup = warmupForwards(shape, rank);
  std::vector<PipelineTask> order;
  order.reserve(2 * size_t(total));
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards)
    order.push_back(nthTask(shape, forwards, true));
  // Steady state: one forward, one backward.
  while (forwards < total) {
    order.push_back(nthTask(shape, forwards++, true));
    order.push_back(nthTask(shape, backwards++, false));
  }
  // Cool-down.
  while (backwards < total)
    order.push_back(nthTask(shape, backwards++, false));
  return order;
}

int pipelineActivationsHeld(const PipelineShape &shape, int rank) {
  int held = 0, most = 0;
  for (const PipelineTask &task : pipelineOrder(shape, rank)) {
    held += task.forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

} // namespace colossal::rt
