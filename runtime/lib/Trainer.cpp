//===- Trainer.cpp - the main loop of an emitted training program ---------===//

#include "colossal/runtime/Trainer.h"

#include "colossal/runtime/Checkpoint.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/CommCounters.h"
#include "colossal/runtime/GradientBuckets.h"
#include "colossal/runtime/GradientDump.h"
#include "colossal/runtime/Health.h"
#include "colossal/runtime/Launch.h"
#include "colossal/runtime/Memory.h"
#include "colossal/runtime/Mesh.h"
#include "colossal/runtime/MpiCommunicator.h"
#include "colossal/runtime/Npy.h"
#include "colossal/runtime/ParameterPrefetch.h"
#include "colossal/runtime/Philox.h"
#include "colossal/runtime/ProcessGroups.h"
#include "colossal/runtime/Safetensors.h"
#include "colossal/runtime/ShardedOptimizer.h"
#include "colossal/runtime/SequenceParallel.h"
#include "colossal/runtime/SingleRankCommunicator.h"
#include "colossal/runtime/StepLog.h"
#include "colossal/runtime/TensorIndexing.h"
#include "colossal/runtime/TensorSlices.h"
#include "colossal/runtime/TokenData.h"
#include "colossal/runtime/TrackedAllocator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <malloc.h>
#include <map>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace colossal::rt {

StepParameters::~StepParameters() = default;
GradientReady::~GradientReady() = default;
StepCollectives::~StepCollectives() = default;

host::Tensor StepCollectives::allReduceInPlace(host::Tensor &&x, const std::string &axis) {
  host::Tensor sum = allReduce(x, axis);
  x = host::Tensor();
  return sum;
}

namespace {

using host::Shape;
using host::Tensor;

struct Options {
  TrainingSettings settings;
  uint64_t seed = 0;
  std::string feed, data, log, save, resume, weights, dumpGradients;
  bool quiet = false;
};

const char *kUsage = R"(usage: %s [flags]

Trains %s, compiled by colossal-compile, on the host.

  --steps N            optimizer steps to reach (default %lld; with --resume, the total)
  --seed S             seed of synthetic data and of the data order (default 0)
  --feed DIR           one .npy per graph input, named after it, holding the global
                       batch; a leading extra dimension holds one batch per step
  --data FILE          token file (u16/u32/.npy) for language models: inputs and
                       labels are consecutive windows of it
                       (default: synthetic data, the same for every run with one seed)
  --weights FILE       initial weights (default: weights.safetensors beside the program)
  --log FILE           one JSON object per step: step, loss, lr, grad_norm,
                       loss_scale, tokens_per_s, time, memory (bytes by
                       category, current and peak) and, on several ranks,
                       comm (bytes by collective)
  --save DIR           write a checkpoint of the last step here
  --dump-gradients DIR write the first step's gradients (averaged over
                       microbatches and ranks, before clipping) as whole
                       tensors, DIR/NAME.npy (rank k: DIR/rank-0000k/NAME.npy)
  --resume DIR         continue from a checkpoint written by --save
  --optimizer NAME     lamb, adamw, sgd or lars (default %s)
  --lr X               peak learning rate (default %g)
  --weight-decay X     decoupled weight decay (default %g)
  --beta1 X, --beta2 X LAMB/AdamW moment decays (default %g, %g)
  --eps X              LAMB/AdamW epsilon (default %g; switching --optimizer
                       resets it to 1e-6 for LAMB, 1e-8 for AdamW)
  --momentum X         SGD/LARS momentum (default %g)
  --nesterov           Nesterov momentum for SGD
  --eta X              LARS trust coefficient (default %g)
  --clip-grad-norm X   clip the global gradient norm to X (default %g: off)
  --loss-scale X       initial loss scale of an fp16 program (default %g)
  --loss-scale-window N  finite steps before the loss scale doubles (default %lld)
  --warmup-steps N     linear warm-up steps (default %lld)
  --schedule NAME      constant, cosine, linear or polynomial decay after warm-up
                       (default %s)
  --bucket-mb X        data-parallel gradient bucket, MiB: one all-reduce per
                       bucket (default %g)
  --prefetch-mb X      ZeRO-3: MiB of weights gathered ahead of the step's reads
                       (default %g, one layer's; 0: gather each where it is read)
  --quiet              no progress line
  --help               this text
)";

void usage(const char *argv0, const TrainingProgram &p) {
  const TrainingSettings &s = p.settings;
  const OptimizerConfig &o = s.optimizer;
  std::printf(kUsage, argv0, p.model.c_str(), (long long)s.steps, nameOf(o.kind), o.lr, o.weightDecay, o.beta1,
              o.beta2, o.eps, o.momentum, o.eta, o.clipGradNorm, s.lossScaling.initial,
              (long long)s.lossScaling.window, (long long)s.warmupSteps, nameOf(s.schedule),
              double(s.gradientBucketBytes) / double(1 << 20), double(s.prefetchBytes) / double(1 << 20));
}

double parseNumber(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != 0 || !std::isfinite(v))
    fail(flag, "expects a number, got '" + text + "'");
  return v;
}

int64_t parseCount(const std::string &flag, const std::string &text, int64_t minimum) {
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != 0 || v < minimum)
    fail(flag, "expects an integer of at least " + std::to_string(minimum) + ", got '" + text + "'");
  return int64_t(v);
}

std::string besideExecutable(const char *argv0, const std::string &file) {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  std::string exe = n > 0 ? std::string(path, size_t(n)) : std::string(argv0);
  size_t slash = exe.rfind('/');
  return (slash == std::string::npos ? std::string(".") : exe.substr(0, slash)) + "/" + file;
}

