//===- colossal-cost.cpp - evaluate a plan with the cost model ------------===//
//
//   colossal-cost --model gpt --layers 96 --hidden 12288 --heads 96 --seq 2048
//                 --vocab 51200 --microbatch 1 --cluster dgx-a100 --nodes 192
//                 --strategy dp=12,tp=8,pp=16,microbatches=128,schedule=interleaved,...
//                 [--json FILE] [--trace FILE]
//
// Prints the predicted step time breakdown and memory per rank; --json writes
// the plan's strategy, mesh, predicted, memory and communication sections;
// --trace writes one predicted step as Chrome-trace JSON (open in Perfetto).
// Uses only the cost model (no MLIR), so it runs anywhere.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

using namespace colossal::cost;

namespace {

const char *kUsage =
    "usage: colossal-cost [--model gpt|bert|llama] [--layers N] [--hidden N] [--heads N]\n"
    "                     [--seq N] [--vocab N] [--ffn N] [--microbatch N]\n"
    "                     [--cluster NAME|FILE] [--nodes N] --strategy SPEC\n"
    "                     [--json FILE] [--trace FILE]\n"
    "       colossal-cost --cluster NAME|FILE [--nodes N] --dump-cluster FILE\n"
    "  --cluster   a preset (dgx-a100, dgx-h100, h200-node) or a colossal-cluster/1 JSON file\n"
    "  --strategy  dp=..,tp=..,pp=..,sp=..,sp_mode=none|megatron|all-to-all|ring,\n"
    "              microbatches=..,schedule=gpipe|1f1b|interleaved,virtual_stages=..,\n"
    "              zero=0..3,offload=none|optimizer,recompute=none|selective|full\n";

int fail(const std::string &message) {
  std::cerr << "colossal-cost: error: " << message << "\n";
  return 1;
}

std::string gib(double bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / double(1ull << 30));
  return buffer;
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text << "\n";
  return bool(out);
}

} // namespace

int main(int argc, char **argv) {
  std::map<std::string, std::string> args = {
      {"model", "gpt"}, {"layers", "24"},    {"hidden", "2048"},       {"heads", "16"},
      {"seq", "2048"},  {"vocab", "51200"},  {"ffn", "0"},             {"microbatch", "1"},
      {"nodes", "1"},   {"cluster", "dgx-a100"}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--dump-cluster" && i + 1 < argc) {
      args["dump-cluster"] = argv[++i];
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg.rfind("--", 0) != 0 || i + 1 >= argc)
      return fail("unexpected argument '" + arg + "'\n" + kUsage);
    args[arg.substr(2)] = argv[++i];
  }
  auto integer = [&](const char *key, int64_t &out) {
    char *end = nullptr;
    out = std::strtoll(args[key].c_str(), &end, 10);
    return end && *end == 0 && out >= 0;
  };
  TransformerShape shape;
  auto family = parseFamily(args["model"]);
  if (!family)
    return fail("--model must be gpt, bert or llama");
  shape.family = *family;
  int64_t nodes;
  if (!integer("layers", shape.layers) || !integer("hidden", shape.hidden) ||
      !integer("heads", shape.heads) || !integer("seq", shape.seq) ||
      !integer("vocab", shape.vocab) || !integer("ffn", shape.ffn) ||
      !integer("microbatch", shape.microbatch) || !integer("nodes", nodes) || nodes < 1 ||
      shape.layers < 1 || shape.hidden < 1 || shape.heads < 1 || shape.seq < 1 ||
      shape.vocab < 1 || shape.microbatch < 1 || shape.hidden % shape.heads != 0)
    return fail("model sizes must be positive integers (--ffn may be 0: the family's default), "
                "hidden divisible by heads");
  std::string error;
  std::optional<Cluster> cluster = Cluster::preset(args["cluster"], int(nodes));
  if (!cluster) {
    std::ifstream in(args["cluster"]);
    if (!in)
      return fail("--cluster '" + args["cluster"] + "' is neither a preset nor a readable file");
    std::stringstream text;
    text << in.rdbuf();
    auto json = Json::parse(text.str(), error);
    if (!json)
      return fail(args["cluster"] + ": " + error);
    cluster = Cluster::fromJson(*json, error);
    if (!cluster)
      return fail(args["cluster"] + ": " + error);
  }
  if (args.count("dump-cluster")) {
    // A starting point for describing another machine: edit and pass back.
    if (!writeFile(args["dump-cluster"], cluster->toJson().dump()))
      return fail("cannot write " + args["dump-cluster"]);
    return 0;
  }
  if (!args.count("strategy"))
    return fail("--strategy is required\n" + std::string(kUsage));
  auto strategy = Strategy::parse(args["strategy"], error);
  if (!strategy)
    return fail(error);

  Graph graph = buildTransformer(shape);
  auto e = estimate(graph, *strategy, *cluster, error);
  if (!e)
    return fail("the plan cannot run: " + error);

  std::printf("model      %s, %.2fB parameters, %lld layers\n", args["model"].c_str(),
              graph.parameterCount() / 1e9, (long long)shape.layers);
  std::printf("cluster    %s x %d nodes (%d devices); %s\n", cluster->name.c_str(),
              cluster->nodes, cluster->devices(), cluster->calibration.c_str());
  std::printf("strategy   %s\n", strategy->str().c_str());
  std::printf("step       %.4f s  (compute %.4f, exposed communication %.4f, bubble %.4f, "
              "optimizer %.4f, offload %.4f)\n",
              e->stepTime, e->compute, e->exposedComm, e->bubble, e->optimizer, e->offload);
  std::printf("throughput %.1f TFLOP/s per device (MFU %.1f%%), %.0f tokens/s\n", e->tflopsPerGpu,
              100 * e->mfu, e->tokensPerSecond);
  std::printf("memory     %s of %s on pipeline rank %d%s\n", gib(e->memory.total()).c_str(),
              gib(e->capacity).c_str(), e->peakStage, e->fits() ? "" : "  (DOES NOT FIT)");
  std::printf("           parameters %s, gradients %s, optimizer %s, activations %s, "
              "buffers %s, workspace %s\n",
              gib(e->memory.parameters).c_str(), gib(e->memory.gradients).c_str(),
              gib(e->memory.optimizer).c_str(), gib(e->memory.activations).c_str(),
              gib(e->memory.communication).c_str(), gib(e->memory.workspace).c_str());
  if (args.count("json") && !writeFile(args["json"], e->toJson().dump()))
    return fail("cannot write " + args["json"]);
  if (args.count("trace") && !writeFile(args["trace"], e->chromeTrace().dump(0)))
    return fail("cannot write " + args["trace"]);
  return e->fits() ? 0 : 3;
}
