//===- ModelState.cpp -------------------------------------------------------===//

#include "ModelState.h"

#include "ParameterSources.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/comm/SingleRankCommunicator.h"
#include "colossal/runtime/io/AtomicFile.h"
#include "colossal/runtime/io/Checkpoint.h"
#include "colossal/runtime/io/OnnxWeights.h"
#include "colossal/runtime/io/ProgramFiles.h"
#include "colossal/runtime/io/Safetensors.h"
#include "colossal/runtime/train/InitialValues.h"
#include "colossal/runtime/train/TensorSlices.h"

#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace colossal::rt::trainer {

State loadWeights(const TrainingProgram &program, const std::string &path, int64_t tensorRank, int64_t tensorRanks,
                  std::optional<uint64_t> drawSeed) {
  auto drawn = [&](const ProgramParameter &p) { return drawSeed && p.init.kind != ParameterInit::File; };
  // The file is read only for the parameters the program does not draw.
  std::optional<SafetensorsFile> opened;
  auto file = [&]() -> SafetensorsFile & {
    if (!opened) {
      if (access(path.c_str(), R_OK) != 0)
        fail("weights", "cannot read " + path + " (give --weights FILE)");
      opened = SafetensorsFile::read(path);
    }
    return *opened;
  };
  State s;
  MemoryScope scope(MemoryCategory::Parameters);
  for (const ProgramParameter &p : program.parameters) {
    if (drawn(p)) {
      Tensor value = Tensor::zeros(p.shape);
      drawSlice(p, sliceOf(p, tensorRank, tensorRanks), *drawSeed, value.floats.data());
      s.parameters.push_back(std::move(value));
      continue;
    }
    const TensorView *view = file().find(p.name);
    if (!view)
      fail(path, "holds no tensor '" + p.name + "'");
    bool integer = view->dtype == DType::I64;
    // A tensor-parallel rank keeps its slice of the file's whole tensor.
    SliceOf slice = sliceOf(p, tensorRank, tensorRanks);
    // A padded vocabulary may come unpadded (as --export writes it): the
    // padding rows are zeros.
    std::vector<float> padded;
    if (slice.padding > 0 && !integer && view->shape != slice.whole) {
      Shape model = modelShape(slice);
      const TensorView &t = file().require(p.name, DType::F32, model);
      padded.assign(size_t(elementsOf(slice.whole)), 0.0f);
      placeSlice(static_cast<const float *>(t.data), SliceOf{slice.whole, Shape(model.size(), 0)}, model,
                 padded.data());
    }
    Tensor value = Tensor::zeros(p.shape, integer);
    if (!padded.empty())
      cutSlice(padded.data(), slice, p.shape, value.floats.data());
    else if (integer)
      cutSlice(static_cast<const int64_t *>(file().require(p.name, DType::I64, slice.whole).data), slice, p.shape,
               value.ints.data());
    else
      cutSlice(static_cast<const float *>(file().require(p.name, DType::F32, slice.whole).data), slice, p.shape,
               value.floats.data());
    if (p.trainable && integer)
      fail(path, "trainable parameter '" + p.name + "' is not floating-point");
    s.parameters.push_back(std::move(value));
  }
  return s;
}

void prepareOptimizer(const TrainingProgram &program, const OptimizerConfig &config, State &s) {
  bool compiledOptimizer = config.kind == program.settings.optimizer.kind;
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ProgramParameter &p = program.parameters[i];
    if (!p.trainable)
      continue;
    size_t n = s.parameters[i].floats.size();
    s.trainable.push_back(i);
    s.grads.push_back(buffer<float>(n, MemoryCategory::Gradients));
    s.m.push_back(buffer<float>(n, MemoryCategory::OptimizerState));
    s.v.push_back(buffer<float>(momentsOf(config.kind) == 2 ? n : 0, MemoryCategory::OptimizerState));
    s.conventions.push_back(compiledOptimizer ? p.conventions : conventionsOf(config.kind, p.shape.size()));
  }
  for (size_t t = 0; t < s.trainable.size(); ++t) {
    // LAMB writes its update over the gradient (OptimizerStep.h).
    OptimizerTensor o{s.parameters[s.trainable[t]].floats.data(), s.grads[t].data(), s.m[t].data(),
                      s.v[t].empty() ? nullptr : s.v[t].data(),   s.grads[t].data(), int64_t(s.grads[t].size())};
    applyConventions(s.conventions[t], o);
    s.tensors.push_back(o);
  }
}