/// Returns nullopt after --help.
std::optional<Options> parseOptions(int argc, char **argv, const TrainingProgram &program, bool printHelp = true) {
  Options o;
  o.settings = program.settings;
  o.weights = besideExecutable(argv[0], "weights.safetensors");
  bool epsGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      if (printHelp)
        usage(argv[0], program);
      return std::nullopt;
    }
    if (flag == "--quiet" || flag == "--nesterov") {
      (flag == "--quiet" ? o.quiet : o.settings.optimizer.nesterov) = true;
      continue;
    }
    std::string value;
    size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    static const char *const kValued[] = {"--steps", "--seed", "--feed", "--data", "--weights", "--log",
                                          "--save", "--resume", "--optimizer", "--lr", "--weight-decay",
                                          "--clip-grad-norm", "--warmup-steps", "--schedule", "--eps",
                                          "--beta1", "--beta2", "--momentum", "--eta", "--dump-gradients",
                                          "--loss-scale", "--loss-scale-window", "--bucket-mb",
                                          "--prefetch-mb"};
    if (std::find(std::begin(kValued), std::end(kValued), flag) == std::end(kValued))
      fail(flag, "unknown flag (see --help)");
    if (eq == std::string::npos) {
      if (i + 1 >= argc)
        fail(flag, "expects a value (see --help)");
      value = argv[++i];
    }
    OptimizerConfig &opt = o.settings.optimizer;
    if (flag == "--steps")
      o.settings.steps = parseCount(flag, value, 0);
    else if (flag == "--seed")
      o.seed = uint64_t(parseCount(flag, value, 0));
    else if (flag == "--feed")
      o.feed = value;
    else if (flag == "--data")
      o.data = value;
    else if (flag == "--weights")
      o.weights = value;
    else if (flag == "--log")
      o.log = value;
    else if (flag == "--save")
      o.save = value;
    else if (flag == "--resume")
      o.resume = value;
    else if (flag == "--dump-gradients")
      o.dumpGradients = value;
    else if (flag == "--optimizer") {
      std::optional<OptimizerKind> kind = parseOptimizer(value);
      if (!kind)
        fail(flag, "unknown optimizer '" + value + "' (lamb, adamw, sgd, lars)");
      if (*kind != opt.kind && !epsGiven)
        opt.eps = *kind == OptimizerKind::AdamW ? 1e-8 : 1e-6;
      opt.kind = *kind;
    } else if (flag == "--eps") {
      opt.eps = parseNumber(flag, value);
      epsGiven = true;
    } else if (flag == "--beta1")
      opt.beta1 = parseNumber(flag, value);
    else if (flag == "--beta2")
      opt.beta2 = parseNumber(flag, value);
    else if (flag == "--momentum")
      opt.momentum = parseNumber(flag, value);
    else if (flag == "--eta")
      opt.eta = parseNumber(flag, value);
    else if (flag == "--lr")
      opt.lr = parseNumber(flag, value);
    else if (flag == "--weight-decay")
      opt.weightDecay = parseNumber(flag, value);
    else if (flag == "--clip-grad-norm")
      opt.clipGradNorm = parseNumber(flag, value);
    else if (flag == "--loss-scale" || flag == "--loss-scale-window") {
      if (!o.settings.lossScaling.dynamic)
        fail(flag, "this program does not scale its loss (compile it with --precision fp16)");
      if (flag == "--loss-scale") {
        o.settings.lossScaling.initial = parseNumber(flag, value);
        if (o.settings.lossScaling.initial <= 0)
          fail(flag, "expects a positive number, got '" + value + "'");
      } else {
        o.settings.lossScaling.window = parseCount(flag, value, 1);
      }
    }
    else if (flag == "--bucket-mb") {
      double mib = parseNumber(flag, value);
      if (!(mib > 0) || mib * double(1 << 20) > 1e15)
        fail(flag, "expects a positive number of MiB, got '" + value + "'");
      o.settings.gradientBucketBytes = std::max<int64_t>(int64_t(mib * double(1 << 20)), int64_t(sizeof(float)));
    } else if (flag == "--prefetch-mb") {
      double mib = parseNumber(flag, value);
      if (!(mib >= 0) || mib * double(1 << 20) > 1e15)
        fail(flag, "expects a number of MiB, 0 or more, got '" + value + "'");
      o.settings.prefetchBytes = int64_t(mib * double(1 << 20));
    } else if (flag == "--warmup-steps")
      o.settings.warmupSteps = parseCount(flag, value, 0);
    else if (flag == "--schedule") {
      std::optional<Decay> decay = parseDecay(value);
      if (!decay)
        fail(flag, "unknown schedule '" + value + "' (constant, cosine, linear, polynomial)");
      o.settings.schedule = *decay;
    }
  }
  if (!o.feed.empty() && !o.data.empty())
    fail("--feed and --data", "give one source of data");
  return o;
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

/// Where each step's global batch comes from.
class DataSource {
public:
  /// Rank `rank` of `ranks` reads rows [rank, rank + 1) * (its share) of
  /// every global batch.
  DataSource(const TrainingProgram &program, const Options &options, int rank, int ranks)
      : program_(program), options_(options), rank_(rank), ranks_(ranks) {
    microbatches_ = options.settings.microbatches;
    for (const ProgramInput &in : program.inputs)
      globalShapes_.push_back(globalShape(in));
    if (!options.feed.empty())
      loadFeeds();
    else if (!options.data.empty())
      openTokens();
  }

