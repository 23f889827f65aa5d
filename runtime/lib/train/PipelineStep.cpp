//===- PipelineStep.cpp -----------------------------------------------------===//

#include "PipelineStep.h"

#include "ParameterSources.h"
#include "colossal/runtime/Error.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

namespace colossal::rt::trainer {

using host::Tensor;

namespace {

/// The shape a pipelined program runs under: its settings'.
PipelineShape shapeOf(const TrainingProgram &program) {
  const TrainingSettings &s = program.settings;
  std::optional<PipelineScheduleKind> kind = pipelineScheduleNamed(s.pipelineSchedule);
  if (!kind)
    fail(program.model, "pipeline schedule '" + s.pipelineSchedule + "': expected gpipe, 1f1b or interleaved");
  return PipelineShape{*kind, int(s.pipelineRanks), int(s.virtualStages), int(s.microbatches)};
}

/// A message's tag: transfer `id` of microbatch `m` (ids and microbatches
/// are few; the tag space wraps only for thousands of both).
int tagOf(int64_t id, int64_t m, int64_t microbatches) { return int((id * microbatches + m) % 32768); }

Buffer bufferOf(Tensor &t) {
  return t.integer ? Buffer::of(t.ints.data(), DType::I64, int64_t(t.ints.size()))
                   : Buffer::of(t.floats.data(), DType::F32, int64_t(t.floats.size()));
}

/// A test of a stage that fails: COLOSSAL_FAULT_PIPELINE_STAGE=kill:S (or
/// stop:S) makes the rank running virtual stage S die (SIGKILL) or stop
/// answering at its first task of step 2.
void failHereIfAsked(int64_t stage, uint64_t step) {
  static const char *fault = std::getenv("COLOSSAL_FAULT_PIPELINE_STAGE");
  if (!fault || step != 2)
    return;
  std::string text = fault;
  size_t colon = text.find(':');
  if (colon == std::string::npos || std::atoll(text.c_str() + colon + 1) != stage)
    return;
  std::fprintf(stderr, "fault injection: pipeline stage %lld %s at step 2\n", (long long)stage, text.c_str());
  if (text.compare(0, colon, "kill") == 0)
    std::raise(SIGKILL);
  while (text.compare(0, colon, "stop") == 0)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

} // namespace

PipelineRank pipelineRankOf(const TrainingProgram &program, int rank, int ranks) {
  PipelineRank r;
  r.rank = rank;
  r.shape = shapeOf(program);
  r.allParameters = program.parameters;
  if (std::string error = pipelineShapeError(r.shape); !error.empty())
    fail(program.model, error);
  if (r.shape.ranks != ranks)
    fail(program.model,
         "compiled for " + std::to_string(r.shape.ranks) + " pipeline ranks, run on " + std::to_string(ranks));
  if (int64_t(program.stages.size()) != 2 * int64_t(r.shape.stages()))
    fail(program.model, "has " + std::to_string(program.stages.size()) + " stage functions for " +
                            std::to_string(r.shape.stages()) + " virtual stages (a forward and a backward each)");
  // Which pipeline ranks read each parameter.
  std::vector<std::set<int>> readers(program.parameters.size());
  for (size_t f = 0; f < program.stages.size(); ++f) {
    const StageFunction &function = program.stages[f];
    if (function.stage != int64_t(f / 2) || function.backward != (f % 2 == 1))
      fail(program.model, "stage function " + std::to_string(f) + " is out of order");
    for (int64_t index : function.parameters) {
      if (index < 0 || index >= int64_t(program.parameters.size()))
        fail(program.model, "stage " + std::to_string(function.stage) + " reads parameter " + std::to_string(index));
      readers[size_t(index)].insert(r.shape.rankOf(int(function.stage)));
    }
  }
  r.program = program;
  r.program.parameters.clear();
  int64_t localTrainable = 0;
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ProgramParameter &p = program.parameters[i];
    bool held = readers[i].count(rank) > 0;
    r.localParameter.push_back(held ? int64_t(r.program.parameters.size()) : -1);
    if (p.trainable) {
      r.localTrainable.push_back(held ? localTrainable++ : -1);
      if (held)
        r.holders.push_back(int(readers[i].size()));
    }
    if (p.trainable && readers[i].size() > 1)
      r.shared.push_back({held ? localTrainable - 1 : -1, elementsOf(p.shape)});
    if (held)
      r.program.parameters.push_back(p);
  }
  return r;
}

namespace {

/// The emitted functions' parameter and gradient indices are the whole
/// program's; the rank holds its own.
class RankParameters : public StepParameters {
public:
  RankParameters(StepParameters &inner, const std::vector<int64_t> &local) : inner_(inner), local_(local) {}
  const Tensor &fetch(size_t index) override { return inner_.fetch(localOf(index)); }
  void release(size_t index) override { inner_.release(localOf(index)); }

private:
  size_t localOf(size_t index) const {
    if (index >= local_.size() || local_[index] < 0)
      fail("pipeline", "a stage reads parameter " + std::to_string(index) + ", which this rank does not hold");
    return size_t(local_[index]);
  }
  StepParameters &inner_;
  const std::vector<int64_t> &local_;
};

class RankGradients : public GradientReady {
public:
  RankGradients(GradientReady &inner, const std::vector<int64_t> &local) : inner_(inner), local_(local) {}
  void operator()(size_t trainable, const Tensor &gradient) override {
    if (trainable >= local_.size() || local_[trainable] < 0)
      fail("pipeline", "a stage made the gradient of trainable parameter " + std::to_string(trainable) +
                           ", which this rank does not hold");
    inner_(size_t(local_[trainable]), gradient);
  }

private:
  GradientReady &inner_;
  const std::vector<int64_t> &local_;
};

} // namespace

float runPipelineStep(const PipelineRank &rank, Communicator &pp,
                      const std::function<std::vector<Tensor>(int64_t m)> &inputs, StepParameters &parameters,
                      GradientReady &gradients, StepCollectives &collectives, uint64_t seed, uint64_t step,
                      int64_t block, float lossScale, const std::function<void()> &beforeBackward,
                      PipelineTimeline *timeline) {
  auto begin = std::chrono::steady_clock::now();
  auto now = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
  auto record = [&](std::string name, double start, bool compute) {
    if (timeline)
      timeline->spans.push_back({std::move(name), start, now(), compute});
  };
  if (timeline) {
    *timeline = PipelineTimeline();
    timeline->origin = begin;
  }
  const TrainingProgram &program = rank.program;
  const PipelineShape &shape = rank.shape;
  int64_t microbatches = shape.microbatches;
  RankParameters rankParameters(parameters, rank.localParameter);
  RankGradients rankGradients(gradients, rank.localTrainable);
  // A microbatch's inputs, read at its first task on this rank and kept to
  // its last.
  std::map<int64_t, std::vector<Tensor>> batch;
  std::map<int64_t, int> tasksLeft;
  // What each stage's forward kept for its backward, by (stage, microbatch).
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, Tensor>> saved;
  // Values sent to a stage of this same rank (interleaved chunks).
  std::map<std::pair<int64_t, int64_t>, Tensor> mailbox;
  // Sends under way, with the tensors they read: each is freed once its
  // send completes (checked before every task), so a rank holds the
  // activations its schedule keeps, not every value it sent in the step.
  std::vector<std::pair<std::unique_ptr<PendingSend>, Tensor>> sending;
  float loss = 0;
  auto freeCompletedSends = [&] {
    sending.erase(std::remove_if(sending.begin(), sending.end(), [](auto &send) { return send.first->done(); }),
                  sending.end());
  };
  for (const PipelineTask &task : pipelineOrder(shape, rank.rank)) {
    freeCompletedSends();
    int64_t stage = shape.stageOf(rank.rank, task.chunk), m = task.microbatch;
    failHereIfAsked(stage, step);
    const StageFunction &function = program.stages[size_t(2 * stage + (task.forward ? 0 : 1))];
    if (!batch.count(m)) {
      batch[m] = inputs(m);
      tasksLeft[m] = 2 * shape.chunks;
    }
    StepRandomness random{seed, step, block + m};
    StageCall call{batch[m], {}, {}, rankParameters, random, lossScale, rankGradients, collectives};
    for (const StageValue &arg : function.arguments) {
      if (arg.kind == StageValue::Received) {
        int peer = shape.rankOf(int(arg.peer));
        if (peer == rank.rank) {
          auto it = mailbox.find({arg.index, m});
          if (it == mailbox.end())
            fail("pipeline stage " + std::to_string(stage),
                 "transfer " + std::to_string(arg.index) + " of microbatch " + std::to_string(m) + " never came");
          call.arguments.push_back(std::move(it->second));
          mailbox.erase(it);
          continue;
        }
        // The stage's input for this microbatch: an activation, as its
        // forward's kept values are.
        Tensor t = [&] {
          MemoryScope scope(MemoryCategory::Activations);
          return Tensor::zeros(arg.shape, arg.integer);
        }();
        double waitStart = now();
        try {
          pp.receive(bufferOf(t), peer, tagOf(arg.index, m, microbatches));
        } catch (const Error &e) {
          // Which stage waited for which: a stage that died or hung is named.
          fail("pipeline stage " + std::to_string(stage) + (task.forward ? " forward" : " backward") + ", microbatch " +
                   std::to_string(m),
               "waiting for stage " + std::to_string(arg.peer) + " (pipeline rank " + std::to_string(peer) +
                   "): " + e.reason());
        }
        record("wait", waitStart, false);
        call.arguments.push_back(std::move(t));
      } else if (arg.kind == StageValue::Saved) {
        auto &kept = saved[{stage, m}];
        auto it = kept.find(arg.index);
        if (it == kept.end())
          fail("pipeline stage " + std::to_string(stage),
               "its backward of microbatch " + std::to_string(m) + " reads a value its forward did not keep");
        call.arguments.push_back(std::move(it->second));
        kept.erase(it);
      }
    }
    // A receive waits on a later or earlier stage, which has by then often
    // taken what this rank sent it: free those before the task runs.
    freeCompletedSends();
    if (!task.forward)
      beforeBackward();
    {
      MemoryScope scope(MemoryCategory::Activations);
      double callStart = now();
      function.run(call);
      record(std::string(task.forward ? "F" : "B") + std::to_string(m) +
                 (shape.chunks > 1 ? "." + std::to_string(task.chunk) : ""),
             callStart, true);
    }
    if (call.results.size() != function.results.size())
      fail("pipeline stage " + std::to_string(stage), "returned " + std::to_string(call.results.size()) +
                                                          " values for " + std::to_string(function.results.size()));
    for (size_t i = 0; i < function.results.size(); ++i) {
      const StageValue &result = function.results[i];
      Tensor &value = call.results[i];
      if (result.kind == StageValue::Loss) {
        if (value.integer || value.floats.size() != 1)
          fail(program.model, "the last stage's loss is not a float scalar");
        loss += value.floats[0] / float(microbatches);
      } else if (result.kind == StageValue::Sent) {
        int peer = shape.rankOf(int(result.peer));
        if (peer == rank.rank) {
          mailbox[{result.index, m}] = std::move(value);
          continue;
        }
        sending.emplace_back(nullptr, std::move(value));
        sending.back().first = pp.postSend(bufferOf(sending.back().second), peer, tagOf(result.index, m, microbatches));
      } else if (result.kind == StageValue::Saved) {
        saved[{stage, m}][result.index] = std::move(value);
      }
    }
    if (!task.forward && saved.count({stage, m}) && saved[{stage, m}].empty())
      saved.erase({stage, m});
    if (--tasksLeft[m] == 0)
      batch.erase(m), tasksLeft.erase(m);
  }
  double waitStart = now();
  for (auto &[pending, tensor] : sending)
    pending->wait();
  record("wait", waitStart, false);
  if (timeline)
    timeline->seconds = now();
  return loss;
}

double PipelineTimeline::idleFraction() const {
  double busy = 0;
  for (const Span &span : spans)
    busy += span.compute ? span.end - span.start : 0;
  return seconds > 0 ? std::max(0.0, 1.0 - busy / seconds) : 0;
}

std::string PipelineTimeline::chromeTrace(int rank, const CommTimeline *comm) const {
  std::string text = "{\"traceEvents\": [";
  char line[256];
  for (size_t i = 0; i < spans.size(); ++i) {
    std::snprintf(line, sizeof line,
                  "%s\n {\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, "
                  "\"ts\": %.3f, \"dur\": %.3f}",
                  i ? "," : "", spans[i].name.c_str(), spans[i].compute ? "compute" : "wait", rank,
                  spans[i].start * 1e6, (spans[i].end - spans[i].start) * 1e6);
    text += line;
  }
  if (comm) // comma-led events: the first without its comma when no span precedes it
    text += spans.empty() ? comm->chromeEvents(origin, rank).substr(1) : comm->chromeEvents(origin, rank);
  std::snprintf(line, sizeof line,
                "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"pipeline_rank\": %d, "
                "\"step_seconds\": %.9f, \"idle_fraction\": %.6f}}\n",
                rank, seconds, idleFraction());
  return text + line;
}

void sumSharedGradients(const PipelineRank &rank, Communicator &pp, std::vector<Floats> &grads) {
  if (rank.shared.empty())
    return;
  int64_t total = 0;
  for (const PipelineRank::Shared &shared : rank.shared)
    total += shared.elements;
  MemoryScope scope(MemoryCategory::Communication);
  Floats packed = buffer<float>(size_t(total), MemoryCategory::Communication);
  int64_t at = 0;
  for (const PipelineRank::Shared &shared : rank.shared) {
    if (shared.local >= 0)
      std::copy(grads[size_t(shared.local)].begin(), grads[size_t(shared.local)].end(), packed.begin() + at);
    else
      std::fill(packed.begin() + at, packed.begin() + at + shared.elements, 0.0f);
    at += shared.elements;
  }
  pp.allReduce(Buffer::of(packed.data(), DType::F32, total));
  at = 0;
  for (const PipelineRank::Shared &shared : rank.shared) {
    if (shared.local >= 0)
      std::copy(packed.begin() + at, packed.begin() + at + shared.elements, grads[size_t(shared.local)].begin());
    at += shared.elements;
  }
}

double pipelineTotalSquares(const PipelineRank &rank, Communicator &pp, const std::vector<float> &squares) {
  if (squares.size() != 2 * rank.holders.size())
    fail("pipeline", "the norm has " + std::to_string(squares.size() / 2) + " tensors' squares for " +
                         std::to_string(rank.holders.size()) + " trainable weights");
  double sum = 0;
  for (size_t t = 0; t < rank.holders.size(); ++t)
    sum += double(squares[2 * t + 1]) / double(rank.holders[t]);
  pp.allReduce(Buffer::of(&sum, DType::F64, 1));
  return sum;
}

double pipelineGradientNorm(const PipelineRank &rank, Communicator &pp, const std::vector<OptimizerTensor> &tensors,
                            const CompleteSquares &complete) {
  return std::sqrt(pipelineTotalSquares(rank, pp, tensorSquares(tensors, complete)));
}

} // namespace colossal::rt::trainer