namespace {

TensorView viewOf(const std::string &name, const Shape &shape, const Floats &data) {
  return TensorView{name, DType::F32, shape, data.data(), int64_t(data.size() * sizeof(float))};
}

/// A double as text that reads back to the same double.
std::string formatExact(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

} // namespace

namespace {

/// Collective: the rank's weights (and with `moments` its optimizer state)
/// as a checkpoint at `dir`, in a folder of them when `folder`.
void writeState(Communicator &world, const std::string &dir, const TrainingProgram &program, const Options &o, State &s,
                int64_t step, int64_t tensorRank, int64_t tensorRanks, bool moments, bool folder) {
  // Under ZeRO the moments are gathered: the checkpoint is the same whatever
  // the sharding, so a run may resume with another.
  // What is gathered for the file is a communication buffer.
  MemoryScope scope(MemoryCategory::Communication);
  std::vector<Floats> gatheredM, gatheredV;
  if (s.sharded && moments)
    s.sharded->gatherMoments(gatheredM, gatheredV);
  const std::vector<Floats> &moments1 = s.sharded ? gatheredM : s.m;
  const std::vector<Floats> &moments2 = s.sharded ? gatheredV : s.v;
  // Under ZeRO-3 no rank holds the weights whole: gathered for the file.
  std::vector<Floats> gatheredWeights;
  std::vector<const Floats *> floats;
  for (const Tensor &t : s.parameters)
    floats.push_back(&t.floats);
  if (s.sharded && s.sharded->stage() == 3) {
    s.sharded->gatherWeights(gatheredWeights);
    for (size_t t = 0; t < s.trainable.size(); ++t)
      floats[s.trainable[t]] = &gatheredWeights[t];
  }
  // A tensor-parallel rank writes its slices, placed in the whole tensors.
  std::vector<Shard> shards;
  auto add = [&](TensorView view, const ProgramParameter &p) {
    SliceOf slice = sliceOf(p, tensorRank, tensorRanks);
    shards.push_back(Shard{view, slice.whole, slice.offsets, slice.groups, slice.dim, slice.padding, slice.dim});
  };
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ProgramParameter &p = program.parameters[i];
    const Tensor &t = s.parameters[i];
    if (t.integer)
      add(TensorView{p.name, DType::I64, p.shape, t.ints.data(), int64_t(t.ints.size() * sizeof(int64_t))}, p);
    else
      add(viewOf(p.name, p.shape, *floats[i]), p);
  }
  for (size_t t = 0; moments && t < s.trainable.size(); ++t) {
    const ProgramParameter &p = program.parameters[s.trainable[t]];
    add(viewOf("optimizer.m:" + p.name, p.shape, moments1[t]), p);
    if (momentsOf(o.settings.optimizer.kind) == 2)
      add(viewOf("optimizer.v:" + p.name, p.shape, moments2[t]), p);
  }
  std::map<std::string, std::string> info{{"model", program.model},
                                          {"optimizer", nameOf(o.settings.optimizer.kind)},
                                          {"seed", std::to_string(o.seed)},
                                          {"microbatches", std::to_string(o.settings.microbatches)},
                                          {"updates", std::to_string(s.updates)},
                                          {"loss_scale", formatExact(s.lossScale)},
                                          {"loss_scale_finite_steps", std::to_string(s.finiteSteps)}};
  if (folder)
    saveCheckpointInFolder(dir, world, step, shards, info, o.keep);
  else
    saveCheckpoint(dir, world, step, shards, info);
}

} // namespace

void saveState(Communicator &world, const std::string &dir, const TrainingProgram &program, const Options &o, State &s,
               int64_t step, int64_t tensorRank, int64_t tensorRanks) {
  writeState(world, dir, program, o, s, step, tensorRank, tensorRanks, /*moments=*/true,
             /*folder=*/o.saveEvery > 0);
}