  /// The inputs of microbatch `m` of (0-based) step `step`.
  std::vector<Tensor> microbatch(int64_t step, int64_t m) {
    MemoryScope scope(MemoryCategory::Data);
    // The step's global batch is made (read, drawn or copied) once for all
    // its microbatches.
    if (step != cachedStep_) {
      cachedGlobal_.clear();
      for (size_t i = 0; i < program_.inputs.size(); ++i)
        cachedGlobal_.push_back(globalInput(i, step));
      cachedStep_ = step;
    }
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < program_.inputs.size(); ++i) {
      const ProgramInput &in = program_.inputs[i];
      const Tensor &global = cachedGlobal_[i];
      // This rank's microbatch m is block rank * M + m of the global batch,
      // each block `rows` rows: contiguous.
      int64_t count = indexing::product(in.shape), begin = (rank_ * microbatches_ + m) * count;
      Tensor part = Tensor::zeros(in.shape, in.integer);
      if (in.integer)
        std::copy(global.ints.begin() + begin, global.ints.begin() + begin + count, part.ints.begin());
      else
        std::copy(global.floats.begin() + begin, global.floats.begin() + begin + count, part.floats.begin());
      inputs.push_back(std::move(part));
    }
    return inputs;
  }

  /// Tokens per step for the throughput figure: the elements of the first
  /// integer input, else the global batch size.
  int64_t tokensPerStep() const {
    for (size_t i = 0; i < program_.inputs.size(); ++i)
      if (program_.inputs[i].integer)
        return indexing::product(globalShapes_[i]);
    return globalShapes_.empty() || globalShapes_[0].empty() ? 1 : globalShapes_[0][0];
  }

private:
  Shape globalShape(const ProgramInput &in) const {
    Shape s = in.shape;
    if (!s.empty())
      s[0] *= microbatches_ * ranks_;
    return s;
  }

  void loadFeeds() {
    for (size_t i = 0; i < program_.inputs.size(); ++i) {
      const ProgramInput &in = program_.inputs[i];
      std::string path = options_.feed + "/" + in.name + ".npy";
      if (access(path.c_str(), R_OK) != 0)
        fail("--feed", "no file for graph input '" + in.name + "': " + path);
      NpyArray array = readNpy(path);
      bool integerFile = array.dtype == DType::I64 || array.dtype == DType::I32;
      if (in.integer != integerFile || (!in.integer && array.dtype != DType::F32))
        fail(path, std::string("holds ") + nameOf(array.dtype) + "; graph input '" + in.name + "' takes " +
                       (in.integer ? "int64 (or int32)" : "float32"));
      const Shape &want = globalShapes_[i];
      bool perStep = array.shape.size() == want.size() + 1 &&
                     std::equal(want.begin(), want.end(), array.shape.begin() + 1);
      if (array.shape != want && !perStep)
        fail(path, "has shape " + host::describe(array.shape) + "; graph input '" + in.name + "' takes " +
                       host::describe(want) + " per step (or [steps, ...] with one batch per step)");
      Feed feed;
      feed.batches = perStep ? array.shape[0] : 1;
      int64_t n = array.elements();
      if (in.integer) {
        feed.ints.resize(size_t(n));
        for (int64_t k = 0; k < n; ++k)
          feed.ints[size_t(k)] = array.dtype == DType::I64 ? array.as<int64_t>()[k] : array.as<int32_t>()[k];
      } else {
        feed.floats.assign(array.as<float>(), array.as<float>() + n);
      }
      feeds_.push_back(std::move(feed));
    }
  }

  void openTokens() {
    std::vector<size_t> integers;
    for (size_t i = 0; i < program_.inputs.size(); ++i)
      if (program_.inputs[i].integer)
        integers.push_back(i);
    if (integers.size() != 2 || program_.inputs.size() != 2 || globalShapes_[0] != globalShapes_[1] ||
        globalShapes_[0].size() != 2)
      fail("--data", "token files feed models with two integer inputs (tokens and labels) of shape [batch, seq]; "
                     "use --feed for this model");
    tokens_.emplace(TokenDataset::open(options_.data, TokenFormat::Auto, program_.inputs[0].range));
  }

  Tensor globalInput(size_t i, int64_t step) {
    const ProgramInput &in = program_.inputs[i];
    const Shape &shape = globalShapes_[i];
    Tensor t = Tensor::zeros(shape, in.integer);
    int64_t n = t.elements();
    if (!feeds_.empty()) {
      const Feed &f = feeds_[i];
      int64_t at = (step % f.batches) * n;
      if (in.integer)
        std::copy(f.ints.begin() + at, f.ints.begin() + at + n, t.ints.begin());
      else
        std::copy(f.floats.begin() + at, f.floats.begin() + at + n, t.floats.begin());
      return t;
    }
    if (tokens_) {
      Ints inputs(static_cast<size_t>(n)), labels(static_cast<size_t>(n));
      tokens_->batch(step, shape[0], shape[1], 0, shape[0], options_.seed, inputs.data(), labels.data());
      t.ints = std::move(i == 0 ? inputs : labels);
      return t;
    }
    // Synthetic: uniform in [-1, 1) or integers in [0, range), keyed by the
    // seed, the input and the step, so a resumed run sees the same data.
    for (int64_t k = 0; k < n; ++k) {
      float u = philoxUniform(options_.seed * 1000003u + i, uint64_t(step), uint64_t(k));
      if (in.integer)
        t.ints[size_t(k)] = std::min<int64_t>(in.range - 1, int64_t(u * float(in.range)));
      else
        t.floats[size_t(k)] = 2.0f * u - 1.0f;
    }
    return t;
  }

  /// A feed file's batches, charged as data.
  struct Feed {
    int64_t batches = 1;
    Floats floats = buffer<float>(0, MemoryCategory::Data);
    Ints ints = buffer<int64_t>(0, MemoryCategory::Data);
  };

  const TrainingProgram &program_;
  Options options_;
  int64_t cachedStep_ = -1;
  std::vector<Tensor> cachedGlobal_;
  int64_t rank_ = 0, ranks_ = 1;
  int64_t microbatches_ = 1;
  std::vector<Shape> globalShapes_;
  std::vector<Feed> feeds_;
  std::optional<TokenDataset> tokens_;
};

