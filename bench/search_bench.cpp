//===- search_bench.cpp - how long the plan search takes, and how good -----===//
//
// For the GPT configurations of the Megatron-LM README's weak-scaling table
// (1.7B to 1T parameters on 32 to 3072 A100s, vocabulary 51200, sequence
// 2048), on one CPU core:
// - the search time for `--gpus N` with the table's global batch;
// - the searched plan's predicted step time against the table's tensor and
//   pipeline sizes (data parallelism filling the rest) completed by the same
//   search (microbatch, schedule, memory options), under the same cost model;
// and a sweep over depth at fixed width. The same ten shapes are searched on
// DGX H100 nodes too (`dgx-h100`, against the same published tensor and
// pipeline sizes): the README's H100 scaling table is a figure whose
// configurations are not reproduced here. Writes JSON.
//
//   search-bench [OUTPUT.json] [--quick]
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Search.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

using namespace colossal::cost;

namespace {

struct Config {
  const char *name;
  int64_t heads, hidden, layers;
  int tp, pp, gpus;
  int64_t batch;
};

// Megatron-LM README, "weak scaling" table.
const Config kConfigs[] = {
    {"1.7B", 24, 2304, 24, 1, 1, 32, 512},         {"3.6B", 32, 3072, 30, 2, 1, 64, 512},
    {"7.5B", 32, 4096, 36, 4, 1, 128, 512},        {"18B", 48, 6144, 40, 8, 1, 256, 1024},
    {"39B", 64, 8192, 48, 8, 2, 512, 1536},        {"76B", 80, 10240, 60, 8, 4, 1024, 1792},
    {"145B", 96, 12288, 80, 8, 8, 1536, 2304},     {"310B", 128, 16384, 96, 8, 16, 1920, 2160},
    {"530B", 128, 20480, 105, 8, 35, 2520, 2520},  {"1T", 160, 25600, 128, 8, 64, 3072, 3072},
};

TransformerShape shapeOf(int64_t heads, int64_t hidden, int64_t layers) {
  TransformerShape s;
  s.heads = heads;
  s.hidden = hidden;
  s.layers = layers;
  s.seq = 2048;
  s.vocab = 51200;
  return s;
}

Json planJson(const SearchResult &r) {
  if (r.best.empty())
    return Json::Object{{"infeasible", r.infeasible}};
  const SearchCandidate &w = r.best.front();
  return Json::Object{{"strategy", w.strategy.str()},
                      {"microbatch_size", double(w.microbatchSize)},
                      {"step_time_s", w.estimate.stepTime},
                      {"mfu", w.estimate.mfu},
                      {"search_s", r.seconds},
                      {"candidates", double(r.candidates)},
                      {"evaluated", double(r.evaluated)}};
}

} // namespace

int main(int argc, char **argv) {
  std::string output;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else
      output = argv[i];
  }
  Json::Array configs, sweep;
  for (const char *preset : {"dgx-a100", "dgx-h100"})
  for (const Config &c : kConfigs) {
    if (quick && c.gpus > 256)
      continue;
    TransformerShape shape = shapeOf(c.heads, c.hidden, c.layers);
    Cluster cluster = *Cluster::preset(preset, (c.gpus + 7) / 8);
    SearchOptions options;
    options.devices = c.gpus;
    options.globalBatch = c.batch;
    SearchResult searched = searchPlans(shape, cluster, options);
    SearchOptions published = options;
    published.fixed.tp = c.tp;
    published.fixed.pp = c.pp;
    published.fixedKeys = {"tp", "pp", "tp_mode", "sp"};
    published.fixed.tpMode = TensorMode::OneD;
    published.fixed.sp = 1;
    SearchResult handTuned = searchPlans(shape, cluster, published);
    double ratio = (searched.best.empty() || handTuned.best.empty())
                       ? 0
                       : searched.best.front().estimate.stepTime /
                             handTuned.best.front().estimate.stepTime;
    std::printf("%5s on %4d GPUs of %s: search %6.2f s (%lld evaluated of %lld), searched/published "
                "step %.3f\n",
                c.name, c.gpus, preset, searched.seconds, (long long)searched.evaluated,
                (long long)searched.candidates, ratio);
    std::fflush(stdout);
    configs.push_back(Json::Object{
        {"model", c.name},
        {"cluster", preset},
        {"parameters", double(buildTransformer(shape).parameterCount())},
        {"gpus", c.gpus},
        {"global_batch", double(c.batch)},
        {"searched", planJson(searched)},
        {"published_tp_pp", planJson(handTuned)},
        {"published", Json::Object{{"tp", c.tp}, {"pp", c.pp}}},
        {"step_time_ratio_searched_over_published", ratio}});
  }
  // Depth at fixed width: the whole search (deeper models also admit deeper
  // pipelines, so the candidate space grows), and the search at a fixed
  // pipeline depth (the same candidates at every depth: the time per plan
  // evaluated must not grow, since identical layers are costed once).
  for (int layers : {24, 96, 384, 1536}) {
    if (quick && layers > 96)
      continue;
    TransformerShape shape = shapeOf(32, 4096, layers);
    Cluster cluster = *Cluster::preset("dgx-a100", 128);
    SearchOptions options;
    options.devices = 1024;
    options.globalBatch = 1536;
    SearchResult r = searchPlans(shape, cluster, options);
    SearchOptions fixedDepth = options;
    fixedDepth.fixed.pp = 16;
    fixedDepth.fixedKeys = {"pp"};
    SearchResult f = searchPlans(shape, cluster, fixedDepth);
    std::printf("depth %4d at hidden 4096 on 1024 GPUs: search %6.2f s (%5lld evaluated, %4.0f us each); "
                "at pp=16 %5.2f s (%4lld evaluated, %4.0f us each)\n",
                layers, r.seconds, (long long)r.evaluated, 1e6 * r.seconds / double(std::max<int64_t>(1, r.evaluated)),
                f.seconds, (long long)f.evaluated, 1e6 * f.seconds / double(std::max<int64_t>(1, f.evaluated)));
    std::fflush(stdout);
    sweep.push_back(Json::Object{{"layers", layers},
                                 {"plan", planJson(r)},
                                 {"us_per_evaluation", 1e6 * r.seconds / double(std::max<int64_t>(1, r.evaluated))},
                                 {"fixed_pp16", planJson(f)},
                                 {"fixed_pp16_us_per_evaluation",
                                  1e6 * f.seconds / double(std::max<int64_t>(1, f.evaluated))}});
  }
  Json result = Json::Object{{"benchmark", "search"},
                             {"clusters", Json::Array{"dgx-a100", "dgx-h100"}},
                             {"configs", configs},
                             {"depth_sweep", sweep}};
  if (!output.empty()) {
    std::ofstream out(output);
    out << result.dump() << "\n";
    if (!out) {
      std::cerr << "search-bench: cannot write " << output << "\n";
      return 1;
    }
  }
  return 0;
}