void exportWeights(Communicator &world, const std::string &dir, const TrainingProgram &program,
                   const std::vector<ProgramParameter> &exported, const Options &o, State &s, int64_t step,
                   int64_t tensorRank, int64_t tensorRanks) {
  // The ranks' slices go through a checkpoint (which puts them back
  // together); rank 0 writes them whole, padding removed, as one file.
  std::string shards = dir + "/.shards";
  writeState(world, shards, program, o, s, step, tensorRank, tensorRanks, /*moments=*/false, /*folder=*/false);
  onEveryRankOrNone(world, "--export " + dir, [&] {
    if (world.rank() != 0)
      return;
    SingleRankCommunicator alone("export");
    LoadedCheckpoint checkpoint = LoadedCheckpoint::load(shards, alone);
    std::vector<WholeTensorRequest> requests;
    for (const ProgramParameter &p : exported) {
      Shape model = modelShape(sliceOf(p, tensorRank, tensorRanks));
      std::optional<DType> dtype = checkpoint.dtypeOf(p.name);
      if (!dtype)
        fail("--export " + dir, "no rank wrote parameter " + p.name);
      requests.push_back({p.name, *dtype, model});
    }
    std::vector<std::vector<unsigned char>> data(requests.size());
    checkpoint.readWhole(alone, requests, [&](size_t i, const std::vector<unsigned char> &whole) { data[i] = whole; });
    std::vector<TensorView> views;
    for (size_t i = 0; i < requests.size(); ++i)
      views.push_back(
          {requests[i].name, requests[i].dtype, requests[i].shape, data[i].data(), int64_t(data[i].size())});
    writeSafetensors(dir + "/model.safetensors", views,
                     {{"format", "colossal-export/1"}, {"model", program.model}, {"step", std::to_string(step)}});
    // The model itself with these weights, where the compiler left its graph.
    std::string graph = besideProgram("graph.onnx");
    if (::access(graph.c_str(), R_OK) == 0)
      writeOnnxWithWeights(graph, views, dir + "/model.onnx");
    else
      std::fprintf(stderr,
                   "--export: no graph.onnx beside the program (its model keeps constants in external "
                   "files or weights of another type): wrote %s/model.safetensors only\n",
                   dir.c_str());
    removeTree(shards);
  });
}

int64_t resumeState(Communicator &world, const std::string &dir, const TrainingProgram &program, const Options &o,
                    State &s, int64_t tensorRank, int64_t tensorRanks) {
  LoadedCheckpoint checkpoint = LoadedCheckpoint::load(dir, world);
  auto info = [&](const std::string &key) {
    auto it = checkpoint.info().find(key);
    return it == checkpoint.info().end() ? std::string() : it->second;
  };
  if (info("model") != program.model)
    fail("--resume " + dir,
         "the checkpoint is of model '" + info("model") + "', this program trains '" + program.model + "'");
  if (info("optimizer") != nameOf(o.settings.optimizer.kind))
    fail("--resume " + dir, "the checkpoint was trained with " + info("optimizer") + ", this run uses " +
                                nameOf(o.settings.optimizer.kind) + " (give --optimizer " + info("optimizer") + ")");
  if (info("seed") != std::to_string(o.seed))
    fail("--resume " + dir, "the checkpoint's data order has seed " + info("seed") + ", this run " +
                                std::to_string(o.seed) + " (give --seed " + info("seed") + ")");
  // Each tensor whole as the checkpoint's ranks left it, whatever their
  // number and split; this rank keeps its slice.
  std::vector<WholeTensorRequest> requests;
  struct Target {
    size_t parameter;
    SliceOf slice;
    Floats *into; // null: the parameter's integers
  };
  std::vector<Target> targets;
  auto request = [&](const std::string &name, size_t parameter, Floats *into) {
    SliceOf slice = sliceOf(program.parameters[parameter], tensorRank, tensorRanks);
    requests.push_back({name, into ? DType::F32 : DType::I64, slice.whole, slice.padding, slice.dim});
    targets.push_back({parameter, slice, into});
  };
  for (size_t i = 0; i < program.parameters.size(); ++i)
    request(program.parameters[i].name, i, s.parameters[i].integer ? nullptr : &s.parameters[i].floats);
  for (size_t t = 0; t < s.trainable.size(); ++t) {
    const std::string &name = program.parameters[s.trainable[t]].name;
    request("optimizer.m:" + name, s.trainable[t], &s.m[t]);
    if (momentsOf(o.settings.optimizer.kind) == 2)
      request("optimizer.v:" + name, s.trainable[t], &s.v[t]);
  }
  checkpoint.readWhole(world, requests, [&](size_t r, const std::vector<unsigned char> &whole) {
    const Target &t = targets[r];
    const Shape &shape = program.parameters[t.parameter].shape;
    if (!t.into)
      cutSlice(reinterpret_cast<const int64_t *>(whole.data()), t.slice, shape, s.parameters[t.parameter].ints.data());
    else
      cutSlice(reinterpret_cast<const float *>(whole.data()), t.slice, shape, t.into->data());
  });
  // Checkpoints of programs without loss scaling applied every step.
  s.updates = info("updates").empty() ? checkpoint.step() : std::stoll(info("updates"));
  if (o.settings.lossScaling.dynamic && !info("loss_scale").empty()) {
    s.lossScale = std::strtod(info("loss_scale").c_str(), nullptr);
    s.finiteSteps = std::stoll(info("loss_scale_finite_steps"));
  }
  return checkpoint.step();
}

} // namespace colossal::rt::trainer