//===----------------------------------------------------------------------===//
// Weights and optimizer state
//===----------------------------------------------------------------------===//

struct State {
  std::vector<Tensor> parameters;
  /// Per trainable parameter (in program order): gradient and moments (no
  /// second moment for SGD and LARS).
  std::vector<size_t> trainable;
  /// Each allocated in its category's scope: the memory tracker the step
  /// log reports (and the plan's memory prediction is checked against)
  /// counts what they hold.
  std::vector<Floats> grads, m, v;
  std::vector<OptimizerTensor> tensors;
  std::vector<TensorConventions> conventions;
  /// Optimizer offload: the engine moving the shard between device and host
  /// (declared first: the sharded optimizer uses it until destroyed).
  std::unique_ptr<CopyEngine> offload;
  /// Under ZeRO with more than one rank, or with offload: the shard's
  /// optimizer (then m, v and scratch above are released, and grads too
  /// under stage 2).
  std::unique_ptr<ShardedOptimizer> sharded;
  /// Optimizer updates applied: the step count less the steps skipped for
  /// non-finite fp16 gradients (bias correction counts updates).
  int64_t updates = 0;
  /// Dynamic loss scaling: the scale and the finite steps since it changed.
  double lossScale = 1.0;
  int64_t finiteSteps = 0;
};

State loadWeights(const TrainingProgram &program, const std::string &path, int64_t tensorRank = 0,
                  int64_t tensorRanks = 1) {
  if (access(path.c_str(), R_OK) != 0)
    fail("weights", "cannot read " + path + " (give --weights FILE)");
  SafetensorsFile file = SafetensorsFile::read(path);
  State s;
  MemoryScope scope(MemoryCategory::Parameters);
  for (const ProgramParameter &p : program.parameters) {
    const TensorView *view = file.find(p.name);
    if (!view)
      fail(path, "holds no tensor '" + p.name + "'");
    bool integer = view->dtype == DType::I64;
    // A tensor-parallel rank keeps its slice of the file's whole tensor.
    SliceOf slice = sliceOf(p, tensorRank, tensorRanks);
    const TensorView &t = file.require(p.name, integer ? DType::I64 : DType::F32, slice.whole);
    Tensor value = Tensor::zeros(p.shape, integer);
    if (integer)
      cutSlice(static_cast<const int64_t *>(t.data), slice, p.shape, value.ints.data());
    else
      cutSlice(static_cast<const float *>(t.data), slice, p.shape, value.floats.data());
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
                      s.v[t].empty() ? nullptr : s.v[t].data(), s.grads[t].data(), int64_t(s.grads[t].size())};
    applyConventions(s.conventions[t], o);
    s.tensors.push_back(o);
  }
}

TensorView viewOf(const std::string &name, const Shape &shape, const Floats &data) {
  return TensorView{name, DType::F32, shape, data.data(), int64_t(data.size() * sizeof(float))};
}

/// A double as text that reads back to the same double.
std::string formatExact(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

/// Collective over every rank: each writes its weights and optimizer state
/// (replicated over the data axis, its slices of the tensor-parallel ones)
/// as its own shard file.
void saveState(Communicator &world, const std::string &dir, const TrainingProgram &program, const Options &o,
               State &s, int64_t step, int64_t tensorRank = 0, int64_t tensorRanks = 1) {
  // Under ZeRO the moments are gathered: the checkpoint is the same whatever
  // the sharding, so a run may resume with another.
  // What is gathered for the file is a communication buffer.
  MemoryScope scope(MemoryCategory::Communication);
  std::vector<Floats> gatheredM, gatheredV;
  if (s.sharded)
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
    shards.push_back(Shard{view, slice.whole, slice.offsets, slice.groups, slice.dim});
  };
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ProgramParameter &p = program.parameters[i];
    const Tensor &t = s.parameters[i];
    if (t.integer)
      add(TensorView{p.name, DType::I64, p.shape, t.ints.data(), int64_t(t.ints.size() * sizeof(int64_t))}, p);
    else
      add(viewOf(p.name, p.shape, *floats[i]), p);
  }
  for (size_t t = 0; t < s.trainable.size(); ++t) {
    const ProgramParameter &p = program.parameters[s.trainable[t]];
    add(viewOf("optimizer.m:" + p.name, p.shape, moments1[t]), p);
    if (momentsOf(o.settings.optimizer.kind) == 2)
      add(viewOf("optimizer.v:" + p.name, p.shape, moments2[t]), p);
  }
  saveCheckpoint(dir, world, step, shards,
                 {{"model", program.model}, {"optimizer", nameOf(o.settings.optimizer.kind)},
                  {"seed", std::to_string(o.seed)}, {"microbatches", std::to_string(o.settings.microbatches)},
                  {"updates", std::to_string(s.updates)}, {"loss_scale", formatExact(s.lossScale)},
                  {"loss_scale_finite_steps", std::to_string(s.finiteSteps)}});
}

