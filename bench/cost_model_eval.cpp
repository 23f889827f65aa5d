//===- cost_model_eval.cpp - how long one full-model cost evaluation takes -===//
//
// The search evaluates many plans; this measures one evaluation of a
// 96-layer GPT-3-shaped graph (and of smaller and deeper ones, to show how
// the time grows with depth) on one CPU core, and writes the numbers as JSON.
//
//   cost-model-bench [OUTPUT.json]
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

using namespace colossal::cost;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Json measure(int layers, const char *strategyText, int nodes) {
  TransformerShape shape;
  shape.layers = layers;
  shape.hidden = 12288;
  shape.heads = 96;
  shape.seq = 2048;
  shape.vocab = 51200;
  shape.microbatch = 1;
  auto start = Clock::now();
  Graph graph = buildTransformer(shape);
  double buildSeconds = secondsSince(start);

  Cluster cluster = *Cluster::preset("dgx-a100", nodes);
  std::string error;
  Strategy strategy = *Strategy::parse(strategyText, error);
  // Warm up once, then time repeated evaluations; report the median.
  auto e = estimate(graph, strategy, cluster, error);
  if (!e) {
    std::cerr << "cost-model-bench: " << error << "\n";
    std::exit(1);
  }
  std::vector<double> samples;
  for (int i = 0; i < 25; ++i) {
    auto t = Clock::now();
    auto again = estimate(graph, strategy, cluster, error);
    samples.push_back(secondsSince(t));
    if (!again || again->stepTime != e->stepTime) {
      std::cerr << "cost-model-bench: evaluation is not deterministic\n";
      std::exit(1);
    }
  }
  std::sort(samples.begin(), samples.end());
  return Json::Object{{"layers", layers},
                      {"ops", int64_t(graph.ops.size())},
                      {"parameters", double(graph.parameterCount())},
                      {"devices", cluster.devices()},
                      {"strategy", strategyText},
                      {"graph_build_s", buildSeconds},
                      {"evaluation_median_s", samples[samples.size() / 2]},
                      {"evaluation_min_s", samples.front()},
                      {"predicted_step_time_s", e->stepTime},
                      {"predicted_mfu", e->mfu},
                      {"predicted_peak_memory_bytes", e->memory.total()}};
}

} // namespace

int main(int argc, char **argv) {
  Json::Array runs;
  const char *strategy = "dp=8,tp=8,pp=16,microbatches=128,sp_mode=megatron,zero=1,"
                         "recompute=selective";
  for (int layers : {48, 96, 192}) {
    runs.push_back(measure(layers, strategy, 128));
    const Json &r = runs.back();
    std::printf("%4d layers, %6.0f ops: evaluation %.2f ms (graph build %.2f ms)\n", layers,
                r.find("ops")->asNumber(), 1e3 * r.find("evaluation_median_s")->asNumber(),
                1e3 * r.find("graph_build_s")->asNumber());
  }
  Json result = Json::Object{{"benchmark", "cost_model_eval"},
                             {"cluster", "dgx-a100 x 128 nodes"},
                             {"model", "GPT, hidden 12288, 96 heads, seq 2048, vocab 51200"},
                             {"runs", runs}};
  if (argc > 1) {
    std::ofstream out(argv[1]);
    out << result.dump() << "\n";
    if (!out) {
      std::cerr << "cost-model-bench: cannot write " << argv[1] << "\n";
      return 1;
    }
  } else {
    std::cout << result.dump() << "\n";
  }
  return 0;
}
