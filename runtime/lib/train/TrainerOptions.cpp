//===- TrainerOptions.cpp ---------------------------------------------------===//

#include "TrainerOptions.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/ProgramFiles.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace colossal::rt::trainer {

namespace {

const char *kUsage = R"(usage: %s [flags]

Trains %s, compiled by colossal-compile, on the host.

  --steps N            optimizer steps to reach (default %lld; with --resume, the total)
  --seed S             seed of synthetic data and of the data order (default 0)
  --feed DIR           one .npy per graph input, named after it, holding the global
                       batch; a leading extra dimension holds one batch per step
  --data FILE          token file (u16/u32/.npy) for language models: inputs and
                       labels are consecutive windows of it
                       (default: synthetic data, the same for every run with one seed)
  --weights FILE       initial weights (default: weights.safetensors beside the program;
                       a program compiled with --init draws its trainable ones
                       from --seed unless this names a file)
  --log FILE           one JSON object per step: step, loss, lr, grad_norm,
                       loss_scale, tokens_per_s, time, memory (bytes by
                       category, current and peak) and, on several ranks,
                       comm (bytes by collective); a pipeline's other ranks,
                       whose stages hold other memory, log to
                       FILE.pipeline-rank-K
  --save DIR           write a checkpoint of the last step here (staged, then
                       published whole: a failed save leaves the previous one)
  --save-every N       also every N steps: DIR becomes a folder of checkpoints,
                       DIR/step-00000010, DIR/latest naming the newest
  --keep N             with --save-every, keep only the newest N (default all)
  --dump-gradients DIR write the first step's gradients (averaged over
                       microbatches and ranks, before clipping) as whole
                       tensors, DIR/NAME.npy (rank k: DIR/rank-0000k/NAME.npy)
  --trace FILE         each rank writes its last step as a Chrome trace,
                       FILE.rank-0000k.json: every forward and backward call
                       (F0, B0; F0+B0 without a pipeline) and the waits for
                       what a pipeline rank receives, or the gradients'
                       reduction and the optimizer; the names of
                       colossal-compile --emit=plan --trace
  --export DIR         write the trained weights as DIR/model.safetensors: whole
                       tensors under the ONNX initializers' (PyTorch's) names and
                       shapes, vocabulary padding removed; and DIR/model.onnx, the
                       model's graph with them
  --import FILE        start from exported weights (a model.safetensors of
                       --export, from any plan; the same as --weights FILE)
  --resume DIR         continue from a checkpoint written by --save (or the newest
                       of a folder of them), under this program's plan and
                       rank count whatever the writer's
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

} // namespace

void printUsage(const char *argv0, const TrainingProgram &p) {
  const TrainingSettings &s = p.settings;
  const OptimizerConfig &o = s.optimizer;
  std::printf(kUsage, argv0, p.model.c_str(), (long long)s.steps, nameOf(o.kind), o.lr, o.weightDecay, o.beta1, o.beta2,
              o.eps, o.momentum, o.eta, o.clipGradNorm, s.lossScaling.initial, (long long)s.lossScaling.window,
              (long long)s.warmupSteps, nameOf(s.schedule), double(s.gradientBucketBytes) / double(1 << 20),
              double(s.prefetchBytes) / double(1 << 20));
}

std::optional<Options> parseOptions(int argc, char **argv, const TrainingProgram &program, bool printHelp) {
  Options o;
  o.settings = program.settings;
  o.weights = besideProgram("weights.safetensors", argv[0]);
  bool epsGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      if (printHelp)
        printUsage(argv[0], program);
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
    static const char *const kValued[] = {"--steps",        "--seed",
                                          "--feed",         "--data",
                                          "--weights",      "--log",
                                          "--save",         "--resume",
                                          "--optimizer",    "--lr",
                                          "--weight-decay", "--clip-grad-norm",
                                          "--warmup-steps", "--schedule",
                                          "--eps",          "--beta1",
                                          "--beta2",        "--momentum",
                                          "--eta",          "--dump-gradients",
                                          "--loss-scale",   "--loss-scale-window",
                                          "--bucket-mb",    "--prefetch-mb",
                                          "--save-every",   "--keep",
                                          "--export",       "--import",
                                          "--trace"};
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
    else if (flag == "--weights" || flag == "--import")
      o.weights = value, o.weightsGiven = true;
    else if (flag == "--log")
      o.log = value;
    else if (flag == "--save")
      o.save = value;
    else if (flag == "--resume")
      o.resume = value;
    else if (flag == "--export")
      o.exportDir = value;
    else if (flag == "--save-every")
      o.saveEvery = parseCount(flag, value, 1);
    else if (flag == "--keep")
      o.keep = parseCount(flag, value, 1);
    else if (flag == "--dump-gradients")
      o.dumpGradients = value;
    else if (flag == "--trace")
      o.trace = value;
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
    } else if (flag == "--bucket-mb") {
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
  if ((o.saveEvery > 0 || o.keep > 0) && o.save.empty())
    fail(o.saveEvery > 0 ? "--save-every" : "--keep", "needs --save DIR");
  if (o.keep > 0 && o.saveEvery == 0)
    fail("--keep", "keeps the newest of a folder of checkpoints: give --save-every N too");
  return o;
}

} // namespace colossal::rt::trainer