int64_t resumeState(Communicator &world, const std::string &dir, const TrainingProgram &program, const Options &o,
                    State &s) {
  LoadedCheckpoint checkpoint = LoadedCheckpoint::load(dir, world);
  auto info = [&](const std::string &key) {
    auto it = checkpoint.info().find(key);
    return it == checkpoint.info().end() ? std::string() : it->second;
  };
  if (info("model") != program.model)
    fail("--resume " + dir, "the checkpoint is of model '" + info("model") + "', this program trains '" +
                                program.model + "'");
  if (info("optimizer") != nameOf(o.settings.optimizer.kind))
    fail("--resume " + dir, "the checkpoint was trained with " + info("optimizer") + ", this run uses " +
                                nameOf(o.settings.optimizer.kind) + " (give --optimizer " + info("optimizer") + ")");
  if (info("seed") != std::to_string(o.seed))
    fail("--resume " + dir, "the checkpoint's data order has seed " + info("seed") + ", this run " +
                                std::to_string(o.seed) + " (give --seed " + info("seed") + ")");
  const SafetensorsFile &file = checkpoint.shard();
  auto restore = [&](const std::string &name, const Shape &shape, Floats &into) {
    const TensorView &t = file.require(name, DType::F32, shape);
    std::memcpy(into.data(), t.data, size_t(t.bytes));
  };
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ProgramParameter &p = program.parameters[i];
    Tensor &t = s.parameters[i];
    if (t.integer)
      std::memcpy(t.ints.data(), file.require(p.name, DType::I64, p.shape).data, t.ints.size() * sizeof(int64_t));
    else
      restore(p.name, p.shape, t.floats);
  }
  for (size_t t = 0; t < s.trainable.size(); ++t) {
    const ProgramParameter &p = program.parameters[s.trainable[t]];
    restore("optimizer.m:" + p.name, p.shape, s.m[t]);
    if (momentsOf(o.settings.optimizer.kind) == 2)
      restore("optimizer.v:" + p.name, p.shape, s.v[t]);
  }
  // Checkpoints of programs without loss scaling applied every step.
  s.updates = info("updates").empty() ? checkpoint.step() : std::stoll(info("updates"));
  if (o.settings.lossScaling.dynamic && !info("loss_scale").empty()) {
    s.lossScale = std::strtod(info("loss_scale").c_str(), nullptr);
    s.finiteSteps = std::stoll(info("loss_scale_finite_steps"));
  }
  return checkpoint.step();
}

//===----------------------------------------------------------------------===//
// Where the step reads the weights
//===----------------------------------------------------------------------===//

/// Replicated weights: the trainer's own, read in place.
class ReplicatedParameters : public StepParameters {
public:
  explicit ReplicatedParameters(const std::vector<Tensor> &parameters) : parameters_(parameters) {}
  const Tensor &fetch(size_t index) override { return parameters_.at(index); }
  void release(size_t) override {}

private:
  const std::vector<Tensor> &parameters_;
};

int64_t elementsOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// ZeRO-3: a trainable tensor is gathered for the step's first fetch and
/// freed at its last release (frozen ones stay whole on every rank); the
/// gathers of the fetches to come start ahead, up to `prefetchBytes`
/// (ParameterPrefetch.h). What is whole or in flight at a moment is charged
/// as communication buffers.
class GatheredParameters : public StepParameters {
public:
  GatheredParameters(const TrainingProgram &program, const State &state, ShardedOptimizer &sharded,
                     int64_t prefetchBytes, bool threaded)
      : program_(program), state_(state), slots_(program.parameters.size()),
        prefetcher_(trainableElements(program, state), prefetchBytes, threaded,
                    [&sharded](size_t t, Floats &whole) { sharded.gatherTensor(t, whole); }) {
    for (size_t t = 0; t < state.trainable.size(); ++t)
      slots_[state.trainable[t]].trainable = int64_t(t);
  }
  GatherPrefetcher &prefetcher() { return prefetcher_; }
  const Tensor &fetch(size_t index) override {
    Slot &slot = slots_.at(index);
    if (slot.trainable < 0)
      return state_.parameters[index];
    if (slot.fetched++ == 0) {
      GatheredTensor gathered = prefetcher_.take(size_t(slot.trainable));
      slot.whole = Tensor::ofFloats(program_.parameters[index].shape, std::move(gathered.values));
    }
    return slot.whole;
  }
  void release(size_t index) override {
    Slot &slot = slots_.at(index);
    if (slot.trainable < 0)
      return;
    if (slot.fetched <= 0)
      fail(program_.model, "the step released '" + program_.parameters[index].name + "', which it had not fetched");
    if (--slot.fetched == 0) {
      Floats().swap(slot.whole.floats);
      prefetcher_.released(size_t(slot.trainable));
    }
  }
  /// After a step: every fetch was released (the compiler pairs them).
  void requireAllReleased() const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].fetched != 0)
        fail(program_.model, "the step kept '" + program_.parameters[i].name + "' gathered after it returned");
  }

private:
  struct Slot {
    int64_t trainable = -1; // index among the trainable tensors
    int64_t fetched = 0;
    /// A communication buffer while it is gathered.
    Tensor whole;
  };
  static std::vector<int64_t> trainableElements(const TrainingProgram &program, const State &state) {
    std::vector<int64_t> elements;
    for (size_t index : state.trainable)
      elements.push_back(elementsOf(program.parameters[index].shape));
    return elements;
  }

  const TrainingProgram &program_;
  const State &state_;
  std::vector<Slot> slots_;
  GatherPrefetcher prefetcher_;
};

