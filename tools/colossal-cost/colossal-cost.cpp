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
#include "colossal/cost/Search.h"
#include "colossal/cost/TransformerBuilder.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <unistd.h>

using namespace colossal::cost;

namespace {

const char *kUsage = "usage: colossal-cost [--model gpt|bert|llama] [--layers N] [--hidden N] [--heads N]\n"
                     "                     [--kv-heads N] [--seq N] [--vocab N] [--ffn N] [--microbatch N]\n"
                     "                     [--cluster NAME|FILE] [--nodes N] --strategy SPEC\n"
                     "                     [--json FILE] [--trace FILE]\n"
                     "       colossal-cost [model options] --gpus N --global-batch B [--strategy PARTIAL]\n"
                     "                     [--cluster NAME|FILE] [--exhaustive] [--json FILE] [--trace FILE]\n"
                     "       colossal-cost [model options] --plan FILE   (a plan written by --json)\n"
                     "       colossal-cost --cluster NAME|FILE [--nodes N] --dump-cluster FILE|-\n"
                     "  --cluster   a preset (dgx-a100, dgx-h100, h200-node, host) or a colossal-cluster/1 JSON file\n"
                     "  --strategy  dp=..,tp=..,pp=..,sp=..,sp_mode=none|megatron|all-to-all|ring,\n"
                     "              microbatches=..,schedule=gpipe|1f1b|interleaved,virtual_stages=..,\n"
                     "              zero=0..3,offload=none|optimizer,recompute=none|selective|full\n"
                     "  --gpus      search the plan for N devices (fixing whatever --strategy names);\n"
                     "              the cluster gets enough nodes for them\n";

int fail(const std::string &message) {
  std::cerr << "colossal-cost: error: " << message << "\n";
  return 1;
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text << "\n";
  return bool(out);
}

void printEstimate(const Estimate &e) { std::fputs(e.summary().c_str(), stdout); }

int runSearch(std::map<std::string, std::string> &args, const TransformerShape &shape,
              const Cluster &cluster) {
  SearchOptions options;
  options.devices = std::atoi(args["gpus"].c_str());
  options.globalBatch = std::atoll(args.count("global-batch") ? args["global-batch"].c_str() : "0");
  if (options.globalBatch < 1)
    return fail("--global-batch B (samples per step over all replicas) is required with --gpus");
  options.exhaustive = args.count("exhaustive") > 0;
  if (args.count("strategy")) {
    std::string error;
    auto fixed = Strategy::parse(args["strategy"], error, &options.fixedKeys);
    if (!fixed)
      return fail(error);
    options.fixed = *fixed;
  }
  bool terminal = isatty(2);
  options.progress = [&](int64_t evaluated, int64_t candidates) {
    if (terminal)
      std::fprintf(stderr, "\rsearching: %lld plans evaluated of %lld candidates",
                   (long long)evaluated, (long long)candidates);
  };
  SearchResult result = searchPlans(shape, cluster, options);
  if (terminal && result.seconds >= 1)
    std::fprintf(stderr, "\r%60s\r", "");
  std::printf("search     %lld candidates, %lld evaluated, %lld pruned by memory, %lld by time, "
              "%lld invalid, %.2f s\n",
              (long long)result.candidates, (long long)result.evaluated,
              (long long)result.prunedByMemory, (long long)result.prunedByTime,
              (long long)result.invalid, result.seconds);
  if (result.best.empty())
    return fail(result.infeasible);
  const SearchCandidate &winner = result.best.front();
  std::printf("plan       %s, microbatch size %lld\n", winner.strategy.str().c_str(),
              (long long)winner.microbatchSize);
  std::printf("mesh      ");
  for (const MeshAxis &axis : winner.estimate.mesh.axes)
    if (axis.size > 1)
      std::printf(" %s=%d (%s)", axis.name.c_str(), axis.size,
                  axis.spansNodes() ? "across nodes" : "inside a node");
  std::printf("\n");
  printEstimate(winner.estimate);
  std::printf("executable: not yet; the partitioner that runs plans is a later stage\n");
  if (result.best.size() > 1)
    std::printf("alternatives:\n");
  for (size_t i = 1; i < result.best.size(); ++i)
    std::printf("  %s, microbatch size %lld: %s\n", result.best[i].strategy.str().c_str(),
                (long long)result.best[i].microbatchSize,
                explainLoss(result.best[i], winner).c_str());
  Json json = winner.estimate.toJson();
  json.asObject()["microbatch_size"] = double(winner.microbatchSize);
  Json::Array alternatives;
  for (size_t i = 1; i < result.best.size(); ++i)
    alternatives.push_back(Json::Object{
        {"strategy", result.best[i].strategy.toJson()},
        {"microbatch_size", double(result.best[i].microbatchSize)},
        {"step_time_s", result.best[i].estimate.stepTime},
        {"why_slower", explainLoss(result.best[i], winner)}});
  json.asObject()["search"] = Json::Object{{"candidates", double(result.candidates)},
                                           {"evaluated", double(result.evaluated)},
                                           {"seconds", result.seconds},
                                           {"alternatives", alternatives}};
  if (args.count("json") && !writeFile(args["json"], json.dump()))
    return fail("cannot write " + args["json"]);
  if (args.count("trace")) {
    // The search keeps no per-task timeline; simulate the winner again with one.
    TransformerShape traced = shape;
    traced.microbatch = winner.microbatchSize;
    std::string error;
    std::optional<Estimate> e = estimate(buildTransformer(traced), winner.strategy, cluster, error);
    if (!e)
      return fail("re-estimating the plan for its trace: " + error);
    if (!writeFile(args["trace"], e->chromeTrace().dump(0)))
      return fail("cannot write " + args["trace"]);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::map<std::string, std::string> args = {{"model", "gpt"}, {"layers", "24"},       {"hidden", "2048"},
                                             {"heads", "16"},  {"seq", "2048"},        {"vocab", "51200"},
                                             {"ffn", "0"},     {"microbatch", "1"},    {"kv-heads", "0"},
                                             {"nodes", "1"},   {"cluster", "dgx-a100"}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--dump-cluster" && i + 1 < argc) {
      args["dump-cluster"] = argv[++i];
      continue;
    }
    if (arg == "--exhaustive") {
      args["exhaustive"] = "1";
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg.rfind("--", 0) != 0 || i + 1 >= argc)
      return fail("unexpected argument '" + arg + "'\n" + kUsage);
    if (arg == "--nodes")
      args["nodes-given"] = "1";
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
  if (!integer("layers", shape.layers) || !integer("hidden", shape.hidden) || !integer("heads", shape.heads) ||
      !integer("seq", shape.seq) || !integer("vocab", shape.vocab) || !integer("ffn", shape.ffn) ||
      !integer("kv-heads", shape.kvHeads) || !integer("microbatch", shape.microbatch) || !integer("nodes", nodes) ||
      nodes < 1 || shape.layers < 1 || shape.hidden < 1 || shape.heads < 1 || shape.seq < 1 || shape.vocab < 1 ||
      shape.microbatch < 1 || shape.hidden % shape.heads != 0 ||
      (shape.kvHeads > 0 && shape.heads % shape.kvHeads != 0))
    return fail("model sizes must be positive integers (--ffn and --kv-heads may be 0: the family's default, "
                "as many key heads as query heads), hidden divisible by heads, heads by kv-heads");
  std::string error;
  if (args.count("gpus")) {
    // Enough nodes of the preset for the requested devices.
    int64_t gpus = std::atoll(args["gpus"].c_str());
    auto probe = Cluster::preset(args["cluster"], 1);
    if (gpus < 1)
      return fail("--gpus must be a positive integer");
    if (probe && !args.count("nodes-given"))
      nodes = std::max<int64_t>(nodes, (gpus + probe->gpusPerNode - 1) / probe->gpusPerNode);
  }
  std::optional<Cluster> cluster = Cluster::load(args["cluster"], int(nodes), error);
  if (!cluster)
    return fail(error);
  if (args.count("dump-cluster")) {
    // A starting point for describing another machine: edit and pass back
    // ("-": standard output).
    if (args["dump-cluster"] == "-") {
      std::cout << cluster->toJson().dump() << "\n";
      return 0;
    }
    if (!writeFile(args["dump-cluster"], cluster->toJson().dump()))
      return fail("cannot write " + args["dump-cluster"]);
    return 0;
  }
  if (args.count("gpus"))
    return runSearch(args, shape, *cluster);
  std::optional<Strategy> strategy;
  if (args.count("plan")) {
    // A plan written by --json: its strategy and microbatch size.
    std::ifstream in(args["plan"]);
    std::stringstream text;
    text << in.rdbuf();
    auto json = in ? Json::parse(text.str(), error) : std::nullopt;
    if (!json)
      return fail(args["plan"] + ": " + (in ? error : std::string("cannot read the file")));
    const Json *object = json->find("strategy");
    if (!object)
      return fail(args["plan"] + ": no strategy section");
    strategy = Strategy::fromJson(*object, error);
    if (!strategy)
      return fail(args["plan"] + ": " + error);
    if (const Json *mb = json->find("microbatch_size"); mb && mb->isNumber())
      shape.microbatch = int64_t(mb->asNumber());
  } else if (args.count("strategy")) {
    strategy = Strategy::parse(args["strategy"], error);
    if (!strategy)
      return fail(error);
  } else {
    return fail("--strategy, --plan or --gpus is required\n" + std::string(kUsage));
  }

  Graph graph = buildTransformer(shape);
  auto e = estimate(graph, *strategy, *cluster, error);
  if (!e)
    return fail("the plan cannot run: " + error);

  std::printf("model      %s, %.2fB parameters, %lld layers\n", args["model"].c_str(),
              graph.parameterCount() / 1e9, (long long)shape.layers);
  std::printf("cluster    %s x %d nodes (%d devices); %s\n", cluster->name.c_str(),
              cluster->nodes, cluster->devices(), cluster->calibration.c_str());
  if (!cluster->provenance().empty())
    std::printf("           %s\n", cluster->provenance().c_str());
  std::printf("strategy   %s\n", strategy->str().c_str());
  printEstimate(*e);
  Json json = e->toJson();
  json.asObject()["microbatch_size"] = double(shape.microbatch);
  if (args.count("json") && !writeFile(args["json"], json.dump()))
    return fail("cannot write " + args["json"]);
  if (args.count("trace") && !writeFile(args["trace"], e->chromeTrace().dump(0)))
    return fail("cannot write " + args["trace"]);
  return e->fits() ? 0 : 3;
}