/// Adds one microbatch's gradient to the step's (a mean loss's microbatch
/// gradients average into the batch's). Every path adds them the same way,
/// so a gradient reported early sums bit for bit like one returned.
void addMicrobatchGradient(const TrainingProgram &program, const State &s, size_t t, Floats &sum,
                           const Tensor &gradient, int64_t microbatches) {
  if (gradient.integer || gradient.floats.size() != sum.size())
    fail(program.model, "the gradient of '" + program.parameters[s.trainable[t]].name + "' has " +
                            std::to_string(gradient.floats.size()) + " elements");
  if (microbatches == 1)
    std::copy(gradient.floats.begin(), gradient.floats.end(), sum.begin());
  else
    for (size_t k = 0; k < sum.size(); ++k)
      sum[k] += gradient.floats[k] / float(microbatches);
}

/// The gradients the step reports while its backward pass runs. Each is
/// taken at once, so the step frees it (GradientReady's contract): added to
/// the step's sum or, under ZeRO-2/3, staged for the microbatch's
/// reduce-scatter. During the last microbatch of a data-parallel step each
/// bucket's all-reduce also starts as soon as the bucket is complete,
/// overlapping the rest of the backward pass.
class ReportedGradients : public GradientReady {
public:
  ReportedGradients(const TrainingProgram &program, State &state, OverlappedGradientAverage &average,
                    int64_t microbatches)
      : program_(program), state_(state), average_(average), microbatches_(microbatches),
        taken_(state.grads.size(), false) {}

  /// Starts a microbatch: `overlap`, whether each complete bucket's average
  /// starts during the step; `stage`, whether gradients go to ZeRO's
  /// reduce-scatter rather than the step's sum.
  void beginMicrobatch(bool overlap, bool stage) {
    overlap_ = overlap, stage_ = stage;
    std::fill(taken_.begin(), taken_.end(), false);
  }
  bool taken(size_t t) const { return taken_[t]; }

  void operator()(size_t t, const Tensor &gradient) override {
    if (t >= taken_.size() || taken_[t])
      fail(program_.model, "the step reported gradient " + std::to_string(t) + " of " +
                               std::to_string(taken_.size()) + (t < taken_.size() ? " twice" : ""));
    take(t, gradient);
    taken_[t] = true;
  }

  /// Gradient `t` of this microbatch, reported or returned: the same sum
  /// either way, so a gradient reported early adds bit for bit like one
  /// returned.
  void take(size_t t, const Tensor &gradient) {
    if (stage_) {
      if (gradient.integer)
        fail(program_.model, "the gradient of '" + program_.parameters[state_.trainable[t]].name + "' is integer");
      state_.sharded->stageGradient(t, gradient.floats.data(), int64_t(gradient.floats.size()),
                                    1.0f / float(microbatches_));
      return;
    }
    addMicrobatchGradient(program_, state_, t, state_.grads[t], gradient, microbatches_);
    if (overlap_)
      average_.add(t);
  }

private:
  const TrainingProgram &program_;
  State &state_;
  OverlappedGradientAverage &average_;
  int64_t microbatches_;
  bool overlap_ = false, stage_ = false;
  std::vector<bool> taken_;
};

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

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
                        "program has no ZeRO stage over its " + std::to_string(ranks) +
                        " ranks (recompile with --strategy zero=1,offload=optimizer)");
  Prepared p{o, loadWeights(program, o.weights, tensorRank, tensorRanks), nullptr};
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

/// Tensor parallelism's sums inside the step, over the tensor axis.
class TensorAxisCollectives : public StepCollectives {
public:
  explicit TensorAxisCollectives(Communicator *tp) : tp_(tp) {}
  Tensor allReduce(const Tensor &x, const std::string &axis) override { return reduce(x, axis, ReduceOp::Sum); }
  Tensor allReduceInPlace(Tensor &&x, const std::string &axis) override {
    return reduceInPlace(std::move(x), axis, ReduceOp::Sum);
  }
  Tensor allReduceMax(const Tensor &x, const std::string &axis) override { return reduce(x, axis, ReduceOp::Max); }
  int64_t rankOn(const std::string &axis) override { return communicator(axis, "a slice").rank(); }
  int64_t ranksOn(const std::string &axis) override { return communicator(axis, "a slice").size(); }

  Tensor allGather(const Tensor &x, const std::string &axis, int64_t dim) override {
    Communicator &c = communicator(axis, "an all-gather");
    Runs runs = runsOf(x, dim, "all-gather", axis);
    // Rank r's block [outer, n, inner] becomes columns [r n, (r + 1) n) of
    // the result's dimension.
    Floats gathered = buffer<float>(x.floats.size() * size_t(c.size()), MemoryCategory::Communication);
    c.allGather(Buffer::of(const_cast<float *>(x.floats.data()), DType::F32, int64_t(x.floats.size())),
                Buffer::of(gathered.data(), DType::F32, int64_t(gathered.size())));
    Shape shape = x.shape;
    shape[size_t(dim)] *= c.size();
    Tensor result = Tensor::zeros(shape);
    int64_t run = runs.size * runs.inner;
    for (int64_t r = 0; r < c.size(); ++r)
      for (int64_t o = 0; o < runs.outer; ++o)
        std::copy_n(gathered.begin() + (r * runs.outer + o) * run, run,
                    result.floats.begin() + (o * c.size() + r) * run);
    return result;
  }

  Tensor allToAll(const Tensor &x, const std::string &axis, int64_t splitDim, int64_t concatDim) override {
    Communicator &c = communicator(axis, "an all-to-all");
    Floats packed = host::blocksAlong(x, splitDim, c.size()),
           received = buffer<float>(packed.size(), MemoryCategory::Communication);
    c.allToAll(Buffer::of(packed.data(), DType::F32, int64_t(packed.size())),
               Buffer::of(received.data(), DType::F32, int64_t(received.size())));
    Shape block = x.shape;
    block[size_t(splitDim)] /= c.size();
    return host::joinAlong(received, block, concatDim, c.size());
  }

  Tensor ringShift(const Tensor &x, const std::string &axis) override {
    Communicator &c = communicator(axis, "a ring step");
    if (x.integer)
      fail("step", "a ring step of integers over '" + axis + "'");
    Tensor received = Tensor::zeros(x.shape);
    int next = (c.rank() + 1) % c.size(), previous = (c.rank() + c.size() - 1) % c.size();
    c.sendRecv({{PeerTransfer::Send, next, Buffer::of(const_cast<float *>(x.floats.data()), DType::F32,
                                                     int64_t(x.floats.size()))},
                {PeerTransfer::Recv, previous,
                 Buffer::of(received.floats.data(), DType::F32, int64_t(received.floats.size()))}});
    return received;
  }

  Tensor reduceScatter(const Tensor &x, const std::string &axis, int64_t dim) override {
    Communicator &c = communicator(axis, "a reduce-scatter");
    Runs runs = runsOf(x, dim, "reduce-scatter", axis);
    if (runs.size % c.size())
      fail("step", "a reduce-scatter of " + host::describe(x.shape) + " along dimension " + std::to_string(dim) +
                       " over " + std::to_string(c.size()) + " ranks of '" + axis + "'");
    // Packed so rank r's slice is the r-th contiguous block.
    int64_t part = runs.size / c.size() * runs.inner;
    Floats packed = buffer<float>(x.floats.size(), MemoryCategory::Communication);
    for (int64_t r = 0; r < c.size(); ++r)
      for (int64_t o = 0; o < runs.outer; ++o)
        std::copy_n(x.floats.begin() + (o * c.size() + r) * part, part,
                    packed.begin() + (r * runs.outer + o) * part);
    Shape shape = x.shape;
    shape[size_t(dim)] /= c.size();
    Tensor result = Tensor::zeros(shape);
    c.reduceScatter(Buffer::of(packed.data(), DType::F32, int64_t(packed.size())),
                    Buffer::of(result.floats.data(), DType::F32, int64_t(result.floats.size())));
    return result;
  }

private:
  /// A tensor as [outer, size, inner] around dimension `dim`.
  struct Runs {
    int64_t outer = 1, size = 1, inner = 1;
  };
  Runs runsOf(const Tensor &x, int64_t dim, const char *what, const std::string &axis) {
    if (x.integer || dim < 0 || size_t(dim) >= x.shape.size())
      fail("step", std::string("an ") + what + " over '" + axis + "' of " + host::describe(x.shape) +
                       (x.integer ? " integers" : "") + " along dimension " + std::to_string(dim));
    Runs runs;
    runs.size = x.shape[size_t(dim)];
    for (size_t d = 0; d < size_t(dim); ++d)
      runs.outer *= x.shape[d];
    for (size_t d = size_t(dim) + 1; d < x.shape.size(); ++d)
      runs.inner *= x.shape[d];
    return runs;
  }

  Communicator &communicator(const std::string &axis, const std::string &what) {
    if (!tp_ || axis != tp_->axis())
      fail("step", what + " over mesh axis '" + axis + "', which this run does not have");
    return *tp_;
  }
  Tensor reduce(const Tensor &x, const std::string &axis, ReduceOp op) { return reduceInPlace(Tensor(x), axis, op); }

  Tensor reduceInPlace(Tensor &&x, const std::string &axis, ReduceOp op) {
    Communicator &c = communicator(axis, "an all-reduce");
    if (x.integer)
      fail("step", "an all-reduce of an integer tensor over '" + axis + "'");
    Tensor result = std::move(x);
    c.allReduce(Buffer::of(result.floats.data(), DType::F32, int64_t(result.floats.size())), op);
    return result;
  }

  Communicator *tp_;
};

/// The ranks a rank trains with: the data-parallel axis, the tensor axis
/// (null without tensor parallelism) and every rank (checkpoints, the log).
struct RankGroups {
  Communicator &dp;
  Communicator *tp;
  Communicator &world;
};

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

/// `overlapAllowed`: the communicator may be driven from a second thread (one
/// at a time), so gradient buckets can be reduced during the backward pass.
void train(const TrainingProgram &program, Prepared &p, const RankGroups &groups, CommCounters *counters,
           bool overlapAllowed) {
  const Options &o = p.options;
  State &s = p.state;
  Communicator &dp = groups.dp;
  Communicator *tp = groups.tp && groups.tp->size() > 1 ? groups.tp : nullptr;
  int64_t tensorRank = tp ? tp->rank() : 0, tensorRanks = tp ? tp->size() : 1;
  // The step's own sums run on this thread: no second thread may talk then.
  overlapAllowed = overlapAllowed && !tp;
  TensorAxisCollectives collectives(tp);
  // The split tensors' norms are the sums of their slices' over the tensor
  // axis (two floats per tensor); whole tensors' are every rank's own.
  std::vector<size_t> split;
  for (size_t t = 0; t < s.trainable.size(); ++t)
    if (program.parameters[s.trainable[t]].splitDim >= 0)
      split.push_back(t);
  CompleteSquares completeSplit;
  if (tp && !split.empty())
    completeSplit = [&](std::vector<float> &squares) {
      std::vector<float> packed;
      for (size_t t : split)
        packed.push_back(squares[2 * t]), packed.push_back(squares[2 * t + 1]);
      tp->allReduce(Buffer::of(packed.data(), DType::F32, int64_t(packed.size())));
      for (size_t k = 0; k < split.size(); ++k)
        squares[2 * split[k]] = packed[2 * k], squares[2 * split[k] + 1] = packed[2 * k + 1];
    };
  bool lead = groups.world.rank() == 0;
  s.lossScale = o.settings.lossScaling.dynamic ? o.settings.lossScaling.initial : 1.0;
  int64_t start = o.resume.empty() ? 0 : resumeState(groups.world, o.resume, program, o, s);
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
  StepLog log(lead ? o.log : std::string());
  ProgressLine progress(o.settings.steps, lead && !o.quiet);
  auto begin = std::chrono::steady_clock::now();
  int64_t microbatches = o.settings.microbatches;
  std::vector<int64_t> gradientElements;
  for (size_t index : s.trainable)
    gradientElements.push_back(elementsOf(program.parameters[index].shape));
  OverlappedGradientAverage average(dp, planGradientBuckets(gradientElements, o.settings.gradientBucketBytes),
                                    s.grads);
  ReportedGradients reported(program, s, average, microbatches);
  for (int64_t step = start + 1; step <= o.settings.steps; ++step) {
    auto stepBegin = std::chrono::steady_clock::now();
    MemoryTracker::global().resetPeaks();
    MemoryTracker::planned().resetPeaks();
    if (counters)
      counters->reset();
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
    for (int64_t m = 0; m < microbatches; ++m) {
      std::vector<Tensor> inputs = p.data->microbatch(step - 1, m), grads;
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
        program.step(inputs, stepParameters, random, float(s.lossScale), microLoss, grads, reported, collectives);
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
    // The step's mean loss over the data-parallel ranks, for the log: one
    // all-reduce of a float, counted and predicted like the others.
    averageOverRanks(dp, &loss, 1);
    // The gradients are of the scaled loss until the optimizer unscales them.
    float unscale = float(1.0 / s.lossScale);
    std::optional<GradientDump> dump;
    if (!o.dumpGradients.empty() && step == start + 1)
      dump = scatterEachMicrobatch ? GradientDump::ofShard(s.sharded->gradientShard(), unscale)
                                   : GradientDump::ofTensors(s.grads, unscale);
    double gradNorm = (s.sharded ? s.sharded->gradientNorm() : gradientNorm(s.tensors, completeSplit)) * unscale;
    double lr = schedule.at(step);
    double stepLossScale = s.lossScale;
    // Every rank computes the same norm (after the gradients' reduction), so
    // every rank skips the same steps.
    bool skip = o.settings.lossScaling.dynamic && std::isfinite(loss) && !std::isfinite(gradNorm);
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
      if (s.sharded)
        s.sharded->step(lr, s.updates, gradScale);
      else
        optimizerStep(o.settings.optimizer, lr, s.updates, s.tensors, gradScale, completeSplit);
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
    if (counters)
      record.extra.push_back({"comm", comm});
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
  }
  progress.finish();
  if (!o.save.empty())
    saveState(groups.world, o.save, program, o, s, std::max(start, o.settings.steps), tensorRank, tensorRanks);
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
    train(program, p, RankGroups{dp, nullptr, dp}, nullptr, /*overlapAllowed=*/false);
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
int trainParallel(int argc, char **argv, const TrainingProgram &program, int ranks, int tensorRanks) {
  MpiSession mpi(&argc, &argv);
  CommCounters counters;
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world(&counters);
  // The tensor axis inside: its ranks are neighbours (one node).
  const std::string &inner = program.settings.modelAxis;
  std::string mesh =
      "dp=" + std::to_string(ranks) + (tensorRanks > 1 ? "," + inner + "=" + std::to_string(tensorRanks) : "");
  ProcessGroups groups = ProcessGroups::overMpi(MeshShape::parse(mesh), *world);
  Communicator &dp = groups.axis("dp");
  Communicator *tp = tensorRanks > 1 ? &groups.axis(inner) : nullptr;
  std::optional<Prepared> prepared;
  std::string call, reason;
  bool help = false;
  try {
    std::optional<Options> options = parseOptions(argc, argv, program, /*printHelp=*/mpi.rank() == 0);
    if (!options)
      help = true;
    else
      prepared.emplace(prepare(program, *options, dp.rank(), ranks, tp ? tp->rank() : 0, tensorRanks));
  } catch (const Error &e) {
    call = e.call(), reason = e.reason();
  } catch (const std::exception &e) {
    call = program.model, reason = e.what();
  }
  int worldSize = ranks * tensorRanks;
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
        train(program, *prepared, RankGroups{dp, tp, *world}, &counters, mpi.threadsMayCommunicate());
        return 0;
      },
      [] { MpiSession::abort(1); });
}

} // namespace

int trainerMain(int argc, char **argv, const TrainingProgram &program) {
  // Every step allocates the same tensors again: keep freed blocks in the
  // heap rather than returning them to the system and faulting them back in.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  int ranks = int(program.settings.ranks), tensorRanks = int(std::max<int64_t>(program.settings.tensorRanks, 1));
  int worldSize = ranks * tensorRanks;
  LaunchInfo launch;
  try {
    launch = detectLaunch();
  } catch (const Error &e) {
    printError(argv[0], e.call(), e.reason());
    return 1;
  }
  if (launch.worldSize != worldSize) {
    std::string compiled = std::to_string(ranks) + " data-parallel rank" + (ranks == 1 ? "" : "s") +
                           (tensorRanks > 1 ? " x " + std::to_string(tensorRanks) +
                                                (program.settings.modelAxis == "sp" ? " sequence-parallel ranks"
                                                                                    : " tensor-parallel ranks")
                                          : "");
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
  return worldSize == 1 ? trainAlone(argc, argv, program) : trainParallel(argc, argv, program, ranks, tensorRanks);
}

} // namespace colossal::rt
